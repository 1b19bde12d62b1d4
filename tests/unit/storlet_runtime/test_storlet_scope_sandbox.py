"""Pid records and locks of per-scope sandboxes (no bubblewrap needed here)."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest

from iostack.storlet_runtime.sandbox import (
    SandboxStartError,
    ScopeSandbox,
    process_start_time,
)


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])  # noqa: S603,S607 - fixed argv
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
    threading.Thread(target=sleeper.wait, daemon=True).start()  # reap, as the gateway does
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
