"""Scale-out on the multi-node cluster: 1 proxy vs 2, with and without compression.

Starts a private cluster (``iostack aio start --nodes 3``: three storage nodes
in network namespaces, three replicas, two proxies with ``--workers`` each)
and measures, in one run, aggregate PUT and GET throughput of ``--clients``
clients spread over one proxy, then over both, for objects of ``--size``
bytes (redundant log text) in a container with no policy and in one with
``SET COMPRESSION WITH algorithm=zstd``. Every combination is repeated
``--repeat`` times, interleaved; medians are reported:

- MB/s and the ratio 2 proxies / 1 proxy for each policy and operation (the
  scale-out), and compression / no policy for each proxy count;
- CPU seconds per GB moved, for the whole stack (proxies, their workers and
  every node's servers and daemons; the clients excluded), so the figure
  means something beyond this machine's cores;
- the time from a node failure (its link taken down) to the first successful
  PUT started after it, and the same for GET, with clients on both proxies
  (the node comes back between repeats; a different node fails each time).

    .venv/bin/python bench/scale.py [--size 1048576] [--clients 4] [--seconds 5]
                                    [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import itertools
import signal
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

from common import (
    Client,
    Policies,
    auth,
    group_cpu_seconds,
    print_table,
    put_get_ops,
    redundant_log_corpus,
    run_clients,
)

from iostack.aio.netns import ClusterNetwork
from iostack.aio.processes import ProcessManager
from iostack.aio.session import started_stack

GB = 1e9


def stack_pgids(state_dir: Path) -> set[int]:
    """Process groups of every process the stack runs (each leads its own)."""
    manager = ProcessManager(state_dir)
    return {proc.pid for name in manager.names() if (proc := manager.find(name))}


def measure(info: dict, state_dir: Path, proxies: int, container: str, body: bytes,
            clients: int, seconds: float) -> dict[str, tuple[float, float]]:
    """Op -> (MB/s, CPU seconds per GB) for PUT then GET through the first ``proxies``."""
    endpoints = []
    for url in info["proxy_urls"][:proxies]:
        storage_url, token = auth({**info, "auth_url": f"{url}/auth/v1.0"}, "t1")
        endpoints.append((storage_url, token))
    pick = itertools.cycle(endpoints)
    lock = threading.Lock()

    def make_client() -> Client:
        with lock:
            return Client(*next(pick))

    ops = put_get_ops(container, f"o{proxies}", body)
    result = {}
    for op in ("PUT", "GET"):
        pgids = stack_pgids(state_dir)
        cpu0 = group_cpu_seconds(pgids)
        run = run_clients(clients, seconds, ops[op], make_client)
        cpu = group_cpu_seconds(pgids) - cpu0
        result[op] = (run.mb_per_s, cpu / (run.nbytes / GB))
    return result


def failover_seconds(info: dict, state_dir: Path, node: int, op: str, body: bytes) -> float:
    """Seconds from taking ``node``'s link down to the first successful ``op`` started after."""
    endpoints = [auth({**info, "auth_url": f"{url}/auth/v1.0"}, "t1")
                 for url in info["proxy_urls"]]
    network = ClusterNetwork(state_dir, len(info["nodes"]))
    setup = Client(*endpoints[0])
    for n in range(8):
        setup.request("PUT", f"bench-plain/failover-{n}", body)
    setup.close()
    failed_at: list[float] = []
    first_ok: list[float] = []
    stop = threading.Event()

    def loop(index: int) -> None:
        client = Client(*endpoints[index % len(endpoints)])
        n = 0
        while not stop.is_set():
            n += 1
            started = time.perf_counter()
            try:
                if op == "PUT":
                    client.request("PUT", f"bench-plain/failover-new-{index}-{n}", body)
                else:
                    client.request("GET", f"bench-plain/failover-{n % 8}")
            except (OSError, RuntimeError):
                client.close()
                client = Client(*endpoints[index % len(endpoints)])
                continue
            if failed_at and started >= failed_at[0]:
                first_ok.append(time.perf_counter())
        client.close()

    threads = [threading.Thread(target=loop, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1)
    failed_at.append(time.perf_counter())
    network.set_link(node, up=False)
    deadline = time.perf_counter() + 60
    while not first_ok and time.perf_counter() < deadline:
        time.sleep(0.01)
    stop.set()
    for thread in threads:
        thread.join()
    network.set_link(node, up=True)
    if not first_ok:
        raise RuntimeError(f"no {op} succeeded within 60 s of node{node} going down")
    return min(first_ok) - failed_at[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="workers per proxy")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # still stop the cluster

    body = redundant_log_corpus(args.size)
    state_dir = Path(tempfile.mkdtemp(prefix="iostack-scale-")) / "aio"
    with started_stack(state_dir, "--nodes", "3", "--proxy-workers", str(args.workers),
                       "--namespace", f"scale-{uuid.uuid4().hex[:8]}") as info:
        policies = Policies(info)
        policies.add("FOR CONTAINER AUTH_t1/bench-zstd DO SET COMPRESSION WITH algorithm=zstd")
        setup = Client(*auth(info, "t1"))
        for container in ("bench-plain", "bench-zstd"):
            setup.request("PUT", container)
        setup.close()
        combos = [(p, c) for c in ("bench-plain", "bench-zstd") for p in (1, 2)]
        samples: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
        measure(info, state_dir, 2, "bench-plain", body, args.clients, 1)  # warm-up
        for _ in range(args.repeat):
            for proxies, container in combos:
                got = measure(info, state_dir, proxies, container, body, args.clients,
                              args.seconds)
                for op, value in got.items():
                    samples.setdefault((proxies, container, op), []).append(value)

        failover: dict[str, list[float]] = {"PUT": [], "GET": []}
        for n in range(args.repeat):
            for op in failover:
                failover[op].append(failover_seconds(info, state_dir, n % 3 + 1, op, body))
        policies.remove_all()

    def med(key: tuple[int, str, str], i: int) -> float:
        return statistics.median(v[i] for v in samples[key])

    print(f"\n3 storage nodes (3 replicas), {args.workers} workers per proxy, {args.clients} "
          f"clients, {args.size} B objects, {args.seconds:.0f} s runs, medians of "
          f"{args.repeat}\n")
    rows = []
    for container in ("bench-plain", "bench-zstd"):
        policy = "zstd" if container == "bench-zstd" else "none"
        for op in ("PUT", "GET"):
            one, two = med((1, container, op), 0), med((2, container, op), 0)
            rows.append([policy, op, one, two, two / one, med((1, container, op), 1),
                         med((2, container, op), 1)])
    print_table(["policy", "op", "1 proxy MB/s", "2 proxies MB/s", "2/1", "CPU s/GB (1)",
                 "CPU s/GB (2)"], rows)
    print()
    print_table(["op", "proxies", "zstd / none (throughput)"],
                [[op, p, med((p, "bench-zstd", op), 0) / med((p, "bench-plain", op), 0)]
                 for op in ("PUT", "GET") for p in (1, 2)])
    print()
    print_table(["op", "node failure -> first success (s), median", "worst"],
                [[op, statistics.median(v), max(v)] for op, v in failover.items()])
    return 0


if __name__ == "__main__":
    sys.exit(main())
