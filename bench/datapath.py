"""IOStack's data path against plain Swift, measured side by side in one run.

    .venv/bin/python bench/datapath.py [--repeat 3] [--seconds 1] [--quick]
                                       [--data redundant,logs,random] [--clients 1,4]

Configurations, each on its own container, run in alternation within every
repetition so that noise hits them alike, each repetition starting one
configuration further along (none always runs first, after the longest
pause, or last):

- ``plain``      a second proxy on the same servers without the IOStack middleware
- ``no-policy``  the IOStack proxy, no policy matches
- ``noop``, ``gzip``, ``zstd``, ``encryption``   policies on the container
- ``swift-crypto``  a third proxy, plain Swift with Swift's own at-rest
  encryption (``keymaster`` + ``encryption``): what IOStack's ENCRYPTION
  competes with

on three bodies (``bench/common.py``): ``redundant`` log-like text (templated
lines, a few values per field: the issue's "highly redundant" data), realistic
access ``logs`` (the same with a unique transaction id and sub-second stamp
per line, as real proxy logs have: harder to compress) and ``random`` bytes;
1 MiB and 10 MiB objects, PUT and GET, 1 and 4 clients. Prints, as medians
over repetitions, the ratio of each configuration's throughput to ``plain``
measured in the same repetition, server CPU seconds per GB moved (proxy +
storage servers), stored bytes per byte written, and the number of policy
lookups each kind of request makes (``iostack.aio.inprocess``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from common import (
    CORPORA,
    Client,
    Policies,
    auth,
    body_of,
    group_cpu_seconds,
    human_size,
    print_table,
    put_get_ops,
    run_clients,
    stack,
    start_proxy,
)
from swift.common import direct_client, utils
from swift.common.ring import Ring

from iostack.aio.inprocess import lookups_in_subprocess
from iostack.aio.processes import ProcessManager

CONFIGS = {
    "plain": None,
    "no-policy": None,
    "noop": "SET NOOP",
    "gzip": "SET COMPRESSION WITH algorithm=gzip",
    "zstd": "SET COMPRESSION WITH algorithm=zstd",
    "encryption": "SET ENCRYPTION",
    "swift-crypto": None,
}
PLAIN_PROXY = "bench-plain-proxy"
CRYPTO_PROXY = "bench-swift-crypto-proxy"
PROXY_OF = {"plain": PLAIN_PROXY, "swift-crypto": CRYPTO_PROXY}  # the others: the aio's


def server_pgids(info: dict) -> dict[str, int]:
    manager = ProcessManager(Path(info["state_dir"]))
    pgids = {}
    for name in ("proxy", PLAIN_PROXY, CRYPTO_PROXY, "object", "container", "account"):
        proc = manager.find(name)
        if proc:
            pgids[name] = proc.pid
    return pgids


def stored_bytes(info: dict, account: str, container: str, names: list[str]) -> int:
    utils.set_swift_dir(info["swift_dir"])
    ring = Ring(info["swift_dir"], ring_name="object")
    total = 0
    for name in names:
        part, nodes = ring.get_nodes(account, container, name)
        headers = direct_client.direct_head_object(nodes[0], part, account, container, name)
        total += int(headers["Content-Length"])
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true",
                        help="10 MiB only, 1 client (unless --clients says otherwise)")
    parser.add_argument("--clients", help="comma-separated client counts (default 1,4)")
    parser.add_argument("--data", default=",".join(CORPORA),
                        help=f"comma-separated bodies, of {', '.join(CORPORA)}")
    args = parser.parse_args()
    kinds = args.data.split(",")
    if not set(kinds) <= set(CORPORA):
        parser.error(f"--data: unknown body in {args.data!r}")
    sizes = [10 << 20] if args.quick else [1 << 20, 10 << 20]
    client_counts = ([int(n) for n in args.clients.split(",")] if args.clients
                     else [1] if args.quick else [1, 4])

    with stack() as info:
        storage_url, token = auth(info, "t1")
        account = storage_url.rsplit("/", 1)[1]
        manager = ProcessManager(Path(info["state_dir"]))
        parts = urlsplit(storage_url)
        urls = {name: storage_url for name in CONFIGS}
        for name, proxy in PROXY_OF.items():
            port = start_proxy(info, manager, proxy, iostack=False,
                               swift_crypto=name == "swift-crypto")
            urls[name] = parts._replace(netloc=f"{parts.hostname}:{port}").geturl()
        policies = Policies(info)
        run_id = uuid.uuid4().hex[:6]
        containers = {name: f"bench-dp-{run_id}-{name}" for name in CONFIGS}
        try:
            setup = Client(storage_url, token)
            for name, container in containers.items():
                setup.request("PUT", container)
                if CONFIGS[name]:
                    policies.add(f"FOR CONTAINER {account}/{container} DO {CONFIGS[name]}")
            setup.close()
            pgids = server_pgids(info)
            load_before = os.getloadavg()[0]
            rows = []
            for kind in kinds:
                for size in sizes:
                    body = body_of(size, kind)
                    prefix = f"{kind}-{size}"
                    for op in ("PUT", "GET"):
                        for clients in client_counts:
                            rows.append(measure(args, urls, token, containers, pgids, kind,
                                                size, op, clients, body, prefix))
            print()
            print(f"IOStack data path vs plain Swift (median of {args.repeat} alternating runs "
                  f"of {args.seconds:g}s; ratio = throughput / plain in the same run; load "
                  f"average {load_before:.1f} -> {os.getloadavg()[0]:.1f})")
            measured = [c for c in CONFIGS if c != "plain"]
            print_table(("data", "size", "op", "clients", *measured, "plain MB/s"),
                        [r[0] for r in rows])
            print()
            print("Server CPU seconds per GB moved (proxy + storage servers)")
            print_table(("data", "size", "op", "clients", *CONFIGS), [r[1] for r in rows])
            print()
            print("Stored bytes, % of the bytes written")
            stored_rows = []
            for kind in kinds:
                for size in sizes:
                    names = [f"{kind}-{size}-0-{n}" for n in range(3)]
                    percents = [100 * stored_bytes(info, account, containers[c], names) / (3 * size)
                                for c in CONFIGS]
                    stored_rows.append((kind, human_size(size), *[f"{p:.2f}" for p in percents]))
            print_table(("data", "size", *CONFIGS), stored_rows)
            print()
            print("Policy lookups per request, and of them network round trips to the "
                  "policy store, through the proxy pipeline (in-process; container under "
                  "SET ENCRYPTION)")
            counts = lookups_in_subprocess(Path(info["state_dir"]) / "aio.json",
                                           "SET ENCRYPTION")
            print_table(("request", "lookups", "round trips"),
                        [(kind, *n) for kind, n in counts.items()])
        finally:
            policies.remove_all()
            for proxy in PROXY_OF.values():
                manager.stop(proxy)


def measure(args, urls, token, containers, pgids, kind, size, op, clients, body, prefix):
    ratios: dict[str, list[float]] = {c: [] for c in CONFIGS}
    cpu: dict[str, list[float]] = {c: [] for c in CONFIGS}
    plain_mb: list[float] = []
    names = list(containers)
    for repetition in range(args.repeat):
        results = {}
        turn = repetition % len(names)
        for name in names[turn:] + names[:turn]:
            container, url = containers[name], urls[name]
            proxy = PROXY_OF.get(name, "proxy")
            groups = {pgids[proxy], pgids["object"], pgids["container"], pgids["account"]}
            op_fn = put_get_ops(container, prefix, body)[op]
            before = group_cpu_seconds(groups)
            result = run_clients(clients, args.seconds, op_fn, lambda url=url: Client(url, token))
            cpu[name].append((group_cpu_seconds(groups) - before) / (result.nbytes / 1e9))
            results[name] = result
        plain_mb.append(results["plain"].mb_per_s)
        for name, result in results.items():
            ratios[name].append(result.mb_per_s / results["plain"].mb_per_s)
    label = (kind, human_size(size), op, clients)
    print(f"  {' '.join(map(str, label))}: " + ", ".join(
        f"{n} {statistics.median(r):.2f}" for n, r in ratios.items() if n != "plain"), flush=True)
    ratio_row = (*label, *[statistics.median(ratios[c]) for c in CONFIGS if c != "plain"],
                 statistics.median(plain_mb))
    cpu_row = (*label, *[statistics.median(cpu[c]) for c in CONFIGS])
    return ratio_row, cpu_row


if __name__ == "__main__":
    main()
