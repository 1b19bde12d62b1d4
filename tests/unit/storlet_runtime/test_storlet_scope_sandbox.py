"""Pid records and locks of per-scope sandboxes (no bubblewrap needed here)."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from iostack.storlet_runtime.host.cgroups import ScopeCgroup
from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.host.sandbox import (
    SandboxStartError,
    ScopeSandbox,
    process_start_time,
)


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])  # fixed argv
    yield proc
    proc.kill()
    proc.wait()


def record(sandbox: ScopeSandbox, pid: int, start_time: int | None) -> None:
    sandbox.run_dir.mkdir(parents=True, exist_ok=True)
    sandbox.record_path.write_text(json.dumps({"pid": pid, "start_time": start_time}))


def test_running_pid_matches_the_recorded_process(tmp_path, sleeper):
    sandbox = ScopeSandbox(tmp_path, "t1")
    assert sandbox.running_pid() is None
    record(sandbox, sleeper.pid, process_start_time(sleeper.pid))
    assert sandbox.running_pid() == sleeper.pid


def test_a_recycled_pid_is_never_signalled(tmp_path, sleeper):
    sandbox = ScopeSandbox(tmp_path, "t1")
    record(sandbox, sleeper.pid, process_start_time(sleeper.pid) - 1)  # same pid, other process
    assert sandbox.running_pid() is None
    assert sandbox.stop() is False
    assert sleeper.poll() is None  # still alive
    assert not sandbox.record_path.exists()


def test_stop_kills_by_pid(tmp_path, sleeper):
    sandbox = ScopeSandbox(tmp_path, "t1")
    record(sandbox, sleeper.pid, process_start_time(sleeper.pid))
    threading.Thread(target=sleeper.wait, daemon=True).start()  # the test's own child: reap it
    assert sandbox.stop() is True
    assert sleeper.wait(5) == -9
    assert sandbox.running_pid() is None


def test_corrupt_record_counts_as_not_running(tmp_path):
    sandbox = ScopeSandbox(tmp_path, "t1")
    sandbox.run_dir.mkdir(parents=True, exist_ok=True)
    sandbox.record_path.write_text("{not json")
    assert sandbox.running_pid() is None


def test_lock_is_exclusive_and_times_out(tmp_path):
    first, second = ScopeSandbox(tmp_path, "t1"), ScopeSandbox(tmp_path, "t1")
    other_scope = ScopeSandbox(tmp_path, "t2")
    with first.lock(1):
        start = time.monotonic()
        with pytest.raises(SandboxStartError, match="lock held"):
            with second.lock(0.2):
                pass
        assert time.monotonic() - start >= 0.2
        with other_scope.lock(0.2):  # scopes do not wait for each other
            pass
    with second.lock(0.2):  # released on exit
        pass


def fake_cfg(tmp_path: Path, seconds: float) -> SandboxConfig:
    """A config whose 'prlimit' is a script sleeping ``seconds``, whatever the argv it gets."""
    script = tmp_path / "fake-prlimit"
    script.write_text(f"#!/bin/sh\nexec {shutil.which('sleep')} {seconds}\n")
    script.chmod(0o755)
    return dataclasses.replace(SandboxConfig.from_gateway_conf({}), prlimit_path=str(script),
                               bwrap_path=str(script), libsbus_path=str(script),
                               seccomp_path=str(script))


def start(sandbox: ScopeSandbox, cfg: SandboxConfig, tmp_path: Path) -> int:
    return sandbox.start(cfg, None, ScopeCgroup(None), tmp_path / "err.log", str(tmp_path),
                         "t1", "ERROR")


def is_zombie(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _runs_sandbox_code(thread: threading.Thread) -> bool:
    target = getattr(thread, "_target", None) or type(thread).run
    return getattr(target, "__module__", "").startswith("iostack.storlet_runtime")


def test_a_sandbox_that_exits_is_reaped_by_the_next_check_not_by_a_thread(tmp_path):
    sandbox = ScopeSandbox(tmp_path, "t1")
    before = set(threading.enumerate())
    pid = start(sandbox, fake_cfg(tmp_path, 0.1), tmp_path)
    # Nothing polls for it meanwhile. Threads other tests left behind may start
    # now, so only threads running the sandbox's code count.
    assert not [t for t in set(threading.enumerate()) - before if _runs_sandbox_code(t)]
    deadline = time.monotonic() + 5
    while not is_zombie(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert is_zombie(pid)  # exited, and nobody waited for it yet
    assert sandbox.running_pid() is None
    assert not Path(f"/proc/{pid}").exists()  # reaped by that check


def test_stop_reaps_the_sandbox_it_kills(tmp_path):
    sandbox = ScopeSandbox(tmp_path, "t1")
    pid = start(sandbox, fake_cfg(tmp_path, 60), tmp_path)
    assert sandbox.running_pid() == pid
    assert sandbox.stop() is True
    assert not Path(f"/proc/{pid}").exists()
