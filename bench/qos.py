"""Bandwidth SLOs: achieved vs target, fairness among best-effort tenants, capacity used.

Starts a private all-in-one with two proxies and a configured GET capacity
(``--capacity``, MB/s). For each cap X (5, 10, 20 MB/s by default) three
tenants read 1 MiB objects through both proxies at once (``--clients`` per
tenant per proxy): t1 is capped at X (``SET BANDWIDTH WITH get=X``), t2 and t3
are best effort. A run with no policy at all is measured side by side as the
baseline. Rates are taken from the bytes the clients receive over the last
``--measure`` seconds of each ``--seconds`` run; each mix is repeated
``--repeat`` times and the medians are reported.

Printed: per cap, t1's target (its cap, or its max-min fair share of the
capacity if that is smaller), achieved rate and relative error (median and
worst over repeats), the best-effort tenants' rates and Jain's fairness index, and
the total as a fraction of the configured capacity, next to the same total
without shaping policies (what shaping costs).
Targets: median error <= 5 %, worst <= 10 %; fairness >= 0.95.

    .venv/bin/python bench/qos.py [--caps 5,10,20] [--capacity 50] [--repeat 3]

With ``--workers 1,2,4`` it measures instead how one cap holds at each
number of worker processes per proxy (two proxies, a stack per count): one
tenant capped at ``--cap`` MB/s (``SET BANDWIDTH WITH get=...``, no
capacity configured), ``--streams`` clients per proxy reading an
``--object-mb`` object over and over, each GET on a new connection (so the
kernel hands it to any worker), and halfway through one more client (the
newcomer). Printed per worker count, medians of ``--repeat`` runs:

- the same streams' total without any policy (can the stack deliver the cap?);
- the achieved total once the newcomer has run 1 s, as a fraction of the cap
  or of the unshaped total if that is smaller, and its error against the cap;
- Jain's fairness index across all streams over that window;
- the first second of the scope (total / cap: unshaped or floored shows here);
- the newcomer's first second (its bytes / its fair share of the cap).

Targets: error <= 5 %; Jain >= 0.95; both first-second figures near 1.

    .venv/bin/python bench/qos.py --workers 1,2,4 [--cap 40] [--streams 2] [--repeat 3]

With ``--failover`` it measures how a cap holds while the policy store fails
over: a three-node cluster (``--nodes 3``: two proxies of two workers, a
Redis master with two replicas under three Sentinels), t1 capped at
``--cap`` MB/s (5 by default), ``--streams`` clients per proxy reading an
``--object-mb`` object, each GET on a new connection. Per repeat: the same
clients unshaped (the baseline: can the stack move more than the cap?),
then capped for ``--seconds``, the master killed (SIGKILL), and on until
``--seconds`` after every proxy leases from the promoted master again; then
``aio start`` brings the old master back as a replica for the next repeat.
Printed per repeat and as medians: the seconds until a policy change
succeeds again and until both proxies share the bucket again (meanwhile
each worker paces at the part the global controller assigned it), and per
phase (before the kill, the outage until shared again, after) the bytes
per second over all clients as a ratio of the cap: median and worst second.
Failed GETs are counted. Target: no second over the cap by more than the
design allows (``tests/integration/cluster/test_cluster_qos_failover.py``).

    .venv/bin/python bench/qos.py --failover [--cap 5] [--streams 3] [--repeat 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import requests
import swiftclient
from common import print_table

from iostack.aio.session import (
    aio_command,
    free_port_args,
    proxies_leasing,
    redis_set_of,
    seconds_until_accepted,
)
from iostack.controller.client import ControllerClient
from iostack.controller.qos import allocate
from iostack.ports import wait_until

MB = 1e6
TENANTS = ("t1", "t2", "t3")
CHUNK = 65536  # --failover reads: a proxy's chunk, so a second's count is not rounded coarser


def jain(rates: list[float]) -> float:
    return sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) if any(rates) else 1.0


def run_load(info: dict, seconds: float, measure: float, clients: int) -> dict[str, float]:
    """Bytes/s each tenant received over the last ``measure`` seconds of a run."""
    received: dict[str, list[tuple[float, int]]] = {t: [] for t in TENANTS}
    until = time.time() + seconds

    def worker(tenant: str, proxy: str) -> None:
        creds = info["tenants"][tenant]
        session = requests.Session()
        url = f"{proxy}/v1/{creds['account']}/bench-qos/o"
        while time.time() < until:
            with session.get(url, headers={"X-Auth-Token": creds["token"]}, stream=True) as resp:
                for chunk in resp.iter_content(65536):
                    received[tenant].append((time.time(), len(chunk)))

    threads = [threading.Thread(target=worker, args=(t, p), daemon=True)
               for t in TENANTS for p in info["proxy_urls"] for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    start = until - measure
    return {t: sum(n for when, n in got if start <= when < until) / measure
            for t, got in received.items()}


class Stream(threading.Thread):
    """One client reading an object over and over, a new connection per GET."""

    def __init__(self, url: str, token: str, start: float, until: float,
                 chunk: int = 256 * 1024) -> None:
        super().__init__(daemon=True)
        self.chunk = chunk  # bytes per read: what a per-second count is rounded to
        self.parts = urlsplit(url)
        self.token = token
        self.begin = start
        self.until = until
        self.received: list[tuple[float, int]] = []
        self.failed = 0  # GETs answered other than 200, or cut

    def run(self) -> None:
        time.sleep(max(0.0, self.begin - time.time()))
        while time.time() < self.until:
            conn = http.client.HTTPConnection(self.parts.hostname, self.parts.port, timeout=30)
            try:
                conn.request("GET", self.parts.path, headers={"X-Auth-Token": self.token})
                resp = conn.getresponse()
                while chunk := resp.read(self.chunk):
                    self.received.append((time.time(), len(chunk)))
                self.failed += resp.status != 200
            except OSError:
                self.failed += 1
            finally:
                conn.close()

    def rate(self, start: float, end: float) -> float:
        return sum(n for when, n in self.received if start <= when < end) / (end - start)


def worker_run(info: dict, streams: int, seconds: float) -> dict[str, float]:
    """``streams`` clients per proxy for ``seconds``, one more from halfway; rates in bytes/s."""
    creds = info["tenants"]["t1"]
    urls = [f"{proxy}/v1/{creds['account']}/bench-qos/o" for proxy in info["proxy_urls"]]
    t0 = time.time() + 0.2
    until = t0 + seconds
    half = t0 + seconds / 2
    clients = [Stream(url, creds["token"], t0, until) for url in urls for _ in range(streams)]
    newcomer = Stream(urls[-1], creds["token"], half, until)
    everyone = [*clients, newcomer]
    for client in everyone:
        client.start()
    for client in everyone:
        client.join()
    window = (half + 1.0, until)
    rates = [c.rate(*window) for c in everyone]
    return {"total": sum(rates), "jain": jain(rates),
            "scope_first": sum(c.rate(t0, t0 + 1.0) for c in clients),
            "newcomer_first": newcomer.rate(half, half + 1.0), "n": len(everyone)}


def start_stack(object_mb: float, *options: str) -> tuple[Path, dict] | None:
    """A private stack (``aio start`` with ``options``) holding t1's object ``bench-qos/o``
    of ``object_mb`` MiB, t1's token in its info; None when it did not start (said why)."""
    state_dir = Path(tempfile.mkdtemp(prefix="iostack-bench-qos-"))
    started = aio_command("start", state_dir, "--json", *options,
                          "--namespace", f"bench-qos-{uuid.uuid4().hex[:6]}", *free_port_args())
    if started.returncode != 0:
        print(started.stderr, file=sys.stderr)
        aio_command("stop", state_dir, "--purge")
        return None
    info = json.loads(started.stdout)
    creds = info["tenants"]["t1"]
    conn = swiftclient.Connection(authurl=info["auth_url"], user=creds["user"],
                                  key=creds["key"], retries=0)
    conn.put_container("bench-qos")
    conn.put_object("bench-qos", "o", b"x" * int(object_mb * (1 << 20)))
    creds["token"] = conn.get_auth()[1]
    return state_dir, info


