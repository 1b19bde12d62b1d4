"""Policy convergence: from a policy change to every proxy worker enforcing it.

    .venv/bin/python bench/policy_convergence.py [--changes 20] [--repeat 3]

Two proxies of two workers each, started by this benchmark on the
all-in-one's storage servers (``make run``'s, or a private one). Every
worker is made to load its policy reader (new connections until each proxy
has answered from two processes), then ``--changes`` policy changes are made
through the controller's API (what ``iostack policy add`` / ``rm`` call),
alternately adding and removing ``FOR CONTAINER ... DO SET noop``. For each
change the clock runs from the call until every worker of both proxies
reports (``<prefix>policy_nodes``) the new version or a later one; the
baseline is the API call itself (the controller's answer, committed in
Redis), measured for the same changes. Prints p50 and p95 over every change
of every repetition, and their ratio to the baseline's.

It also prints the policy lookups per request counted through a real proxy
pipeline (``iostack.aio.inprocess``, a container under ``SET ENCRYPTION``):
each is answered from the worker's local copy, with no Redis round trip.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from common import Client, Policies, auth, print_table, stack, start_proxy

from iostack.aio.inprocess import lookups_in_subprocess
from iostack.aio.processes import ProcessManager
from iostack.policy.connection import connect
from iostack.policy.redis_keys import KeySpace

PROXIES = 2
WORKERS = 2


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def reporting(client, keys: KeySpace, ports: list[int]) -> dict[str, int]:
    """``<proxy>/<pid>`` -> version, for the workers of our proxies."""
    ours = tuple(f"127.0.0.1:{port}/" for port in ports)
    return {name.decode(): json.loads(raw)["version"]
            for name, raw in client.hgetall(keys.policy_nodes).items()
            if name.decode().startswith(ours)}


def wake_workers(info, ports: list[int], client, keys: KeySpace) -> None:
    """PUT through new connections until every worker of every proxy reports a version."""
    storage_url, token = auth(info, "t1")
    path = urlsplit(storage_url).path
    container = f"converge-{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 60
    while len(reporting(client, keys, ports)) < PROXIES * WORKERS:
        if time.monotonic() > deadline:
            sys.exit(f"not every worker reports: {sorted(reporting(client, keys, ports))}")
        for port in ports:
            conn = Client(f"http://127.0.0.1:{port}{path}", token)
            conn.request("PUT", container)
            conn.request("PUT", f"{container}/o", b"x")
            conn.close()
        time.sleep(0.05)


def converge(client, keys: KeySpace, ports: list[int], version: int, timeout: float = 30
             ) -> float:
    """Seconds until every worker reports ``version`` or later (from now)."""
    start = time.monotonic()
    while min(reporting(client, keys, ports).values()) < version:
        if time.monotonic() - start > timeout:
            sys.exit(f"workers did not reach version {version}: "
                     f"{reporting(client, keys, ports)}")
        time.sleep(0.002)
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with stack() as info:
        manager = ProcessManager(Path(info["state_dir"]))
        names = [f"converge-{n}-{uuid.uuid4().hex[:6]}" for n in range(PROXIES)]
        client = connect(info["redis_url"])
        keys = KeySpace(info["key_prefix"])
        policies = Policies(info)
        api_times: list[float] = []
        converged: list[float] = []
        try:
            ports = [start_proxy(info, manager, name, workers=WORKERS) for name in names]
            wake_workers(info, ports, client, keys)
            container = f"converge-{uuid.uuid4().hex[:8]}"
            for rep in range(args.repeat):
                for n in range(args.changes):
                    start = time.monotonic()
                    if n % 2 == 0:
                        policies.add(f"FOR CONTAINER t1/{container} DO SET noop")
                    else:
                        policies.remove_all()
                    api_times.append(time.monotonic() - start)
                    version = int(client.get(keys.version))
                    converged.append(api_times[-1] + converge(client, keys, ports, version))
                policies.remove_all()
                print(f"repetition {rep + 1}/{args.repeat} done", file=sys.stderr)
        finally:
            policies.remove_all()
            for name in names:
                manager.stop(name)
        lookups = lookups_in_subprocess(Path(info["state_dir"]) / "aio.json", "SET ENCRYPTION")
    print(f"\n{PROXIES} proxies x {WORKERS} workers, {len(converged)} policy changes "
          f"({args.repeat} x {args.changes})\n")
    base50, base95 = percentile(api_times, 0.5), percentile(api_times, 0.95)
    rows = [["API call returns (baseline)", f"{base50 * 1e3:.1f}", f"{base95 * 1e3:.1f}",
             "1.0", "1.0"],
            ["every worker enforces it", f"{percentile(converged, 0.5) * 1e3:.1f}",
             f"{percentile(converged, 0.95) * 1e3:.1f}",
             f"{percentile(converged, 0.5) / base50:.1f}",
             f"{percentile(converged, 0.95) / base95:.1f}"]]
    print_table(["from the change to", "p50 ms", "p95 ms", "p50 x base", "p95 x base"], rows)
    print(f"\nmedian convergence after the API call: "
          f"{statistics.median(c - a for c, a in zip(converged, api_times, strict=True)) * 1e3:.1f}"
          " ms")
    print("\nPolicy lookups per request, through the proxy pipeline (in-process; container "
          "under SET ENCRYPTION; each answered from the local copy, no Redis round trip)")
    print_table(("request", "lookups", "round trips"), [(kind, *n) for kind, n in lookups.items()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
