"""What IOStack's middlewares cost an object server with no policy, in CPU per GB.

    .venv/bin/python bench/object_server.py [--repeat 5] [--size-mib 10] [--objects 8]

Loads the all-in-one's object server twice in this process, from its own
``object-server.conf``: once with its whole pipeline (``iostack_metrics``,
``iostack_select``, ``storlet_handler``, ``iostack``) and once with Swift's
alone (``healthcheck recon object-server``), on the same devices. Each
repetition PUTs and then GETs ``--objects`` objects of ``--size-mib`` through
both, alternating, reading request bodies in 64 KiB pieces as the proxy sends
them; it prints the median CPU seconds per GB of each and their ratio
(IOStack / Swift). No policy applies: this is the price of being installed.
``--profile`` prints where the IOStack pipeline spends the difference.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import statistics
import time
import uuid
from configparser import ConfigParser
from pathlib import Path

from common import print_table, stack
from swift.common.swob import Request
from swift.common.utils import Timestamp, set_swift_dir
from swift.common.wsgi import loadapp

CHUNK = 64 * 1024
SWIFT_ONLY = "healthcheck recon object-server"


class PieceInput:
    """A request body read as a proxy sends it: at most 64 KiB a read."""

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.at = 0

    def read(self, size: int = -1) -> bytes:
        size = CHUNK if size is None or size < 0 else min(size, CHUNK)
        piece = self.data[self.at:self.at + size]
        self.at += len(piece)
        return bytes(piece)

    def readline(self, size: int = -1) -> bytes:
        return self.read(size)


def load(swift_dir: Path, pipeline: str | None) -> object:
    conf = ConfigParser(interpolation=None)
    conf.read(swift_dir / "object-server.conf")
    if pipeline:
        conf["pipeline:main"]["pipeline"] = pipeline
    path = swift_dir / f"bench-object-{uuid.uuid4().hex[:6]}.conf"
    with open(path, "w", encoding="utf-8") as f:
        conf.write(f)
    path.chmod(0o600)
    try:
        return loadapp(str(path))
    finally:
        path.unlink()


def device_of(swift_dir: Path) -> str:
    from swift.common.ring import Ring

    return Ring(str(swift_dir), ring_name="object").devs[0]["device"]


def put_get(app, device: str, names: list[str], body: bytes) -> tuple[float, float]:
    """CPU seconds of PUTting, then GETting, ``names``."""
    started = time.process_time()
    for name in names:
        req = Request.blank(f"/{device}/0/AUTH_bench/c/{name}", method="PUT", headers={
            "X-Timestamp": Timestamp.now().internal, "Content-Type": "application/octet-stream",
            "Content-Length": str(len(body))}, environ={"wsgi.input": PieceInput(body)})
        resp = req.get_response(app)
        if resp.status_int != 201:
            raise RuntimeError(f"PUT {name}: {resp.status}")
    put = time.process_time() - started
    started = time.process_time()
    for name in names:
        resp = Request.blank(f"/{device}/0/AUTH_bench/c/{name}").get_response(app)
        got = sum(len(chunk) for chunk in resp.app_iter)
        if resp.status_int != 200 or got != len(body):
            raise RuntimeError(f"GET {name}: {resp.status}, {got} bytes")
    return put, time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--size-mib", type=int, default=10)
    parser.add_argument("--objects", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    body = bytes(range(256)) * (args.size_mib << 12)
    gigabytes = len(body) * args.objects / 1e9
    with stack() as info:
        swift_dir = Path(info["swift_dir"])
        set_swift_dir(str(swift_dir))  # the stack's hash settings, not /etc/swift's
        apps = {"iostack": load(swift_dir, None), "swift": load(swift_dir, SWIFT_ONLY)}
        device = device_of(swift_dir)
        cpu = {(name, op): [] for name in apps for op in ("PUT", "GET")}
        for n in range(args.repeat):
            for name, app in (apps.items() if n % 2 else reversed(apps.items())):
                names = [f"{name}-{i}" for i in range(args.objects)]
                put, get = put_get(app, device, names, body)
                cpu[name, "PUT"].append(put / gigabytes)
                cpu[name, "GET"].append(get / gigabytes)
        rows = []
        for op in ("PUT", "GET"):
            swift, iostack = (statistics.median(cpu[name, op]) for name in ("swift", "iostack"))
            rows.append((op, swift, iostack, iostack / swift))
        print(f"Object server CPU seconds per GB, {args.objects} x {args.size_mib} MiB, "
              f"no policy (median of {args.repeat})")
        print_table(("op", "swift", "iostack", "ratio"), rows)
        if args.profile:
            profiler = cProfile.Profile()
            profiler.runcall(put_get, apps["iostack"], device,
                             [f"iostack-{i}" for i in range(args.objects)], body)
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
            print(out.getvalue())


if __name__ == "__main__":
    main()
