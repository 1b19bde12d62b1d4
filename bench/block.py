"""Block bridge: the filter stack's cost, measured with fio over NBD.

    .venv/bin/python bench/block.py [--repeat 3] [--runtime 2] [--size 256M]

One nbdkit per configuration serves the same kind of backing file: ``raw``
is nbdkit's own ``file`` plugin (no IOStack), the others the iostack plugin
with a stack: ``nop``, ``xor>bitrev``, ``aes_xts``. fio's ``nbd`` engine
runs 4K random and 128K sequential reads and writes at queue depth 1 and
16; configurations are interleaved inside every repetition so that they
share the machine's mood, and medians are reported with ratios to raw.
Server CPU (the nbdkit process, from /proc) is reported as CPU seconds per
GB moved. Then the limits: ``iops(read=500,write=200)`` under 4K random
QD16 and ``bw(read=20M,write=10M)`` under 128K sequential QD16, measured
against the setting (target: within 5%).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iostack.block_bridge.frontends import NbdExport
from iostack.block_bridge.native_lib import ensure_built
from iostack.block_bridge.processes import Daemon, wait_for
from iostack.ports import free_port, port_open

KEY = bytes(range(64)).hex()
CONFIGS = {"nop": "nop", "xor>bitrev": "xor(key=0x5a)>bitrev",
           "aes_xts": f"aes_xts(key={KEY})"}
WORKLOADS = [(f"{name} qd{qd}", rw, bs, qd)
             for name, rw, bs in (("4K randread", "randread", "4k"),
                                  ("4K randwrite", "randwrite", "4k"),
                                  ("128K read", "read", "128k"),
                                  ("128K write", "write", "128k"))
             for qd in (1, 16)]
LIMITS = [("iops(read=500,write=200)", "randread", "4k", "iops", 500),
          ("iops(read=500,write=200)", "randwrite", "4k", "iops", 200),
          ("bw(read=20M,write=10M)", "read", "128k", "bw", 20 << 20),
          ("bw(read=20M,write=10M)", "write", "128k", "bw", 10 << 20)]


class RawExport:
    """nbdkit's file plugin: the baseline without IOStack."""

    def __init__(self, backing: Path, port: int, log: Path) -> None:
        self.uri = f"nbd://127.0.0.1:{port}"
        self.port = port
        self.daemon = Daemon(["nbdkit", "-f", "-i", "127.0.0.1", "-p", str(port), "file",
                              f"file={backing}"], log, "nbdkit file")

    def start(self) -> None:
        self.daemon.start()
        wait_for(lambda: port_open("127.0.0.1", self.port), 10, "nbdkit file",
                 self.daemon.alive)

    def stop(self) -> None:
        self.daemon.stop()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fio(uri: str, rw: str, bs: str, qd: int, size: str, runtime: float) -> dict:
    out = subprocess.run(
        ["fio", "--name=bench", "--ioengine=nbd", f"--uri={uri}", f"--rw={rw}", f"--bs={bs}",
         f"--iodepth={qd}", f"--size={size}", "--time_based", f"--runtime={runtime}",
         "--ramp_time=0.5", "--output-format=json"],
        capture_output=True, text=True, check=True, timeout=300).stdout
    job = json.loads(out[out.index("{"):])["jobs"][0]
    side = job["read"] if "read" in rw else job["write"]
    return {"iops": side["iops"], "bw": side["bw_bytes"],
            "bytes": side["io_bytes"]}


def measure(server, pid: int, *args) -> dict:
    before = cpu_seconds(pid)
    result = fio(server.uri, *args)
    result["cpu"] = cpu_seconds(pid) - before
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runtime", type=float, default=2.0, help="seconds per fio run")
    parser.add_argument("--size", default="256M", help="backing file size")
    args = parser.parse_args()
    ensure_built()

    work = Path(tempfile.mkdtemp(prefix="iostack-block-bench-"))
    size = args.size
    servers = {}
    try:
        for name in ["raw", *CONFIGS]:
            backing = work / f"{name.replace('>', '_')}.img"
            subprocess.run(["truncate", "-s", size, str(backing)], check=True)
            port = free_port()
            servers[name] = (RawExport(backing, port, work / f"{name}.log") if name == "raw"
                             else NbdExport(backing, CONFIGS[name], port, work / f"{port}.log"))
            servers[name].start()
            # Fill the volume so reads return written data.
            subprocess.run(["fio", "--name=fill", "--ioengine=nbd", f"--uri={servers[name].uri}",
                            "--rw=write", "--bs=1m", f"--size={size}", "--iodepth=4"],
                           check=True, capture_output=True, timeout=300)
        samples: dict = {}
        for _ in range(args.repeat):
            for label, rw, bs, qd in WORKLOADS:
                for name, server in servers.items():
                    result = measure(server, server.daemon.pid, rw, bs, qd, size, args.runtime)
                    samples.setdefault((label, name), []).append(result)
        report(samples, servers)
        limits(work, size, args)
    finally:
        for server in servers.values():
            server.stop()


def median(samples: list[dict], key: str) -> float:
    return statistics.median(s[key] for s in samples)


def report(samples: dict, servers: dict) -> None:
    names = list(servers)
    print(f"\n{'workload':<20}{'raw':>14}" + "".join(f"{n:>14}" for n in names[1:]))
    for label, _rw, bs, _qd in WORKLOADS:
        unit, key, scale = ("MB/s", "bw", 1e6) if bs == "128k" else ("IOPS", "iops", 1)
        raw = median(samples[(label, "raw")], key)
        row = f"{label:<20}{raw / scale:>9.0f} {unit:<4}"
        for name in names[1:]:
            row += f"{median(samples[(label, name)], key) / raw:>13.2f}x"
        print(row)
    print(f"\n{'server CPU s/GB':<20}" + "".join(f"{n:>14}" for n in names))
    for label, *_ in WORKLOADS:
        row = f"{label:<20}"
        for name in names:
            cpu = statistics.median(s["cpu"] / (s["bytes"] / 1e9) for s in samples[(label, name)])
            row += f"{cpu:>14.2f}"
        print(row)
    for label in ("128K read qd16", "128K write qd16"):
        ratio = median(samples[(label, "nop")], "bw") / median(samples[(label, "raw")], "bw")
        verdict = "meets" if ratio >= 0.9 else "misses"
        print(f"nop vs raw, {label}: {ratio:.2f} ({verdict} the >= 0.90 target)")


def limits(work: Path, size: str, args) -> None:
    print(f"\n{'limit':<28}{'workload':<16}{'setting':>12}{'measured':>12}{'error':>8}")
    for spec, rw, bs, key, setting in LIMITS:
        backing = work / "limit.img"
        subprocess.run(["truncate", "-s", size, str(backing)], check=True)
        server = NbdExport(backing, spec, free_port(), work / "limit.log")
        server.start()
        try:
            runs = [fio(server.uri, rw, bs, 16, size, max(args.runtime, 3.0))[key]
                    for _ in range(args.repeat)]
        finally:
            server.stop()
        measured = statistics.median(runs)
        unit = 1 if key == "iops" else 1 << 20
        error = (measured - setting) / setting
        print(f"{spec:<28}{rw + ' ' + bs:<16}{setting / unit:>12.0f}{measured / unit:>12.1f}"
              f"{error:>+8.1%}" + ("" if abs(error) <= 0.05 else "  (outside 5%)"))


if __name__ == "__main__":
    main()