def workers_bench(args: argparse.Namespace) -> int:
    counts = [int(w) for w in args.workers.split(",")]
    cap = args.cap * MB
    rows = []
    for count in counts:
        started = start_stack(args.object_mb, "--proxies", "2", "--proxy-workers", str(count))
        if started is None:
            return 1
        state_dir, info = started
        try:
            controller = ControllerClient(info["controller_url"], info["admin_token"])
            baseline, runs = [], []
            for _ in range(args.repeat):  # unshaped and shaped runs alternate: same noise
                baseline.append(worker_run(info, args.streams, args.seconds)["total"])
                pid = controller.add_policies(
                    f"FOR TENANT t1 DO SET BANDWIDTH WITH get={args.cap:g}MBps"
                )["policies"][0]["id"]
                runs.append(worker_run(info, args.streams, args.seconds))
                controller.delete_policy(pid)
                time.sleep(2)  # the scope's assignment and shared bucket go idle
        finally:
            aio_command("stop", state_dir, "--purge")
            shutil.rmtree(state_dir, ignore_errors=True)
        n = runs[0]["n"]
        errors = [abs(r["total"] - cap) / cap for r in runs]
        achieved = statistics.median(r["total"] for r in runs)
        rows.append((
            count, f"{args.cap:g}", f"{statistics.median(baseline) / MB:.1f}",
            f"{achieved / MB:.1f}", f"{achieved / min(cap, statistics.median(baseline)):.3f}",
            f"{100 * statistics.median(errors):.1f}", f"{100 * max(errors):.1f}",
            f"{statistics.median(r['jain'] for r in runs):.3f}",
            f"{statistics.median(r['scope_first'] for r in runs) / cap:.2f}",
            f"{statistics.median(r['newcomer_first'] for r in runs) / (cap / n):.2f}",
        ))
    print(f"One cap at 1..N workers per proxy: 2 proxies, {args.streams} stream(s) per proxy "
          f"plus a newcomer halfway, {args.object_mb:g} MiB GETs on new connections; "
          f"medians of {args.repeat} runs of {args.seconds:g} s")
    print_table(("workers/proxy", "cap MB/s", "no-policy MB/s", "achieved MB/s",
                 "achieved/min(cap,no-policy)", "err % med",
                 "err % worst", "Jain", "scope 1st s/cap", "newcomer 1st s/share"), rows)
    print("Targets: error <= 5 %; Jain >= 0.95; first-second figures near 1. Where the stack "
          "moves less than the cap unshaped, the error says so, not the shaping: compare "
          "achieved with min(cap, no-policy).")
    return 0


