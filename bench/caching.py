"""The proxy cache: GET hits and misses against plain Swift, measured side by side in one run.

    .venv/bin/python bench/caching.py [--repeat 5] [--seconds 1] [--quick]

Proxies on the all-in-one's storage servers, started by this benchmark:
``plain`` (no IOStack middleware), ``iostack`` (no cache), ``cache`` (IOStack
and the cache, room for everything), ``validated`` (the same cache directory
with ``validate = head``) and ``thrash`` (room for about one entry, so every
GET is a miss that fills the cache and evicts another entry). Configurations,
run in alternation within every repetition so noise hits them alike:

- ``plain``      GET through the plain proxy
- ``iostack``    GET through a proxy with ``iostack`` but no cache, no policy
- ``no-policy``  GET through ``cache`` of objects without a caching policy
- ``miss``       GET through ``thrash``, ``SET CACHING`` container
- ``hit``        GET through ``cache``, same container, entries filled beforehand
- ``hit+head``   the same entries through a proxy with ``validate = head``
                 (a HEAD to the object servers per hit)

Sizes 4 KiB, 1 MiB and 16 MiB (over the default 4 MiB head: the head comes
from the cache, 12 MiB from the object servers), 1 and 4 clients. Prints
medians over repetitions of the throughput ratio to ``plain`` measured in the
same repetition, latency p50, and server CPU per GET split into proxy and
storage servers (account, container, object): a hit should cost the storage
servers nothing for whole objects.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import uuid
from pathlib import Path
from urllib.parse import urlsplit

from common import (
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

from iostack.aio.processes import ProcessManager
from iostack.ports import wait_until
from iostack.swift_middleware.cache.store import CacheStore

MIB = 1 << 20
HEAD = 4 * MIB  # the caching filter's default head
CONFIGS = ("plain", "iostack", "no-policy", "miss", "hit", "hit+head")
PROXY_OF = {"plain": "plain", "iostack": "iostack", "no-policy": "cache", "miss": "thrash",
            "hit": "cache", "hit+head": "validated"}
OBJECTS_PER_CLIENT = 3  # put_get_ops reads <prefix>-<client>-<n % 3>


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--quick", action="store_true", help="1 client only, 3 repetitions")
    args = parser.parse_args()
    if args.quick:
        args.repeat = min(args.repeat, 3)
    sizes = [4 << 10, MIB, 16 * MIB]
    client_counts = [1] if args.quick else [1, 4]

    with stack() as info, tempfile.TemporaryDirectory(prefix="iostack-bench-cache-") as tmp:
        storage_url, token = auth(info, "t1")
        account = storage_url.rsplit("/", 1)[1]
        manager = ProcessManager(Path(info["state_dir"]))
        run_id = uuid.uuid4().hex[:6]
        names = {p: f"bench-cache-{run_id}-{p}"
                 for p in ("plain", "iostack", "cache", "validated", "thrash")}
        cache_dir = Path(tmp) / "cache"
        policies = Policies(info)
        try:
            ports = {
                "plain": start_proxy(info, manager, names["plain"], iostack=False),
                "iostack": start_proxy(info, manager, names["iostack"]),
                "cache": start_proxy(info, manager, names["cache"], cache={
                    "cache_dir": str(cache_dir), "cache_size": str(1 << 30)}),
                # Shares the cache directory, like another worker of the same proxy.
                "validated": start_proxy(info, manager, names["validated"], cache={
                    "cache_dir": str(cache_dir), "cache_size": str(1 << 30),
                    "validate": "head"}),
            }
            parts = urlsplit(storage_url)
            urls = {p: parts._replace(netloc=f"{parts.hostname}:{port}").geturl()
                    for p, port in ports.items()}
            containers = {"cached": f"bench-cache-{run_id}", "plain": f"bench-nocache-{run_id}"}
            setup = Client(urls["cache"], token)
            for container in containers.values():
                setup.request("PUT", container)
            policies.add(f"FOR CONTAINER {account}/{containers['cached']} DO SET CACHING")
            setup.close()
            pgids = {p: manager.find(names[p]).pid for p in ports}
            storage = {manager.find(s).pid for s in ("object", "container", "account")}
            rows = []
            for size in sizes:
                # A cache that holds one entry of this size and a half: every GET misses.
                entry = min(size, HEAD) + 2048  # the stored headers take about 1 KiB
                thrash_name = f"{names['thrash']}-{size}"
                port = start_proxy(info, manager, thrash_name, cache={
                    "cache_dir": str(Path(tmp) / f"thrash-{size}"),
                    "cache_size": str(entry * 3 // 2)})
                urls["thrash"] = parts._replace(netloc=f"{parts.hostname}:{port}").geturl()
                pgids["thrash"] = manager.find(thrash_name).pid
                try:
                    body = body_of(size)
                    prefix = f"obj-{size}"
                    prepare(urls, token, containers, prefix, body, max(client_counts),
                            cache_dir, f"/v1/{account}/{containers['cached']}/")
                    for clients in client_counts:
                        rows.append(measure(args, urls, token, containers, pgids, storage,
                                            size, clients, prefix, body))
                finally:
                    manager.stop(thrash_name)
                    (Path(info["swift_dir"]) / f"{thrash_name}.conf").unlink(missing_ok=True)
            print()
            print(f"Proxy cache vs plain Swift, GET, random bytes (median of {args.repeat} "
                  f"alternating runs of {args.seconds:g}s; ratio = throughput / plain "
                  "in the same run)")
            print_table(("size", "clients", *[c for c in CONFIGS if c != "plain"],
                         "plain MB/s", *[f"p50 ms {c}" for c in CONFIGS]),
                        [r[0] for r in rows])
            print()
            print("Server CPU ms per GET: proxy / storage servers")
            print_table(("size", "clients", *CONFIGS), [r[1] for r in rows])
        finally:
            policies.remove_all()
            for name in names.values():
                manager.stop(name)
                (Path(info["swift_dir"]) / f"{name}.conf").unlink(missing_ok=True)


def prepare(urls, token, containers, prefix, body, clients, cache_dir, cached_prefix) -> None:
    """Write every object the GETs read, then fill the big cache with the cached ones."""
    writer = Client(urls["cache"], token)
    for container in containers.values():
        for index in range(clients):
            for n in range(OBJECTS_PER_CLIENT):
                writer.request("PUT", f"{container}/{prefix}-{index}-{n}", body)
    want = {f"{cached_prefix}{prefix}-{i}-{n}"
            for i in range(clients) for n in range(OBJECTS_PER_CLIENT)}

    def filled() -> bool:
        for path in want:
            writer.request("GET", f"{containers['cached']}/{path.rsplit('/', 1)[1]}")
        return want <= set(CacheStore(cache_dir, 1 << 30).paths())
    if not wait_until(filled, 10, 0.2):
        raise RuntimeError("the cache proxy did not fill its cache")
    writer.close()


def measure(args, urls, token, containers, pgids, storage, size, clients, prefix, body):
    ratios: dict[str, list[float]] = {c: [] for c in CONFIGS}
    p50: dict[str, list[float]] = {c: [] for c in CONFIGS}
    cpu: dict[str, list[tuple[float, float]]] = {c: [] for c in CONFIGS}
    plain_mb: list[float] = []
    for _ in range(args.repeat):
        results = {}
        for name in CONFIGS:
            proxy = PROXY_OF[name]
            container = containers["plain" if name in ("iostack", "no-policy") else "cached"]
            op = put_get_ops(container, prefix, body)["GET"]
            proxy_before = group_cpu_seconds({pgids[proxy]})
            storage_before = group_cpu_seconds(storage)
            result = run_clients(clients, args.seconds, op,
                                 lambda url=urls[proxy]: Client(url, token))
            if result.nbytes != result.ops * len(body):
                raise RuntimeError(f"{name}: short GET bodies")
            cpu[name].append(((group_cpu_seconds({pgids[proxy]}) - proxy_before) / result.ops,
                              (group_cpu_seconds(storage) - storage_before) / result.ops))
            results[name] = result
        plain_mb.append(results["plain"].mb_per_s)
        for name, result in results.items():
            ratios[name].append(result.mb_per_s / results["plain"].mb_per_s)
            p50[name].append(statistics.median(result.latencies) * 1000)
    label = (human_size(size), clients)
    print(f"  {' '.join(map(str, label))}: " + ", ".join(
        f"{n} {statistics.median(r):.2f}" for n, r in ratios.items() if n != "plain"), flush=True)
    ratio_row = (*label, *[statistics.median(ratios[c]) for c in CONFIGS if c != "plain"],
                 statistics.median(plain_mb), *[statistics.median(p50[c]) for c in CONFIGS])
    cpu_row = (*label, *[
        f"{statistics.median(x[0] for x in cpu[c]) * 1000:.2f} / "
        f"{statistics.median(x[1] for x in cpu[c]) * 1000:.2f}" for c in CONFIGS])
    return ratio_row, cpu_row


if __name__ == "__main__":
    main()
