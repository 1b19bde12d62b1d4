"""Userspace frontends over libiostack, as managed child processes.

- ``FuseVolume``: ``iostack-fuse`` exposes ``<mountpoint>/<name>``, a file
  whose I/O runs through the stack; tgt exports it as a LUN.
- ``NbdExport``: ``nbdkit`` with the iostack plugin on a loopback TCP port,
  for fio's ``nbd`` engine and libnbd clients.
Both take the stack spec and the filter directory; the spec has been
validated by the caller or is rejected by the frontend at start. The spec
reaches the daemon on its standard input, never in its argv (it may hold an
aes_xts key, and ``/proc/<pid>/cmdline`` is world-readable).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from iostack.ports import port_open

from .native_lib import BUILD_DIR, default_filter_dir
from .processes import Daemon, wait_for


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


class FuseVolume:
    def __init__(self, mountpoint: Path, backing: Path, spec: str, log_path: Path,
                 name: str = "lun0", filter_dir: Path | None = None) -> None:
        self.mountpoint = mountpoint
        self.path = mountpoint / name
        self.daemon = Daemon(
            [str(BUILD_DIR / "iostack-fuse"), str(mountpoint), "-f",
             f"--backing={backing}", f"--filter-dir={filter_dir or default_filter_dir()}",
             "--spec-file=/dev/stdin", f"--name={name}"],
            log_path, f"iostack-fuse {mountpoint}", stdin=spec)

    def start(self, timeout: float = 10.0) -> None:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        self.daemon.start()
        try:
            wait_for(lambda: _mounted(self.mountpoint) and self.path.exists(), timeout,
                     self.daemon.name, self.daemon.alive)
        except Exception as exc:  # noqa: BLE001 - stop it whatever failed; re-raised
            self.stop()
            raise self.daemon.fail(str(exc)) from None

    def stop(self) -> None:
        # SIGTERM makes libfuse unmount; a lazy unmount covers a killed daemon.
        self.daemon.stop()
        if _mounted(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)],  # noqa: S603, S607 - fixed argv, no shell
                           capture_output=True, timeout=10)


class NbdExport:
    def __init__(self, backing: Path, spec: str, port: int, log_path: Path,
                 filter_dir: Path | None = None, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port
        self.uri = f"nbd://{host}:{port}"
        self.daemon = Daemon(
            ["nbdkit", "-f", "-i", host, "-p", str(port),
             str(BUILD_DIR / "nbdkit-iostack-plugin.so"), f"file={backing}",
             "spec=+/dev/stdin", f"filter-dir={filter_dir or default_filter_dir()}"],
            log_path, f"nbdkit on {host}:{port}", stdin=spec)

    def start(self, timeout: float = 10.0) -> None:
        self.daemon.start()
        try:
            wait_for(lambda: port_open(self.host, self.port), timeout, self.daemon.name,
                     self.daemon.alive)
        except Exception as exc:  # noqa: BLE001 - stop it whatever failed; re-raised
            self.daemon.stop()
            raise self.daemon.fail(str(exc)) from None

    def stop(self) -> None:
        self.daemon.stop()
