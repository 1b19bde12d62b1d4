"""Real bubblewrap sandboxes without Swift: concurrent cold starts and tear-down by pid.

Each driver is a separate process, like Swift's proxy and object workers,
each cold-starting the same scope from several greenthreads at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from iostack.storlet_runtime.host.sandbox import (
    DAEMON_MODULE,
    SandboxStartError,
    ScopeSandbox,
    check_reachable,
    process_start_time,
)

pytestmark = pytest.mark.integration

DRIVER = Path(__file__).with_name("sandbox_driver.py")


def scope_processes(marker: str) -> list[int]:
    """Pids whose command line mentions ``marker`` (our unique scope name)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                pids.append(int(entry))
    return pids


@pytest.fixture
def host_root():
    """A storlets root the unprivileged sandbox user can reach (pytest's tmp dirs are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="iostack-sandbox-test-"))
    base.chmod(0o755)
    yield base / "storlets"
    shutil.rmtree(base, ignore_errors=True)


def start_drivers(host_root: Path, scope: str, processes: int, threads: int, hold: float):
    start_at = time.time() + 1.5  # all interpreters are up by then
    return [subprocess.Popen(  # fixed argv
        [sys.executable, str(DRIVER), str(host_root), scope, str(threads), str(start_at),
         str(hold)], stdout=subprocess.PIPE, text=True) for _ in range(processes)]


def test_concurrent_cold_starts_make_one_sandbox_and_stop_kills_it_all(host_root):
    scope = "c" + uuid.uuid4().hex[:8]
    drivers = start_drivers(host_root, scope, processes=3, threads=4, hold=30)
    try:
        reports = [json.loads(d.stdout.readline()) for d in drivers]
        assert sum(r["starts"] for r in reports) == 1, reports
        assert len({r["pid"] for r in reports}) == 1 and reports[0]["pid"] is not None
        assert all(r["ping"] for r in reports)
        inside = scope_processes(f"{scope}_{scope}")  # bwrap x2 and the daemon factory
        assert len(inside) >= 2

        sandbox = ScopeSandbox(host_root / "sandboxes", scope)
        assert sandbox.stop() is True
        deadline = time.monotonic() + 5
        while scope_processes(f"{scope}_{scope}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert scope_processes(f"{scope}_{scope}") == []
        assert all(d.poll() is None for d in drivers)  # only the sandbox died
    finally:
        for d in drivers:
            d.kill()
            d.wait()


def test_sandbox_dies_with_the_server_that_started_it(host_root):
    scope = "d" + uuid.uuid4().hex[:8]
    (driver,) = start_drivers(host_root, scope, processes=1, threads=1, hold=30)
    report = json.loads(driver.stdout.readline())
    assert report["starts"] == 1 and report["ping"]
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 5
    while scope_processes(f"{scope}_{scope}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert scope_processes(f"{scope}_{scope}") == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox switches users only when run as root")
def test_unreachable_directory_is_named(tmp_path):
    private = tmp_path / "private"
    (private / "pipes").mkdir(parents=True)
    private.chmod(0o700)
    with pytest.raises(SandboxStartError, match=f"cannot enter {private}"):
        check_reachable(str(private / "pipes"), 65534)


SPIN = b"""class Spin:
    def __init__(self, logger):
        pass

    def __call__(self, in_files, out_files, params):
        while True:
            pass
