"""The metric-driven control loop: reaction time, data-path overhead, aggregation rate.

Three measurements, each against a baseline taken in the same run:

1. Reaction time. ``FOR CONTAINER <c> WHEN PUTS_SEC > 3 DO SET COMPRESSION``,
   then PUTs at ``--rate`` per second: the time from the end of the first
   interval in which the condition held (as the actor recorded it) to the
   start of the first PUT stored compressed. Repeated ``--trials`` times;
   p50 and p95 (target: p95 <= 2 s with 1 s intervals).
2. Overhead of the metric middleware: 1 KiB GETs through a proxy with it vs
   one without it (otherwise the same pipeline) on the same servers,
   alternating runs; the ratio of medians (target >= 0.97).
3. Aggregation rate: ``--proxies`` simulated proxies each publishing batches of
   ``--tenants`` samples through the real broker to a consumer feeding the
   controller's ``Aggregator`` as fast as they can; samples/s consumed, and the
   headroom over what that many proxies send at 1 s intervals.

    .venv/bin/python bench/control_loop.py [--trials 10] [--repeat 5] [--seconds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from common import (
    Client,
    Policies,
    auth,
    median_result,
    print_table,
    run_clients,
    stack,
    start_proxy,
)

from iostack.aio.processes import ProcessManager
from iostack.controller.client import ControllerClient
from iostack.monitoring.aggregator import Aggregator
from iostack.monitoring.bus import Consumer, Publisher, wait_connected

PIPELINE = "X-Object-Sysmeta-Iostack-Pipeline"
BODY = b"2026-11-25 GET /v1/AUTH_t1/logs/000001 200 bytes=1024 agent=bench\n" * 100


def reaction_trial(info: dict, controller: ControllerClient, storage_url: str, token: str,
                   rate: float, stored_pipeline: Callable[[str, str], str]) -> float:
    client = Client(storage_url, token)
    account = storage_url.rsplit("/", 1)[1]
    container = f"bench-loop-{uuid.uuid4().hex[:8]}"
    client.request("PUT", container)
    policies = Policies(info)
    policies.add(f"FOR CONTAINER {account}/{container} WHEN PUTS_SEC > 3 DO SET COMPRESSION")
    pid = policies.ids[0]
    written: list[tuple[float, str]] = []
    target = f"container:{account}/{container}"
    try:
        start = time.monotonic()
        state: dict = {}
        for i in range(int(rate * 15)):
            delay = start + i / rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            name = f"o{i}"
            written.append((time.time(), name))
            client.request("PUT", f"{container}/{name}", BODY)
            state = controller.policy(pid).get("actor", {}).get("targets", {}).get(target, {})
            if state.get("state") == "enforced" and time.time() > state["applied"] + 3:
                break
        if state.get("state") != "enforced":
            raise RuntimeError(f"the actor never enforced the policy: {state}")
        held_end = state["interval_applied"] + 1.0
        for when, name in written:
            if when >= held_end and "compression" in stored_pipeline(container, name):
                return when - held_end
        raise RuntimeError("no object was stored compressed")
    finally:
        policies.remove_all()
        client.close()


def overhead(info: dict, storage_url: str, token: str, args) -> dict[str, float]:
    manager = ProcessManager(Path(info["state_dir"]))
    names = {"with": "bench-metrics-with", "without": "bench-metrics-without"}
    ports = {"with": start_proxy(info, manager, names["with"], metrics=True),
             "without": start_proxy(info, manager, names["without"], metrics=False)}
    container = f"bench-loop-get-{uuid.uuid4().hex[:6]}"
    setup = Client(storage_url, token)
    setup.request("PUT", container)
    setup.request("PUT", f"{container}/k", b"x" * 1024)
    setup.close()
    parts = urlsplit(storage_url)
    urls = {k: parts._replace(netloc=f"{parts.hostname}:{port}").geturl()
            for k, port in ports.items()}

    def get(client: Client, index: int, n: int) -> int:
        return len(client.request("GET", f"{container}/k")[1])

    results: dict[str, list] = {"with": [], "without": []}
    try:
        for _ in range(args.repeat):
            for kind in ("without", "with"):
                results[kind].append(run_clients(args.clients, args.seconds, get,
                                                 lambda k=kind: Client(urls[k], token)))
    finally:
        for name in names.values():
            manager.stop(name)
    return {k: median_result(v)["ops_per_s"] for k, v in results.items()}


def aggregation_rate(amqp_url: str, proxies: int, tenants: int, batches: int) -> float:
    namespace = f"bench-{uuid.uuid4().hex[:6]}"
    exchange = f"{namespace}.metrics"
    aggregator = Aggregator(grace=5.0)
    done = threading.Event()
    expected = proxies * batches

    def handle(key: str, message: dict) -> None:
        aggregator.add(key, message)
        if aggregator.received >= expected:
            done.set()

    consumer = Consumer(amqp_url, exchange, ["metrics.#"], handle, max_queued=expected + 10)
    publishers = [Publisher(amqp_url, exchange, buffer=batches + 1, name=f"sim-{p}")
                  for p in range(proxies)]
    consumer.start()
    for publisher in publishers:
        publisher.start()
    if not wait_connected([consumer, *publishers], 15):
        raise RuntimeError(f"cannot connect to the broker at {amqp_url}")
    samples = [{"account": f"AUTH_sim{t}", "container": "c", "ops": {"GET": 5, "PUT": 2},
                "bytes_in": 2048, "bytes_out": 5120, "active": 1,
                "latency": {"GET": {"count": 5, "sum": 0.05, "buckets": {"40": 5}}}}
               for t in range(tenants)]
    first = time.time() // 1 - batches
    began = time.perf_counter()
    for n in range(batches):
        for p, publisher in enumerate(publishers):
            publisher.publish(f"metrics.proxy.sim{p}", {
                "v": 1, "source": f"sim{p}", "stage": "proxy", "start": first + n,
                "interval": 1.0, "lost": 0, "samples": samples}, items=tenants)
    finished = done.wait(120)
    elapsed = time.perf_counter() - began
    for client in (*publishers, consumer):
        client.stop()
    if not finished:
        raise RuntimeError(f"consumed {aggregator.received} of {expected} batches in 120 s")
    return expected * tenants / elapsed


def stored_pipeline_reader(info: dict, account: str) -> Callable[[str, str], str]:
    """``read(container, name)``: the IOStack pipeline sysmeta an object server holds."""
    from swift.common import direct_client, utils
    from swift.common.ring import Ring

    utils.set_swift_dir(info["swift_dir"])
    ring = Ring(info["swift_dir"], ring_name="object")

    def read(container: str, name: str) -> str:
        part, nodes = ring.get_nodes(account, container, name)
        headers = direct_client.direct_head_object(nodes[0], part, account, container, name)
        return headers.get(PIPELINE, "")

    return read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=10, help="reaction-time trials")
    parser.add_argument("--rate", type=float, default=10, help="PUTs per second in a trial")
    parser.add_argument("--repeat", type=int, default=5, help="alternating overhead runs")
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one run")
    parser.add_argument("--clients", type=int, default=1)
    parser.add_argument("--proxies", type=int, default=4)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--batches", type=int, default=200, help="batches per simulated proxy")
    args = parser.parse_args()
    with stack() as info:
        storage_url, token = auth(info, "t1")
        stored = stored_pipeline_reader(info, storage_url.rsplit("/", 1)[1])
        controller = ControllerClient(info["controller_url"], info["admin_token"])
        reactions = [reaction_trial(info, controller, storage_url, token, args.rate, stored)
                     for _ in range(args.trials)]
        reactions.sort()
        p95 = reactions[min(len(reactions) - 1, round(0.95 * (len(reactions) - 1)))]
        print(f"Reaction time, end of the first interval over the threshold -> first PUT "
              f"stored compressed ({args.trials} trials, {args.rate:g} PUTs/s, 1 s intervals)")
        print_table(("p50 s", "p95 s", "max s", "target p95 s"),
                    [(f"{statistics.median(reactions):.2f}", f"{p95:.2f}",
                      f"{reactions[-1]:.2f}", "2.00")])
        print()
        ops = overhead(info, storage_url, token, args)
        print(f"1 KiB GET through the proxy, with vs without the metric middleware "
              f"(median of {args.repeat} alternating runs of {args.seconds:g}s, "
              f"{args.clients} client(s))")
        print_table(("without ops/s", "with ops/s", "ratio", "target"),
                    [(f"{ops['without']:.0f}", f"{ops['with']:.0f}",
                      f"{ops['with'] / ops['without']:.3f}", ">= 0.97")])
        print()
        rate = aggregation_rate(info["amqp_url"], args.proxies, args.tenants, args.batches)
        needed = args.proxies * args.tenants  # samples per second at 1 s intervals
        print(f"Aggregation through the broker: {args.proxies} simulated proxies x "
              f"{args.tenants} tenants, {args.batches} batches each")
        print_table(("samples/s consumed", "samples/s at 1 s intervals", "headroom"),
                    [(f"{rate:.0f}", needed, f"{rate / needed:.1f}x")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
