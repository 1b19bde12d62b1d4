"""The IOStack paper's experiments on an emulated testbed, our figures beside the paper's.

    .venv/bin/python bench/paper.py [--repeat 3] [--seconds 15] [--rate 1gbit]
                                    [--spark-size 256M] [--no-spark]

Testbed: ``iostack aio start --nodes 3`` in a private state dir (three storage
nodes, each a network namespace, 3 replicas over 3 zones, two proxies), and
every link between the proxy host and the nodes shaped with ``tc tbf`` to
``--rate`` (the paper's 1 Gbit/s): the proxy host's interface to the
cluster's bridge and each node's ``eth0``. Clients reach the proxy on
loopback, which is not shaped (here the clients are on the proxy host).
Every qdisc added is removed at the end, also when the run fails.

1. **Compression** (paper: 3x median PUT throughput, 0.1 % stored). Tenant T1
   PUTs 10 MiB of redundant log text with 4 threads into three containers: no
   policy, ``SET COMPRESSION WITH algorithm=zstd`` and ``gzip``, alternating,
   ``--seconds`` each, ``--repeat`` times; while T2 reads a CSV log through
   Spark in a loop (unless ``--no-spark``). Printed: median MB/s, its ratio to
   no policy, the stored share, and what limits each run: the shaped link
   (bytes through the proxy's interface against the rate) or the CPU (busy
   share of all cores), whichever is at 85 % or more.
2. **Pushdown** (paper: -95.6 % bytes, -58 % Spark time). T2's Spark job
   counts the requests per ``user_id`` in the CSV log (``bench/loggen.py``,
   ``--spark-size``), plain read vs pushdown (``csv_select`` on the object
   servers), while T1 PUTs with no policy. Printed: median job time, the
   bytes the nodes sent over the shaped links, and their ratios.
3. **The dynamic policy** (paper: compression switches on when T1's PUT rate
   passes 3/s). ``FOR CONTAINER <c> WHEN PUTS_SEC > 3 DO SET COMPRESSION``, then
   T1 PUTs with 4 threads: seconds from the first PUT to the first object
   stored compressed, and the stored share of the objects written after it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import swiftclient
from common import CHECKOUT, Client, Policies, auth, body_of, print_table, run_clients
from datapath import stored_bytes
from loggen import parse_size

from iostack.aio.netns import ClusterNetwork
from iostack.aio.session import started_stack

PUT_SIZE = 10 << 20
PUT_CLIENTS = 4
PUT_POLICIES = {"none": None, "zstd": "SET COMPRESSION WITH algorithm=zstd",
                "gzip": "SET COMPRESSION WITH algorithm=gzip"}
PAPER = {"put_ratio": "3x (gzip)", "stored": "0.1 %", "bytes": "-95.6 %", "spark": "-58 %"}
LIMIT_SHARE = 0.85


def tc(namespace: str | None, *args: str) -> str:
    prefix = ["ip", "netns", "exec", namespace] if namespace else []
    return subprocess.run([*prefix, "tc", *args], capture_output=True, text=True,  # noqa: S603
                          check=True).stdout


@contextmanager
def shaped_links(state_dir: Path, rate: str):
    """Every proxy-node link limited to ``rate``; yields a function giving the bytes
    sent so far by (the proxy host, the nodes) through them."""
    plan = ClusterNetwork(state_dir, 3).saved()
    links = [(None, plan.root_if)] + [(plan.node_ns(n), "eth0") for n in range(1, plan.nodes + 1)]
    try:
        for namespace, device in links:
            tc(namespace, "qdisc", "replace", "dev", device, "root", "tbf", "rate", rate,
               "burst", "256kb", "latency", "50ms")

        def sent() -> tuple[int, int]:
            counts = [json.loads(tc(ns, "-s", "-j", "qdisc", "show", "dev", dev))[0]["bytes"]
                      for ns, dev in links]
            return counts[0], sum(counts[1:])

        yield sent
    finally:
        for namespace, device in links:
            subprocess.run([*(["ip", "netns", "exec", namespace] if namespace else []),  # noqa: S603
                            "tc", "qdisc", "del", "dev", device, "root"], capture_output=True)


def busy_share() -> tuple[float, float]:
    """(busy, total) jiffies of all cores since boot, from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def limit_of(link_share: float, cpu_share: float) -> str:
    named = [n for n, share in (("link", link_share), ("CPU", cpu_share))
             if share >= LIMIT_SHARE]
    return " and ".join(named) or "neither"