"""


def invoke(host_root: Path, scope: str, storlet: Path, conf: dict) -> dict:
    done = subprocess.run(  # fixed argv
        [sys.executable, str(DRIVER), "invoke", str(host_root), scope, str(storlet),
         json.dumps(conf)], capture_output=True, text=True, timeout=120, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_cpu_time_limit_kills_a_spinning_storlet_before_the_timeout(host_root, tmp_path):
    storlet = tmp_path / "spin.py"
    storlet.write_bytes(SPIN)
    result = invoke(host_root, "cpu" + uuid.uuid4().hex[:8], storlet,
                    {"sandbox_cpu_seconds": "2", "storlet_timeout": "60"})
    assert result["status"] == "error"
    assert "did not answer" not in result["error"]  # the storlet died; no timeout fired
    # Killed by RLIMIT_CPU after 2 s of CPU (plus the 1 s daemon start), not by the 60 s timeout.
    assert result["seconds"] < 30, result


def test_request_timeout_tears_the_sandbox_down(host_root, tmp_path):
    storlet = tmp_path / "spin.py"
    storlet.write_bytes(SPIN)
    scope = "tmo" + uuid.uuid4().hex[:8]
    result = invoke(host_root, scope, storlet, {"storlet_timeout": "3"})
    assert result["status"] == "error" and "did not answer within 3 s" in result["error"]
    assert 3 <= result["seconds"] < 20
    assert ScopeSandbox(host_root / "sandboxes", scope).running_pid() is None
    assert scope_processes(f"{scope}_{scope}") == []


WIDE = b"""import fcntl


class Wide:
    def __init__(self, logger):
        pass

    def __call__(self, in_files, out_files, params):
        out_files[0].set_metadata({})
        fcntl.fcntl(out_files[0].fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        for _ in range(4):
            out_files[0].write(b"x" * (1 << 20))
        out_files[0].close()
"""


def test_the_server_reads_the_output_in_pieces_wider_than_64k(host_root, tmp_path):
    storlet = tmp_path / "wide.py"
    storlet.write_bytes(WIDE)
    scope = "wid" + uuid.uuid4().hex[:8]
    try:
        result = invoke(host_root, scope, storlet, {})
    finally:
        ScopeSandbox(host_root / "sandboxes", scope).stop()
    assert result["status"] == "ok" and result["body"] == "x" * (4 << 20)
    assert 64 << 10 < result["largest_piece"] <= 1 << 20


ECHO = b"""VERSION = b"%s"


class Echo:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        out_files[0].set_metadata({})
        out_files[0].write(VERSION + b":" + in_files[0].read())
        out_files[0].close()
        in_files[0].close()
"""


def storlet_daemons(scope: str) -> list[int]:
    """Pids of the scope's storlet daemons (and their per-request processes, the spare
    among them), not the factory."""
    return [pid for pid in scope_processes(f"{scope}_{scope}")
            if DAEMON_MODULE.encode() + b"\0" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def test_warm_requests_skip_the_factory_until_the_daemon_dies_or_changes(host_root, tmp_path):
    """One server process: the status round trip happens on the first request, after the
    daemon died, after a re-upload and every DAEMON_RECHECK (2 s here), not otherwise."""
    storlet = tmp_path / "echo.py"
    storlet.write_bytes(ECHO % b"v1")
    scope = "w" + uuid.uuid4().hex[:8]
    server = subprocess.Popen(  # fixed argv
        [sys.executable, str(DRIVER), "serve", str(host_root), scope, str(storlet)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def request(timestamp: str = "1") -> dict:
        server.stdin.write(timestamp + "\n")
        server.stdin.flush()
        result = json.loads(server.stdout.readline())
        assert result["status"] == "ok", result
        return result

    try:
        assert request()["status_checks"] == 1  # cold: sandbox and daemon start
        warm = request()
        assert warm["body"] == "v1:input" and warm["status_checks"] == 0

        daemons = storlet_daemons(scope)
        for pid in daemons:
            with contextlib.suppress(ProcessLookupError):  # a per-request child that finished
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5  # dead (a zombie until the factory reaps it)
        while any(process_start_time(pid) for pid in daemons) and time.monotonic() < deadline:
            time.sleep(0.02)
        revived = request()  # the dead daemon is noticed, the factory asked, a new one started
        assert revived["body"] == "v1:input" and revived["status_checks"] == 1
        assert request()["status_checks"] == 0

        storlet.write_bytes(ECHO % b"v2")  # same size, newer upload
        reuploaded = request(str(time.time() + 1))
        assert reuploaded["body"] == "v2:input" and reuploaded["status_checks"] == 1

        time.sleep(2.1)
        assert request()["status_checks"] == 1  # the factory is asked again now and then
    finally:
        server.kill()
        server.wait()
        ScopeSandbox(host_root / "sandboxes", scope).stop()
