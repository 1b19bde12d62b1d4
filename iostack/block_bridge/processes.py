"""Child daemons of the block bridge (tgtd, FUSE frontends, nbdkit).

Each is started in its own session with its output in a log file, and
stopped by its pid only (never by name): SIGTERM, then SIGKILL if it does
not exit in time. A secret a daemon needs at start (a stack spec with an
aes_xts key) is its standard input, an anonymous memory file, never an
argument: any local user reads ``/proc/<pid>/cmdline``. ``wait_for`` (with
``iostack.ports``) helps tests and the service bring daemons up on private ports.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path


class DaemonError(RuntimeError):
    """A daemon failed to start or a control command failed."""


def wait_for(ready: Callable[[], bool], timeout: float, what: str,
             alive: Callable[[], bool] | None = None) -> None:
    """Poll ``ready`` until true; fail early if ``alive`` says the daemon died."""
    deadline = time.monotonic() + timeout
    while not ready():
        if alive is not None and not alive():
            raise DaemonError(f"{what}: process exited")
        if time.monotonic() > deadline:
            raise DaemonError(f"{what}: not ready after {timeout:.0f}s")
        time.sleep(0.05)


def _memory_file(text: str) -> int:
    """An anonymous file (no path, no size limit unlike a pipe) holding ``text``."""
    fd = os.memfd_create("iostack-secret", os.MFD_CLOEXEC)
    os.write(fd, text.encode())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


class Daemon:
    """One child process, started detached, stopped by pid."""

    def __init__(self, argv: Sequence[str], log_path: Path, name: str,
                 stdin: str | None = None) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.name = name
        self.stdin = stdin
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        stdin = subprocess.DEVNULL if self.stdin is None else _memory_file(self.stdin)
        try:
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(  # noqa: S603 - argv list, no shell
                    self.argv, stdin=stdin, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
        finally:
            if self.stdin is not None:
                os.close(stdin)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def fail(self, reason: str) -> DaemonError:
        return DaemonError(f"{self.name}: {reason}\n{self.log_tail()}")

    def stop(self, timeout: float = 5.0) -> None:
        if not self.proc:
            return
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None
