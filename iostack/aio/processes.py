"""Start, find and stop the all-in-one's processes by pid file.

Each process runs in a session of its own (so its workers form one process
group) with stdout and stderr appended to ``log/<name>.log`` (created 0600 in
a 0700 directory). Its pid file,
``run/<name>.pid``, holds the pid and the process start time read from
``/proc``: a stale pid file whose pid was reused by another program is never
mistaken for ours, and nothing is ever stopped by name.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from iostack.private_files import private_dir


def _stat_fields(pid: int | str) -> list[str] | None:
    """Fields of /proc/PID/stat after the command name, or None for no live process.

    A zombie has finished, so it counts as not running.
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
        return None
    # The command name (field 2) may contain spaces; the fields after it are fixed.
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else fields


def _start_time(pid: int) -> str | None:
    """The process start time (clock ticks since boot), or None if not running."""
    fields = _stat_fields(pid)
    return fields[19] if fields else None


def _groups_alive(pgids: set[int]) -> set[int]:
    """Which of the process groups ``pgids`` still have a live (non-zombie) process."""
    wanted = {str(pgid) for pgid in pgids}
    alive = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(entry.name)
            if fields and fields[2] in wanted:
                alive.add(int(fields[2]))
    return alive


@dataclass(frozen=True)
class ManagedProcess:
    name: str
    pid: int


class ProcessManager:
    """Processes of one state dir: ``run/`` holds pid files, ``log/`` their output."""

    def __init__(self, state_dir: Path) -> None:
        self.run_dir = state_dir / "run"
        self.log_dir = state_dir / "log"

    def pid_file(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def log_file(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> ManagedProcess:
        """Start ``argv`` in the background unless ``name`` is already running."""
        running = self.find(name)
        if running:
            return running
        private_dir(self.run_dir)
        private_dir(self.log_dir)
        # Logs may quote requests and credentials: owner-only from their creation.
        fd = os.open(self.log_file(name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if os.fstat(fd).st_mode & 0o077:  # written by an earlier version
            os.fchmod(fd, 0o600)
        with open(fd, "ab") as log:
            log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {name}\n".encode())
            log.flush()
            proc = subprocess.Popen(  # noqa: S603 - argv is built by the project, not from input
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        started = _start_time(proc.pid)
        self.pid_file(name).write_text(f"{proc.pid} {started}\n", encoding="ascii")
        return ManagedProcess(name, proc.pid)

    def find(self, name: str) -> ManagedProcess | None:
        """The running process recorded under ``name``; a stale pid file is removed."""
        path = self.pid_file(name)
        try:
            pid_text, started = path.read_text(encoding="ascii").split()
        except (FileNotFoundError, ValueError):
            return None
        pid = int(pid_text)
        if _start_time(pid) != started:
            path.unlink(missing_ok=True)
            return None
        return ManagedProcess(name, pid)

    def names(self) -> list[str]:
        if not self.run_dir.is_dir():
            return []
        return sorted(p.stem for p in self.run_dir.glob("*.pid"))

    def stop(self, name: str, timeout: float = 10.0) -> bool:
        """Stop ``name`` and its process group: SIGTERM, then SIGKILL after ``timeout``.

        Returns True if a running process was stopped.
        """
        return bool(self.stop_all([name], timeout))

    def stop_all(self, names: list[str], timeout: float = 10.0) -> list[str]:
        """Stop several at once (SIGTERM to all, SIGKILL to what is left after ``timeout``);
        return the names of those that were running."""
        running = [proc for name in names if (proc := self.find(name))]
        for proc in running:
            self._signal(proc.pid, signal.SIGTERM)
        pgids = {proc.pid for proc in running}
        deadline = time.monotonic() + timeout
        while pgids and time.monotonic() < deadline:
            pgids = _groups_alive(pgids)
            if pgids:
                time.sleep(0.1)
        for pgid in pgids:
            self._signal(pgid, signal.SIGKILL)
        for proc in running:
            self.pid_file(proc.name).unlink(missing_ok=True)
        return [proc.name for proc in running]

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        # Our processes lead their own session, so the group id is the pid:
        # signalling the group also reaches forked workers.
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