def per_second(streams: list[Stream], start: float, end: float) -> list[float]:
    """Bytes all ``streams`` received in each whole second between ``start`` and ``end``."""
    return [sum(c.rate(second, second + 1) for c in streams)
            for second in range(int(start) + 1, int(end))]


def failover_run(info: dict, args: argparse.Namespace, urls: list[str]) -> dict[str, Any]:
    """One repeat of ``--failover`` (module docstring): its durations and per-second rates."""
    state_dir = Path(info["state_dir"])
    controller = ControllerClient(info["controller_url"], info["admin_token"])
    token = info["tenants"]["t1"]["token"]
    began = time.time()
    unshaped = [Stream(url, token, began, began + args.seconds, CHUNK)
                for url in urls for _ in range(args.streams)]
    for client in unshaped:
        client.start()
    for client in unshaped:
        client.join()
    pid = controller.add_policies(
        f"FOR TENANT t1 DO SET BANDWIDTH WITH get={args.cap:g}MBps")["policies"][0]["id"]
    account = info["tenants"]["t1"]["account"]
    wait_until(lambda: controller.qos()["scopes"].get(account, {}).get("get", {})
               .get("assigned") == args.cap * MB, 30, 0.5)
    shaped = time.time()
    clients = [Stream(url, token, shaped, shaped + 600, CHUNK) for url in urls
               for _ in range(args.streams)]
    for client in clients:
        client.start()
    time.sleep(args.seconds)
    members = redis_set_of(state_dir)
    master = members.processes.find(members.member_at(members.current_master()))
    killed, killed_at = time.monotonic(), time.time()
    os.killpg(master.pid, 9)
    writable = seconds_until_accepted(controller, f"FOR CONTAINER AUTH_t3/c{pid} DO SET NOOP",
                                      killed, 60)
    proxies = {urlsplit(url).netloc for url in urls}
    wait_until(lambda: proxies_leasing(info, account, "get", killed_at) == proxies, 60, 0.1)
    shared_again = time.time()
    time.sleep(args.seconds)
    ended = time.time()
    for client in clients:
        client.until = ended
    for client in clients:
        client.join()
    controller.delete_policy(pid)
    aio_command("start", state_dir)  # the old master back, as a replica of the promoted one
    return {"unshaped": statistics.median(per_second(unshaped, began, began + args.seconds)),
            "writable": writable, "shared": shared_again - killed_at,
            "before": per_second(clients, shaped, killed_at),
            "outage": per_second(clients, killed_at, shared_again),
            "after": per_second(clients, shared_again, ended),
            "failed": sum(c.failed for c in [*unshaped, *clients])}


