"""Baseline: plain Swift PUT and GET throughput on the all-in-one.

    .venv/bin/python bench/swift_baseline.py [--repeat 3] [--seconds 2]

For 1 KiB, 1 MiB and 10 MiB objects with 1 and 4 concurrent clients, runs
timed PUT and GET loops against the all-in-one (the running ``make run``
stack, or a private one), repeats each, and prints the medians: ops/s, MB/s
and p50 latency. Later benchmarks measure IOStack side by side with this.
"""

from __future__ import annotations

import argparse
import uuid

from common import (
    Client,
    auth,
    body_of,
    human_size,
    median_result,
    print_table,
    put_get_ops,
    run_clients,
    stack,
)

SIZES = (1024, 1 << 20, 10 << 20)
CLIENTS = (1, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0, help="duration of one measurement")
    parser.add_argument("--tenant", default="t1")
    args = parser.parse_args()

    with stack() as info:
        storage_url, token = auth(info, args.tenant)
        container = f"bench-baseline-{uuid.uuid4().hex[:8]}"
        def new_client() -> Client:
            return Client(storage_url, token)

        new_client().request("PUT", container)
        rows = []
        for size in SIZES:
            body = body_of(size)
            ops = put_get_ops(container, str(size), body)
            for clients in CLIENTS:
                for name, op in ops.items():
                    runs = [run_clients(clients, args.seconds, op, new_client)
                            for _ in range(args.repeat)]
                    m = median_result(runs)
                    rows.append((name, human_size(size), clients, m["ops_per_s"],
                                 m["mb_per_s"], m["p50_ms"]))
                    print(f"  {name} {human_size(size)} x{clients}: {m['ops_per_s']:.1f} ops/s",
                          flush=True)
        print()
        print(f"Plain Swift baseline (median of {args.repeat} runs of {args.seconds:.0f}s each)")
        print_table(("op", "size", "clients", "ops/s", "MB/s", "p50 ms"), rows)


if __name__ == "__main__":
    main()
