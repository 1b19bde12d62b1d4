"""Does one tenant's filtered PUT stall the other requests on its proxy worker?

    .venv/bin/python bench/event_loop.py [--repeat 3] [--seconds 4] [--clients 4] \
        [--filter zstd|encryption]

Three IOStack proxies with one worker each, on the same storage servers, differ
only in where filter work runs (``iostack.filters.offload``): ``inline``
(``filter_threads = false``) on the worker's event loop, ``threads`` (the
default) in native threads for work that costs more than a hand-off,
``every-batch`` (``filter_thread_min_us = 0``) every full batch in a thread.
In alternation, each gets ``--clients`` tenants PUTting 10 MiB of access logs
into a container under ``SET COMPRESSION WITH algorithm=zstd`` (or ``SET
ENCRYPTION``) and, at the same time, one client GETting a 1 KiB object (no
policy) in a loop. Prints, as medians over repetitions, the 1 KiB GET p50/p95
latency and the PUT throughput of each, the ratios to inline, and the same GET
alone on an idle proxy for scale.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from common import Client, Policies, auth, body_of, print_table, run_clients, stack, start_proxy

from iostack.aio.processes import ProcessManager

PROXIES = {"inline": {"filter_threads": "false"}, "threads": {"filter_threads": "true"},
           "every-batch": {"filter_threads": "true", "filter_thread_min_us": "0"}}
FILTERS = {"zstd": "COMPRESSION WITH algorithm=zstd", "encryption": "ENCRYPTION"}
PUT_SIZE = 10 << 20


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def small_gets(client: Client, path: str, seconds: float) -> list[float]:
    latencies = []
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        client.request("GET", path)
        latencies.append(time.perf_counter() - t0)
    return latencies


def under_load(url: str, token: str, put_container: str, small: str, body: bytes,
               clients: int, seconds: float) -> tuple[list[float], float]:
    """1 KiB GET latencies and PUT MB/s while ``clients`` PUT ``body``."""
    def put(client: Client, index: int, n: int) -> int:
        client.request("PUT", f"{put_container}/p-{index}-{n % 4}", body)
        return len(body)

    box = {}
    putters = threading.Thread(target=lambda: box.setdefault(
        "put", run_clients(clients, seconds, put, lambda: Client(url, token), min_ops=1)))
    putters.start()
    time.sleep(0.2)  # let the PUTs start
    getter = Client(url, token)
    latencies = small_gets(getter, small, seconds - 0.4)
    getter.close()
    putters.join()
    return latencies, box["put"].mb_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--filter", choices=FILTERS, default="zstd")
    args = parser.parse_args()
    body = body_of(PUT_SIZE, "logs")
    with stack() as info:
        storage_url, token = auth(info, "t1")
        account = storage_url.rsplit("/", 1)[1]
        manager = ProcessManager(Path(info["state_dir"]))
        parts = urlsplit(storage_url)
        urls = {}
        policies = Policies(info)
        run_id = uuid.uuid4().hex[:6]
        filtered, plain = f"bench-el-{run_id}-{args.filter}", f"bench-el-{run_id}-small"
        try:
            for name, options in PROXIES.items():
                port = start_proxy(info, manager, f"bench-{name}-proxy", workers=1,
                                   options=options)
                urls[name] = parts._replace(netloc=f"{parts.hostname}:{port}").geturl()
            setup = Client(storage_url, token)
            for container in (filtered, plain):
                setup.request("PUT", container)
            setup.request("PUT", f"{plain}/small", os.urandom(1024))
            setup.close()
            policies.add(f"FOR CONTAINER {account}/{filtered} DO SET {FILTERS[args.filter]}")
            idle = {name: [] for name in PROXIES}
            p50 = {name: [] for name in PROXIES}
            p95 = {name: [] for name in PROXIES}
            put_mb = {name: [] for name in PROXIES}
            for _ in range(args.repeat):
                for name, url in urls.items():
                    client = Client(url, token)
                    alone = small_gets(client, f"{plain}/small", 1.0)
                    client.close()
                    idle[name].append(statistics.median(alone) * 1000)
                    latencies, mb_per_s = under_load(url, token, filtered, f"{plain}/small",
                                                     body, args.clients, args.seconds)
                    p50[name].append(statistics.median(latencies) * 1000)
                    p95[name].append(percentile(latencies, 0.95) * 1000)
                    put_mb[name].append(mb_per_s)
                    print(f"  {name}: GET p50 {p50[name][-1]:.1f} ms, p95 {p95[name][-1]:.1f} "
                          f"ms, PUT {mb_per_s:.1f} MB/s", flush=True)
            med = {metric: {n: statistics.median(v) for n, v in values.items()}
                   for metric, values in (("idle", idle), ("p50", p50), ("p95", p95),
                                          ("put", put_mb))}
            print()
            print(f"1 KiB GET on a proxy worker while {args.clients} clients PUT 10 MiB of logs "
                  f"under {args.filter} (median of {args.repeat}; load average "
                  f"{os.getloadavg()[0]:.1f})")
            print_table(("proxy", "GET idle p50 ms", "GET p50 ms", "GET p95 ms", "PUT MB/s"),
                        [(n, med["idle"][n], med["p50"][n], med["p95"][n], med["put"][n])
                         for n in PROXIES])
            for name in PROXIES:
                if name != "inline":
                    print(f"  {name} / inline: GET p95 "
                          f"{med['p95'][name] / med['p95']['inline']:.2f}, PUT throughput "
                          f"{med['put'][name] / med['put']['inline']:.2f}")
        finally:
            policies.remove_all()
            for name in PROXIES:
                manager.stop(f"bench-{name}-proxy")


if __name__ == "__main__":
    main()