def rate_bytes(rate: str) -> float:
    units = {"gbit": 1e9 / 8, "mbit": 1e6 / 8, "kbit": 1e3 / 8}
    for unit, factor in units.items():
        if rate.endswith(unit):
            return float(rate[:-len(unit)]) * factor
    raise SystemExit(f"--rate: use gbit, mbit or kbit, not {rate!r}")


def put_load(url: str, token: str, container: str, body: bytes, seconds: float):
    def put(client: Client, index: int, n: int) -> int:
        client.request("PUT", f"{container}/obj-{index}-{n % 5}", body)
        return len(body)

    return run_clients(PUT_CLIENTS, seconds, put, lambda: Client(url, token), min_ops=1)


def stored_share(info: dict[str, Any], account: str, conn: swiftclient.Connection,
                 container: str) -> float:
    """Bytes stored (as an object server holds them) / bytes written, over the container."""
    _, listing = conn.get_container(container, full_listing=True)
    names = [entry["name"] for entry in listing]
    return stored_bytes(info, account, container, names) / (len(names) * PUT_SIZE)


class SparkLoop:
    """T2: the pushdown benchmark's Spark job, in a loop, on a thread of its own."""

    def __init__(self, info: dict[str, Any], size: int) -> None:
        import spark_pushdown

        self.module = spark_pushdown
        self.info = info
        user, key = info["tenants"]["t2"]["user"], info["tenants"]["t2"]["key"]
        conn = swiftclient.Connection(info["auth_url"], user, key, retries=2)
        spark_pushdown.upload_logs(conn, size, 4)
        self.spark = spark_pushdown.spark_session()
        self.info = dict(info, tenants={**info["tenants"], "t1": info["tenants"]["t2"]})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def job(self, pushdown: bool) -> float:
        options = {"pushdown": "true", "stage": "object"} if pushdown else {"pushdown": "false"}
        seconds, _counts = self.module.count_users(self.spark, self.info, options,
                                                   "iostack-paper-bench", None)
        return seconds

    def __enter__(self) -> SparkLoop:
        self._stop.clear()

        def loop() -> None:
            while not self._stop.is_set():
                self.job(pushdown=False)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join()


def compression(args, info, token, url, account, conn, policies, sent, spark) -> list[tuple]:
    body = body_of(PUT_SIZE, "redundant")
    run_id = uuid.uuid4().hex[:6]
    containers = {name: f"paper-{run_id}-{name}" for name in PUT_POLICIES}
    for name, container in containers.items():
        conn.put_container(container)
        if PUT_POLICIES[name]:
            policies.add(f"FOR CONTAINER {account}/{container} DO {PUT_POLICIES[name]}")
    link = rate_bytes(args.rate)
    samples: dict[str, dict[str, list[float]]] = {
        name: {"mb": [], "link": [], "cpu": []} for name in PUT_POLICIES}
    background = spark if spark else _nothing()
    with background:
        for _ in range(args.repeat):
            for name, container in containers.items():
                proxy_before, _ = sent()
                busy_before, total_before = busy_share()
                result = put_load(url, token, container, body, args.seconds)
                proxy_after, _ = sent()
                busy_after, total_after = busy_share()
                samples[name]["mb"].append(result.mb_per_s)
                samples[name]["link"].append((proxy_after - proxy_before)
                                             / (link * result.seconds))
                samples[name]["cpu"].append((busy_after - busy_before)
                                            / max(1, total_after - total_before))
                print(f"  PUT {name}: {result.mb_per_s:.1f} MB/s", file=sys.stderr, flush=True)
    plain = statistics.median(samples["none"]["mb"])
    rows = []
    for name, container in containers.items():
        med = {k: statistics.median(v) for k, v in samples[name].items()}
        stored = 100 * stored_share(info, account, conn, container)
        rows.append((name, med["mb"], med["mb"] / plain, stored, f"{100 * med['link']:.0f} %",
                     f"{100 * med['cpu']:.0f} %", limit_of(med["link"], med["cpu"])))
    return rows


@contextmanager
def _nothing():
    yield


