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
"""

from __future__ import annotations

import argparse
import http.client
import json
import math
import shutil
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import requests
import swiftclient
from common import print_table

from iostack.aio.session import aio_command, free_port_args
from iostack.controller.client import ControllerClient
from iostack.controller.qos import allocate

MB = 1e6
TENANTS = ("t1", "t2", "t3")


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

    def __init__(self, url: str, token: str, start: float, until: float) -> None:
        super().__init__(daemon=True)
        self.parts = urlsplit(url)
        self.token = token
        self.begin = start
        self.until = until
        self.received: list[tuple[float, int]] = []

    def run(self) -> None:
        time.sleep(max(0.0, self.begin - time.time()))
        while time.time() < self.until:
            conn = http.client.HTTPConnection(self.parts.hostname, self.parts.port, timeout=30)
            try:
                conn.request("GET", self.parts.path, headers={"X-Auth-Token": self.token})
                resp = conn.getresponse()
                if resp.status != 200:
                    raise RuntimeError(f"GET {self.parts.path}: {resp.status} {resp.read()!r}")
                while chunk := resp.read(256 * 1024):
                    self.received.append((time.time(), len(chunk)))
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


def workers_bench(args: argparse.Namespace) -> int:
    counts = [int(w) for w in args.workers.split(",")]
    cap = args.cap * MB
    rows = []
    for count in counts:
        state_dir = Path(tempfile.mkdtemp(prefix="iostack-bench-qos-"))
        started = aio_command("start", state_dir, "--json", "--proxies", "2",
                              "--proxy-workers", str(count),
                              "--namespace", f"bench-qos-{uuid.uuid4().hex[:6]}",
                              *free_port_args())
        if started.returncode != 0:
            print(started.stderr, file=sys.stderr)
            aio_command("stop", state_dir, "--purge")
            return 1
        try:
            info = json.loads(started.stdout)
            controller = ControllerClient(info["controller_url"], info["admin_token"])
            creds = info["tenants"]["t1"]
            conn = swiftclient.Connection(authurl=info["auth_url"], user=creds["user"],
                                          key=creds["key"], retries=0)
            conn.put_container("bench-qos")
            conn.put_object("bench-qos", "o", b"x" * int(args.object_mb * (1 << 20)))
            creds["token"] = conn.get_auth()[1]
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
    parser.add_argument("--cap", type=float, default=40,
                        help="--workers: the cap, MB/s (below what the stack moves unshaped)")
    parser.add_argument("--streams", type=int, default=2, help="--workers: clients per proxy")
    parser.add_argument("--object-mb", type=float, default=4, help="--workers: object size, MiB")
    args = parser.parse_args()
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
