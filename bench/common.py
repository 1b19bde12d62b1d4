"""Shared benchmark harness: a running stack, timed PUT/GET loops, medians, tables.

Benchmarks run against the all-in-one (``make run``'s if it answers, else a
private one they start and stop). Each measurement is a fixed-duration loop of
PUTs or GETs by N concurrent clients over keep-alive HTTP connections; results
are repeated and reported as medians, because the machine is shared and noisy.
"""

from __future__ import annotations

import base64
import http.client
import os
import random
import signal
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from configparser import ConfigParser
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from iostack.aio.processes import ProcessManager
from iostack.aio.session import running_stack
from iostack.controller.client import ControllerClient
from iostack.ports import free_port, port_open, wait_until

CHECKOUT = Path(__file__).resolve().parents[1]


@contextmanager
def stack() -> Iterator[dict[str, Any]]:
    # A benchmark stopped with SIGTERM still stops the private stack it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with running_stack(CHECKOUT / ".iostack-bench") as info:
        yield info


def auth(info: dict[str, Any], tenant: str) -> tuple[str, str]:
    """Storage URL and token of a tenant."""
    creds = info["tenants"][tenant]
    request = urllib.request.Request(  # noqa: S310 - loopback URL from aio.json
        info["auth_url"], headers={"X-Auth-User": creds["user"], "X-Auth-Key": creds["key"]}
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 - aio's URL
        return response.headers["X-Storage-Url"], response.headers["X-Auth-Token"]


class Client:
    """One keep-alive HTTP connection to a storage URL."""

    def __init__(self, storage_url: str, token: str) -> None:
        parts = urlsplit(storage_url)
        self.path = parts.path
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        self.token = token

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        all_headers = {"X-Auth-Token": self.token, **(headers or {})}
        self.conn.request(method, f"{self.path}/{path}", body=body, headers=all_headers)
        response = self.conn.getresponse()
        data = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {data[:200]!r}")
        return response.status, data

    def close(self) -> None:
        self.conn.close()


@dataclass
class Result:
    ops: int
    seconds: float
    nbytes: int
    latencies: list[float]

    @property
    def ops_per_s(self) -> float:
        return self.ops / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.nbytes / self.seconds / 1e6


def run_clients(
    clients: int,
    duration: float,
    op: Callable[[Client, int, int], int],
    make_client: Callable[[], Client],
    min_ops: int = 3,
) -> Result:
    """Run ``op(client, client_index, iteration) -> bytes moved`` in a loop on N threads."""
    results: list[tuple[int, int, list[float]]] = []
    lock = threading.Lock()
    start_gate = threading.Barrier(clients + 1)
    deadline_box: list[float] = []

    def worker(index: int) -> None:
        client = make_client()
        start_gate.wait()
        ops = nbytes = 0
        latencies = []
        try:
            while ops < min_ops or time.perf_counter() < deadline_box[0]:
                t0 = time.perf_counter()
                nbytes += op(client, index, ops)
                latencies.append(time.perf_counter() - t0)
                ops += 1
        finally:
            client.close()
            with lock:
                results.append((ops, nbytes, latencies))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    deadline_box.append(time.perf_counter() + duration)
    t0 = time.perf_counter()
    start_gate.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - t0
    if len(results) != clients:
        raise RuntimeError("a benchmark client failed")
    return Result(
        ops=sum(r[0] for r in results),
        seconds=elapsed,
        nbytes=sum(r[1] for r in results),
        latencies=[lat for r in results for lat in r[2]],
    )


def put_get_ops(container: str, prefix: str, body: bytes) -> dict[str, Callable[..., int]]:
    """PUT and GET operations for ``run_clients``; each client writes its own few objects.

    GETs read objects that the PUT run wrote (``run_clients`` does ``min_ops``
    operations per client at least), so run PUT first.
    """

    def put(client: Client, index: int, n: int) -> int:
        client.request("PUT", f"{container}/{prefix}-{index}-{n % 20}", body)
        return len(body)

    def get(client: Client, index: int, n: int) -> int:
        _, data = client.request("GET", f"{container}/{prefix}-{index}-{n % 3}")
        return len(data)

    return {"PUT": put, "GET": get}


def median_result(results: Sequence[Result]) -> dict[str, float]:
    return {
        "ops_per_s": statistics.median(r.ops_per_s for r in results),
        "mb_per_s": statistics.median(r.mb_per_s for r in results),
        "p50_ms": statistics.median(statistics.median(r.latencies) for r in results) * 1000,
    }


def _clock(second: int, separator: str) -> str:
    return separator.join(f"{v:02d}" for v in (second // 3600 % 24, second // 60 % 60, second % 60))


def _log_text(size: int, line: Callable[[random.Random, int, int], str]) -> bytes:
    """``line(rng, number, second)`` until ``size`` bytes; a second passes now and then."""
    rng = random.Random(42)
    lines, total, second = [], 0, 0
    while total < size:
        second += rng.random() < 0.2
        text = line(rng, len(lines), second).encode()
        lines.append(text)
        total += len(text)
    return b"".join(lines)[:size]


CLIENTS = [f"192.168.{i}.{i * 7 % 250}" for i in range(4)]


def log_corpus(size: int) -> bytes:
    """Access-log lines with the repetition real proxy logs have."""
    objects = [f"/v1/AUTH_t1/logs/app-{i}.log" for i in range(8)]
    return _log_text(size, lambda rng, n, second: (
        f"Nov 21 {_clock(second, ':')} proxy proxy-server: {rng.choice(CLIENTS)} "
        f"{rng.choice(CLIENTS)} 21/Nov/2026/{_clock(second, '/')} GET {rng.choice(objects)} "
        f"HTTP/1.0 200 - python-swiftclient-4.4.0 AUTH_tk - 65536 - tx{n:016x} - "
        f"0.0{rng.randrange(10)} - - 1763700000.{n % 1000:03d} 0.000\n"))


def redundant_log_corpus(size: int) -> bytes:
    """Highly redundant log-like text: templated lines whose fields take a few values each.

    Like the output of a log generator: unlike ``log_corpus`` no field is
    unique per line (no transaction id, no sub-second stamp). The IOStack
    paper's ssbench objects were more redundant still (0.1 % after gzip).
    """
    requests = [f"{m} /v1/AUTH_t1/logs/app-{i}.log" for m in ("GET", "PUT") for i in range(4)]
    return _log_text(size, lambda rng, n, second: (
        f"Nov 21 {_clock(second, ':')} proxy proxy-server: {rng.choice(CLIENTS)} - "
        f"{rng.choice(requests)} HTTP/1.0 {rng.choice((200, 200, 200, 201, 404))} - "
        f"python-swiftclient-4.4.0 AUTH_tk - 65536 - 0.0{rng.randrange(10)}\n"))


def random_corpus(size: int) -> bytes:
    return random.Random(7).randbytes(size)


CORPORA = {"redundant": redundant_log_corpus, "logs": log_corpus, "random": random_corpus}


def body_of(size: int, kind: str = "random") -> bytes:
    """A test body: ``random`` bytes, realistic access ``logs`` or ``redundant`` log-like text."""
    return CORPORA[kind](size)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * width for width in widths))


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if value < 100 else f"{value:.0f}"
    return str(value)


def human_size(size: int) -> str:
    for unit, factor in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def group_cpu_seconds(pgids: set[int]) -> float:
    """User+system CPU seconds of the live processes in the given process groups."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) in pgids:
            total += int(fields[11]) + int(fields[12])
    return total / ticks


class Policies:
    """Policies added through the controller API for one benchmark run, removed at the end."""

    def __init__(self, info: dict[str, Any]) -> None:
        self.client = ControllerClient(info["controller_url"], info["admin_token"])
        self.ids: list[str] = []

    def add(self, text: str) -> None:
        self.ids += [p["id"] for p in self.client.add_policies(text)["policies"]]

    def remove_all(self) -> None:
        for pid in self.ids:
            self.client.delete_policy(pid)
        self.ids.clear()


def start_proxy(info: dict, manager: ProcessManager, name: str, iostack: bool = True,
                cache: dict | None = None, metrics: bool | None = None,
                workers: int | None = None, options: dict[str, str] | None = None,
                swift_crypto: bool = False) -> int:
    """A proxy like the all-in-one's, with or without ``iostack`` and the cache (its config).

    ``metrics`` keeps the metric middleware; by default it goes with ``iostack``, so a
    proxy without ``iostack`` is plain Swift. Its copy of the policies is a file of its
    own; ``workers`` replaces the all-in-one's worker count; ``options`` are set in
    ``[filter:iostack]``. ``swift_crypto`` adds Swift's own at-rest encryption
    (``keymaster`` + ``encryption``, where Swift's docs place them: right before
    ``proxy-logging proxy-server``) with a root secret of its own.
    """
    swift_dir = Path(info["swift_dir"])
    conf = ConfigParser(interpolation=None)
    conf.read(swift_dir / "proxy-server.conf")
    pipeline = [f for f in conf["pipeline:main"]["pipeline"].split() if f != "iostack_cache"]
    if not (iostack if metrics is None else metrics):
        pipeline.remove("iostack_metrics")
    if not iostack:
        for middleware in ("iostack", "iostack_qos", "iostack_select"):
            pipeline.remove(middleware)
    elif cache is not None:
        pipeline.insert(pipeline.index("iostack") + 1, "iostack_cache")
        conf["filter:iostack_cache"] = {
            "use": "egg:iostack#iostack_cache", **cache,
            # The same Redis and key prefix as the policy middleware.
            "redis_url": conf["filter:iostack"]["redis_url"],
            "key_prefix": conf["filter:iostack"]["key_prefix"]}
    if swift_crypto:
        at = len(pipeline) - 2  # before the closing "proxy-logging proxy-server"
        pipeline[at:at] = ["keymaster", "encryption"]
        conf["filter:keymaster"] = {
            "use": "egg:swift#keymaster",
            "encryption_root_secret": base64.b64encode(os.urandom(32)).decode("ascii")}
        conf["filter:encryption"] = {"use": "egg:swift#encryption"}
    conf["pipeline:main"]["pipeline"] = " ".join(pipeline)
    for section in conf.sections():
        if "policy_snapshot" in conf[section]:
            conf[section]["policy_snapshot"] = str(swift_dir / f"{name}-policy.json")
    if workers is not None:
        conf["DEFAULT"]["workers"] = str(workers)
    if options:
        conf["filter:iostack"].update(options)
    port = free_port()
    conf["DEFAULT"]["bind_port"] = str(port)
    path = swift_dir / f"{name}.conf"
    with open(path, "w", encoding="utf-8") as f:
        conf.write(f)
    path.chmod(0o600)
    manager.start(name, [sys.executable, "-m", "iostack.aio.swift_launcher",
                         str(swift_dir), str(path), "proxy-server"])
    if not wait_until(lambda: port_open("127.0.0.1", port), 30):
        raise RuntimeError(f"{name} did not start; see {manager.log_file(name)}")
    return port