def pushdown(args, token, url, sent, spark) -> list[tuple]:
    body = body_of(PUT_SIZE, "redundant")
    container = f"paper-{uuid.uuid4().hex[:6]}-t1"
    Client(url, token).request("PUT", container)
    load = threading.Event()

    def t1() -> None:
        while not load.is_set():
            put_load(url, token, container, body, 2.0)

    putter = threading.Thread(target=t1, daemon=True)
    putter.start()
    samples: dict[str, dict[str, list[float]]] = {m: {"s": [], "bytes": []}
                                                  for m in ("plain", "pushdown")}
    try:
        spark.job(pushdown=False)  # warm-up: JIT, Spark's generated code, Python workers
        for _ in range(args.repeat):
            for mode in samples:
                _, nodes_before = sent()
                seconds = spark.job(pushdown=mode == "pushdown")
                _, nodes_after = sent()
                samples[mode]["s"].append(seconds)
                samples[mode]["bytes"].append(nodes_after - nodes_before)
                print(f"  Spark {mode}: {seconds:.1f} s", file=sys.stderr, flush=True)
    finally:
        load.set()
        putter.join()
    med = {m: {k: statistics.median(v) for k, v in s.items()} for m, s in samples.items()}
    # The nodes' bytes include T1's PUT replies and replication: the same in both modes.
    return [(mode, med[mode]["s"], med[mode]["s"] / med["plain"]["s"] - 1,
             med[mode]["bytes"] / 1e6, med[mode]["bytes"] / med["plain"]["bytes"] - 1)
            for mode in med]


def dynamic_policy(args, info, token, url, account, conn, policies) -> tuple[float, float]:
    body = body_of(PUT_SIZE, "redundant")
    container = f"paper-{uuid.uuid4().hex[:6]}-dynamic"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER {account}/{container} WHEN PUTS_SEC > 3 DO SET COMPRESSION")
    names: list[tuple[float, str]] = []
    lock = threading.Lock()
    began = time.monotonic()

    def put(client: Client, index: int, n: int) -> int:
        name = f"obj-{index}-{n}"
        client.request("PUT", f"{container}/{name}", body)
        with lock:
            names.append((time.monotonic() - began, name))
        return len(body)

    run_clients(PUT_CLIENTS, args.seconds, put, lambda: Client(url, token), min_ops=1)
    first = None
    compressed = []
    for at, name in sorted(names):
        stored = stored_bytes(info, account, container, [name])
        if stored < len(body) // 2:
            first = at if first is None else first
            compressed.append(stored / len(body))
    if first is None:
        raise SystemExit("the dynamic policy never switched compression on")
    return first, 100 * statistics.median(compressed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--rate", default="1gbit", help="tc rate of every link (1gbit)")
    parser.add_argument("--spark-size", type=parse_size, default=256 << 20)
    parser.add_argument("--no-spark", action="store_true", help="skip T2 and the pushdown")
    args = parser.parse_args()
    state_dir = CHECKOUT / ".iostack-bench" / f"paper-{uuid.uuid4().hex[:6]}"
    with started_stack(state_dir, "--nodes", "3") as info, \
            shaped_links(state_dir, args.rate) as sent:
        url, token = auth(info, "t1")
        account = url.rsplit("/", 1)[1]
        t1 = info["tenants"]["t1"]
        conn = swiftclient.Connection(info["auth_url"], t1["user"], t1["key"], retries=2)
        policies = Policies(info)
        try:
            spark = None if args.no_spark else SparkLoop(info, args.spark_size)
            put_rows = compression(args, info, token, url, account, conn, policies, sent, spark)
            push_rows = pushdown(args, token, url, sent, spark) if spark else []
            first, share = dynamic_policy(args, info, token, url, account, conn, policies)
        finally:
            policies.remove_all()
    print()
    print(f"1. T1 PUTs 10 MiB redundant text, {PUT_CLIENTS} threads, links at {args.rate}"
          f"{'' if args.no_spark else ', T2 running Spark'} (median of {args.repeat}; "
          f"paper: {PAPER['put_ratio']} throughput, {PAPER['stored']} stored)")
    print_table(("policy", "MB/s", "ratio", "stored %", "link", "CPU", "limited by"), put_rows)
    if push_rows:
        print()
        print(f"2. T2 counts user ids in a {args.spark_size >> 20} MiB CSV log with Spark while "
              f"T1 PUTs (paper: {PAPER['bytes']} bytes, {PAPER['spark']} time)")
        print_table(("read", "seconds", "time vs plain", "MB from nodes", "bytes vs plain"),
                    [(m, s, f"{100 * dt:+.1f} %", mb, f"{100 * db:+.1f} %")
                     for m, s, dt, mb, db in push_rows])
    print()
    print(f"3. WHEN PUTS_SEC > 3 DO SET COMPRESSION: on {first:.1f} s after T1's first PUT; "
          f"then stored {share:.2f} % of the bytes written (median object)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