def failover_bench(args: argparse.Namespace) -> int:
    cap = args.cap * MB
    load = [os.getloadavg()[0]]
    started = start_stack(args.object_mb, "--nodes", "3", "--proxy-workers", "2")
    if started is None:
        return 1
    state_dir, info = started
    try:
        creds = info["tenants"]["t1"]
        urls = [f"{proxy}/v1/{creds['account']}/bench-qos/o" for proxy in info["proxy_urls"]]
        runs = []
        for _ in range(args.repeat):
            runs.append(failover_run(info, args, urls))
            load.append(os.getloadavg()[0])
    finally:
        aio_command("stop", state_dir, "--purge")
        shutil.rmtree(state_dir, ignore_errors=True)
    rows = []
    for n, run in enumerate(runs, 1):
        rows.append((n, f"{run['unshaped'] / cap:.1f}", f"{run['writable']:.1f}",
                     f"{run['shared']:.1f}",
                     *(f"{statistics.median(run[p]) / cap:.2f} / {max(run[p]) / cap:.2f}"
                       for p in ("before", "outage", "after")), run["failed"]))
    rows.append(("median", f"{statistics.median(r['unshaped'] for r in runs) / cap:.1f}",
                 f"{statistics.median(r['writable'] for r in runs):.1f}",
                 f"{statistics.median(r['shared'] for r in runs):.1f}",
                 *(f"{statistics.median(statistics.median(r[p]) for r in runs) / cap:.2f} / "
                   f"{max(max(r[p]) for r in runs) / cap:.2f}"
                   for p in ("before", "outage", "after")),
                 sum(r["failed"] for r in runs)))
    print(f"A {args.cap:g} MB/s GET cap through a Redis failover: cluster of 3 nodes, 2 proxies "
          f"x 2 workers, {args.streams} stream(s) per proxy, {args.object_mb:g} MiB GETs on new "
          f"connections; {args.seconds:g} s before the kill and after; load average "
          f"{' -> '.join(f'{x:.1f}' for x in load)} on {os.cpu_count()} cores")
    print_table(("run", "unshaped/cap", "policy writable s", "shared again s",
                 "before med/worst", "outage med/worst", "after med/worst", "failed GETs"),
                rows)
    print("Per phase: bytes/s over all clients per whole second, as a ratio of the cap "
          "(median / worst second; the median row: median of medians / worst of all).")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--caps", default="5,10,20", help="t1's caps, MB/s")
    parser.add_argument("--capacity", type=float, default=50, help="GET capacity, MB/s")
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--measure", type=float, default=5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--clients", type=int, default=1, help="per tenant and proxy")
    parser.add_argument("--workers", help="worker counts per proxy, e.g. 1,2,4: the cap-at-any-"
                        "worker-count bench instead")
    parser.add_argument("--failover", action="store_true",
                        help="a cap through a failover of the policy store instead")
    parser.add_argument("--cap", type=float, help="--workers, --failover: the cap, MB/s (below "
                        "what the stack moves unshaped; default 40, 5 with --failover)")
    parser.add_argument("--streams", type=int, default=2,
                        help="--workers, --failover: clients per proxy")
    parser.add_argument("--object-mb", type=float, default=4,
                        help="--workers, --failover: object size, MiB")
    args = parser.parse_args()
    if args.failover:
        args.cap = args.cap or 5
        return failover_bench(args)
    args.cap = args.cap or 40
    if args.workers:
        return workers_bench(args)
    caps = [float(c) for c in args.caps.split(",")]
    state_dir = Path(tempfile.mkdtemp(prefix="iostack-bench-qos-"))
    started = aio_command("start", state_dir, "--json", "--proxies", "2",
                          "--namespace", f"bench-qos-{uuid.uuid4().hex[:6]}",
                          "--qos-capacity-get", str(int(args.capacity * MB)),
                          *free_port_args())
    if started.returncode != 0:
        print(started.stderr, file=sys.stderr)
        return 1
    try:
        info = json.loads(started.stdout)
        controller = ControllerClient(info["controller_url"], info["admin_token"])
        for creds in info["tenants"].values():
            conn = swiftclient.Connection(authurl=info["auth_url"], user=creds["user"],
                                          key=creds["key"], retries=0)
            conn.put_container("bench-qos")
            conn.put_object("bench-qos", "o", b"x" * (1 << 20))
            creds["token"] = conn.get_auth()[1]
        baseline = [sum(run_load(info, args.seconds, args.measure, args.clients).values())
                    for _ in range(args.repeat)]
        rows = []
        for cap in caps:
            pid = controller.add_policies(
                f"FOR TENANT t1 DO SET BANDWIDTH WITH get={cap:g}MBps")["policies"][0]["id"]
            runs = [run_load(info, args.seconds, args.measure, args.clients)
                    for _ in range(args.repeat)]
            controller.delete_policy(pid)
            # What t1 should get: its cap, or its fair share if that is smaller.
            target = allocate({t: math.inf for t in TENANTS}, {"t1": cap * MB}, {}, {},
                              args.capacity * MB)["t1"]
            errors = [abs(r["t1"] - target) / target for r in runs]
            fairness = [jain([r["t2"], r["t3"]]) for r in runs]
            rows.append((
                f"{cap:g}", f"{target / MB:.2f}",
                f"{statistics.median(r['t1'] for r in runs) / MB:.2f}",
                f"{100 * statistics.median(errors):.1f}", f"{100 * max(errors):.1f}",
                f"{statistics.median(r['t2'] for r in runs) / MB:.2f}",
                f"{statistics.median(r['t3'] for r in runs) / MB:.2f}",
                f"{statistics.median(fairness):.3f}", f"{min(fairness):.3f}",
                f"{statistics.median(sum(r.values()) for r in runs) / (args.capacity * MB):.2f}",
                f"{statistics.median(baseline) / (args.capacity * MB):.2f}",
            ))
        print(f"Bandwidth SLOs, 2 proxies, GET capacity {args.capacity:g} MB/s, 3 tenants x "
              f"{args.clients} client(s) per proxy, 1 MiB GETs; medians of {args.repeat} runs, "
              f"rates over the last {args.measure:g} of {args.seconds:g} s")
        print_table(("t1 cap MB/s", "t1 target", "t1 MB/s", "err % med", "err % worst", "t2 MB/s",
                     "t3 MB/s", "Jain med", "Jain worst", "total/cap", "no-policy total/cap"),
                    rows)
        print("Targets: error median <= 5 %, worst <= 10 %; Jain >= 0.95")
    finally:
        aio_command("stop", state_dir, "--purge")
        shutil.rmtree(state_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
