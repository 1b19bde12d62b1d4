"""Reconcile throughput vs a plain server-side copy, and what it costs tenants' latency.

    .venv/bin/python bench/reconcile.py [--objects 100] [--size 65536] [--repeat 3]

Per repetition, side by side on the same stack:

1. ``copy``: every object of a container is copied server-side (``PUT`` with
   ``X-Copy-From``) into a container under ``SET COMPRESSION``: the proxy
   reads, re-encodes and writes each one, as a tenant would;
2. ``reconcile``: the same objects, stored plain in a container that then
   gets ``SET COMPRESSION``, re-encoded by one reconcile pass
   (``iostack.atrest.reconcile``, unthrottled: ``duty`` 1);
3. tenant latency: one client's GET and PUT of 64 KiB objects for
   ``--seconds`` without reconcile, then with a daemon (``iostack reconcile
   start``, default throttle) re-encoding another container; p95 of each.

It prints objects/s and MB/s of both (and their ratio), and the p95
latencies with and without a pass (and their ratio), medians over the
repetitions. Half the objects are CSV-like text, half random bytes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import Client, Policies, auth, print_table, run_clients, stack  # noqa: E402

from iostack.atrest import reconcile  # noqa: E402
from iostack.atrest.scan import Target  # noqa: E402
from iostack.atrest.swift_access import SwiftAccess  # noqa: E402
from iostack.policy.reader import PolicyReader  # noqa: E402


def bodies(count: int, size: int) -> list[bytes]:
    return [os.urandom(size) if n % 2 else (b"%08d,alice,login,2026-11-26\n" % n)
            * (size // 29) for n in range(count)]


def fill(client: Client, container: str, data: list[bytes]) -> None:
    client.request("PUT", container)
    for n, body in enumerate(data):
        client.request("PUT", f"{container}/o{n:05d}", body)


def copy_rate(client: Client, source: str, target: str, count: int) -> float:
    client.request("PUT", target)
    start = time.perf_counter()
    for n in range(count):
        client.request("PUT", f"{target}/o{n:05d}", b"",
                       {"X-Copy-From": f"{source}/o{n:05d}", "Content-Length": "0"})
    return time.perf_counter() - start


def reconcile_pass(access: SwiftAccess, reader: PolicyReader, container: str, state: Path,
                   throttle: reconcile.Throttle) -> reconcile.ReconcileState:
    worker = reconcile.Reconciler(access, reader, Target("AUTH_t1", container), [], state,
                                  throttle)
    return worker.run()


def _cli(info, *argv: str) -> list[str]:
    return [sys.executable, "-m", "iostack.cli", *argv, "--url", info["controller_url"],
            "--token", info["admin_token"], "--swift-dir", info["swift_dir"],
            "--state-dir", info["state_dir"]]


def start_daemon(info, container: str) -> subprocess.Popen:
    """A reconcile daemon, as an administrator starts it (default throttle), to the end."""
    return subprocess.Popen(_cli(info, "reconcile", "start", f"AUTH_t1/{container}", "--wait"),  # noqa: S603
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def daemon_state(info, container: str) -> str:
    path = reconcile.state_path(Path(info["state_dir"]), Target("AUTH_t1", container))
    state = reconcile.load_state(path)
    return state.state if state else "absent"


def p95(latencies: list[float]) -> float:
    ordered = sorted(latencies)
    return ordered[int(0.95 * (len(ordered) - 1))] * 1000


def tenant_latency(info, seconds: float, container: str) -> tuple[float, float]:
    url, token = auth(info, "t1")
    body = os.urandom(65536)
    Client(url, token).request("PUT", container)

    def put(client: Client, index: int, n: int) -> int:
        client.request("PUT", f"{container}/t{n % 10}", body)
        return len(body)

    def get(client: Client, index: int, n: int) -> int:
        return len(client.request("GET", f"{container}/t{n % 10}")[1])

    puts = run_clients(1, seconds / 2, put, lambda: Client(url, token), min_ops=10)
    gets = run_clients(1, seconds / 2, get, lambda: Client(url, token), min_ops=10)
    return p95(gets.latencies), p95(puts.latencies)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=100)
    parser.add_argument("--size", type=int, default=65536)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    data = bodies(args.objects, args.size)
    total = sum(len(b) for b in data)
    rows: dict[str, list[float]] = {k: [] for k in (
        "copy obj/s", "copy MB/s", "reconcile obj/s", "reconcile MB/s", "reconcile/copy",
        "GET p95 ms alone", "GET p95 ms with reconcile", "PUT p95 ms alone",
        "PUT p95 ms with reconcile")}
    with stack() as info:
        url, token = auth(info, "t1")
        policies = Policies(info)
        access = SwiftAccess(info["swift_dir"])
        reader = PolicyReader(access.iostack_conf["redis_url"],
                              prefix=access.iostack_conf["key_prefix"], live=True)
        state_dir = Path(info["state_dir"]) / "bench-reconcile"
        try:
            for rep in range(args.repeat):
                client = Client(url, token)  # the last one idled out during the latency runs
                tag = uuid.uuid4().hex[:8]
                source, copied, plain, busy = (f"bench-{k}-{tag}" for k in
                                               ("src", "copy", "rec", "busy"))
                fill(client, source, data)
                fill(client, plain, data)
                fill(client, busy, data * 3)  # still busy while the loaded run lasts
                for name in (copied, plain, busy):
                    policies.add(f"FOR CONTAINER AUTH_t1/{name} DO SET COMPRESSION")
                copy_seconds = copy_rate(client, source, copied, args.objects)
                done = reconcile_pass(access, reader, plain, state_dir / f"{tag}.json",
                                      reconcile.Throttle(duty=1.0))
                if done.reencoded != args.objects:
                    raise RuntimeError(f"reconcile re-encoded {done.reencoded} objects: {done}")
                rows["copy obj/s"].append(args.objects / copy_seconds)
                rows["copy MB/s"].append(total / copy_seconds / 1e6)
                rows["reconcile obj/s"].append(args.objects / done.seconds)
                rows["reconcile MB/s"].append(total / done.seconds / 1e6)
                rows["reconcile/copy"].append(copy_seconds / done.seconds)

                alone = tenant_latency(info, args.seconds, f"bench-lat-{tag}")
                daemon = start_daemon(info, busy)
                deadline = time.monotonic() + 300
                while daemon_state(info, busy) != "running" and time.monotonic() < deadline:
                    time.sleep(0.2)
                loaded = tenant_latency(info, args.seconds, f"bench-lat2-{tag}")
                if daemon_state(info, busy) != "running":
                    print("warning: the pass ended before the loaded run did", file=sys.stderr)
                daemon.wait(timeout=3600)
                rows["GET p95 ms alone"].append(alone[0])
                rows["GET p95 ms with reconcile"].append(loaded[0])
                rows["PUT p95 ms alone"].append(alone[1])
                rows["PUT p95 ms with reconcile"].append(loaded[1])
                print(f"repetition {rep + 1}/{args.repeat} done", file=sys.stderr)
                policies.remove_all()
        finally:
            policies.remove_all()
            reader.close()
    print(f"{args.objects} objects of {args.size} bytes (half text, half random), "
          f"medians of {args.repeat}")
    print_table(["measure", "median"], [[k, round(statistics.median(v), 2)]
                                        for k, v in rows.items()])
    ratio = [w / a for w, a in zip(rows["GET p95 ms with reconcile"], rows["GET p95 ms alone"],
                                   strict=True)]
    print(f"GET p95 with/without reconcile: {statistics.median(ratio):.2f}x; "
          f"reconcile/copy throughput: {statistics.median(rows['reconcile/copy']):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
