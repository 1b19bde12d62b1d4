"""The storlet daemon that forks its next request process ahead (``daemon.PreforkDaemon``).

Real forks, real pipes, the daemon's SBus command handlers called directly
(no SBus socket): one process per request, answered before any fork, the
pool bound, cancel, a dead spare, a failed fork, and the spare's end; and a
storlet that ends its requests through ``filter_runner``: its process kept
for the next requests, up to ``REUSE_LIMIT``, never after an error.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import json
import logging
import os
import select
import signal
import time
from pathlib import Path

import pytest
from storlets.sbus import command as sbus_cmd
from storlets.sbus import file_description as sbus_fd
from storlets.sbus.datagram import SBusFileDescriptor, build_datagram

from iostack.storlet_runtime.daemon import PreforkDaemon
from iostack.storlet_runtime.daemon_factory import IOStackDaemonFactory

# Another test module may have imported eventlet, which warns about any fork.
pytestmark = pytest.mark.filterwarnings("ignore:Using fork")

# Answers with its pid as metadata and its input as output, or hangs; always ends its
# process with os._exit (as filter_runner does), never returning into the test's stack.
STORLET = '''
import os, time

class Echo:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        try:
            if (params or {}).get("hang"):
                time.sleep(600)
            out_files[0].set_metadata({"pid": str(os.getpid())})
            out_files[0].write(in_files[0].read())
            out_files[0].close()
        finally:
            os._exit(0)
'''


class Request:
    """The gateway's side of one execute command: pipes, the answer, the output.

    The input is written whole before the command, and each request is made
    just before it is sent: a spare forked from this process must not hold
    the gateway's ends of the pipes (the gateway is another process).
    """

    def __init__(self, body: bytes = b"", **params: str) -> None:
        self.answer_r, answer_w = os.pipe()
        in_r, in_w = os.pipe()
        os.write(in_w, body)
        os.close(in_w)
        self.out_r, out_w = os.pipe()
        self.md_r, md_w = os.pipe()
        self.log_r, log_w = os.pipe()
        self.datagram = build_datagram(sbus_cmd.SBUS_CMD_EXECUTE, [
            SBusFileDescriptor(sbus_fd.SBUS_FD_SERVICE_OUT, answer_w),
            SBusFileDescriptor(sbus_fd.SBUS_FD_INPUT_OBJECT, in_r, storage_metadata={}),
            SBusFileDescriptor(sbus_fd.SBUS_FD_OUTPUT_OBJECT, out_w),
            SBusFileDescriptor(sbus_fd.SBUS_FD_OUTPUT_OBJECT_METADATA, md_w),
            SBusFileDescriptor(sbus_fd.SBUS_FD_LOGGER, log_w),
        ], params, None)

    def answer(self) -> dict:
        with os.fdopen(self.answer_r, "rb") as f:
            return json.loads(f.read())

    def result(self) -> tuple[dict, bytes]:
        """The metadata and output the storlet wrote."""
        with os.fdopen(self.md_r, "rb") as md, os.fdopen(self.out_r, "rb") as out:
            return json.loads(md.read()), out.read()

    def close(self) -> None:
        for fd in (self.answer_r, self.out_r, self.md_r, self.log_r):
            with contextlib.suppress(OSError):
                os.close(fd)


def command(daemon: PreforkDaemon, name: str, task_id: str | None = None) -> tuple[bool, dict]:
    """Dispatch a service command (ping, cancel) as the SBus loop does: whether the
    loop goes on, and the answer."""
    answer_r, answer_w = os.pipe()
    keep_running = daemon.dispatch_command(build_datagram(
        name, [SBusFileDescriptor(sbus_fd.SBUS_FD_SERVICE_OUT, answer_w)], None, task_id))
    with os.fdopen(answer_r, "rb") as f:
        return keep_running, json.loads(f.read())


def execute(daemon: PreforkDaemon, request: Request) -> str:
    assert daemon.dispatch_command(request.datagram) is True
    answer = request.answer()
    assert answer["status"] is True, answer
    return answer["task_id"]


def spare_pid(daemon: PreforkDaemon) -> int:
    """The process the next request goes to."""
    return daemon.idle[-1].pid


def wait_exit(pid: int) -> int | None:
    """The exit status of our child ``pid`` once it ended (None: reaped elsewhere)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not end")


# The same, ending its requests as IOStack's packaged filters do; fails when asked to.
KEPT_STORLET = '''
import os
from iostack.storlet_runtime.filter_runner import end_request_process

class Echo:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        if (params or {}).get("fail"):
            raise ValueError("asked to fail")
        out_files[0].set_metadata({"pid": str(os.getpid())})
        out_files[0].write(in_files[0].read())
        in_files[0].close()
        out_files[0].close()
        end_request_process(self.logger)
'''


@pytest.fixture
def make_daemon(tmp_path: Path, monkeypatch):
    (tmp_path / "echo_storlet.py").write_text(STORLET)
    (tmp_path / "kept_storlet.py").write_text(KEPT_STORLET)
    monkeypatch.syspath_prepend(str(tmp_path))
    daemons: list[PreforkDaemon] = []

    def make(pool_size: int = 5, storlet: str = "echo_storlet.Echo") -> PreforkDaemon:
        daemon = PreforkDaemon(storlet, str(tmp_path / "sbus"),
                               logging.getLogger("test-daemon"), pool_size)
        daemons.append(daemon)
        return daemon

    yield make
    for daemon in daemons:
        pids = list(daemon.task_id_to_pid.values())
        pids += [worker.pid for worker in daemon.idle] + list(daemon.busy)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    gc.unfreeze()


def test_each_request_runs_in_its_own_process_forked_before_the_request(make_daemon):
    daemon = make_daemon()
    command(daemon, sbus_cmd.SBUS_CMD_PING)  # the factory's ping at start-up
    seen = set()
    for body in (b"first", b"second", b"third"):
        spare = spare_pid(daemon)
        request = Request(body)
        try:
            task_id = execute(daemon, request)
            metadata, output = request.result()
        finally:
            request.close()
        assert output == body
        # (The daemon may have reaped it already, as it looked for room for the next spare.)
        assert int(metadata["pid"]) == spare == daemon.task_id_to_pid.get(task_id, spare)
        assert wait_exit(spare) in (None, 0)
        seen.add(spare)
        assert spare_pid(daemon) not in seen  # the next one is a fresh process
    assert len(seen) == 3


def test_the_answer_is_written_before_any_fork(make_daemon, monkeypatch):
    daemon = make_daemon()
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    request = Request(b"body")
    answered_at_fork = []
    real_fork = os.fork

    def fork() -> int:
        answered_at_fork.append(bool(select.select([request.answer_r], [], [], 0)[0]))
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    try:
        execute(daemon, request)
        assert request.result()[1] == b"body"
    finally:
        request.close()
    # Upstream forks inside the execute command, before it answers.
    assert answered_at_fork == [True]


def test_the_spare_counts_in_the_pool_and_cancel_kills_the_request_process(make_daemon):
    daemon = make_daemon(pool_size=2)
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    requests, tasks = [], []
    try:
        for _ in range(2):  # each made just before it is sent, as SBus delivers it
            requests.append(Request(hang="1"))
            tasks.append(execute(daemon, requests[-1]))
        # Two hung requests fill the pool of 2: no third process waits as a spare.
        assert not daemon.idle
        pids = [daemon.task_id_to_pid[task] for task in tasks]
        assert len(set(pids)) == 2
        keep_running, answer = command(daemon, sbus_cmd.SBUS_CMD_CANCEL, tasks[0])
        assert answer["status"] is True
        assert os.WTERMSIG(wait_exit(pids[0])) == signal.SIGKILL
        assert daemon.task_id_to_pid == {tasks[1]: pids[1]}
        # Upstream's cancel also ends the daemon's loop; no spare is forked then.
        assert keep_running is False and not daemon.idle
    finally:
        for request in requests:
            request.close()


def test_a_dead_spare_is_replaced_by_a_fork_for_that_request(make_daemon):
    daemon = make_daemon()
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    dead = spare_pid(daemon)
    os.kill(dead, signal.SIGKILL)
    wait_exit(dead)
    request = Request(b"body")
    try:
        task_id = execute(daemon, request)
        metadata, output = request.result()
    finally:
        request.close()
    assert output == b"body"
    assert int(metadata["pid"]) == daemon.task_id_to_pid[task_id] != dead


def test_without_a_fork_there_is_no_spare_and_requests_fork_as_upstream(make_daemon,
                                                                          monkeypatch):
    daemon = make_daemon()
    real_fork = os.fork

    def refused() -> int:
        raise OSError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", refused)
    command(daemon, sbus_cmd.SBUS_CMD_PING)  # the process limit is reached, say
    assert not daemon.idle
    monkeypatch.setattr(os, "fork", real_fork)
    request = Request(b"body")
    try:
        execute(daemon, request)
        assert request.result()[1] == b"body"
    finally:
        request.close()


def test_the_spare_ends_with_the_daemon(make_daemon):
    daemon = make_daemon()
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    spare = spare_pid(daemon)
    daemon._terminate()  # what the SBus loop runs as it ends (halt, idle timeout)
    assert not daemon.idle
    status = wait_exit(spare)
    assert status is None or os.waitstatus_to_exitcode(status) == 0


def test_the_factory_starts_python_storlets_with_this_daemon():
    factory = IOStackDaemonFactory("/unused/sbus", logging.getLogger("test-factory"), "cid")
    pargs, env = factory.get_python_args("python", "/path", "echo_storlet.Echo", 5,
                                         "/mnt/channels/echo", "WARNING", "3")
    assert pargs == ["/usr/bin/python3", "-m", "iostack.storlet_runtime.daemon",
                     "echo_storlet.Echo", "/mnt/channels/echo", "WARNING", "5", "cid"]
    assert env["PYTHONPATH"].endswith("/var/lib/storlets/echo_storlet.Echo")


def run(daemon: PreforkDaemon, body: bytes, **params: str) -> tuple[str, dict, bytes]:
    request = Request(body, **params)
    try:
        task_id = execute(daemon, request)
        return (task_id, *request.result())
    finally:
        request.close()


def wait_idle(daemon: PreforkDaemon, pid: int) -> None:
    """Until kept process ``pid`` said it is ready for another request (a request sent
    before that goes to another process)."""
    deadline = time.monotonic() + 30
    while pid not in [worker.pid for worker in daemon.idle]:
        assert time.monotonic() < deadline, f"process {pid} did not get ready"
        time.sleep(0.01)
        daemon._collect()


def test_a_filter_runner_storlet_keeps_its_process_for_the_next_requests(make_daemon):
    daemon = make_daemon(storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    pids = set()
    for body in (b"first", b"second", b"third"):
        _task, metadata, output = run(daemon, body)
        assert output == body
        pids.add(int(metadata["pid"]))
        wait_idle(daemon, int(metadata["pid"]))
    assert len(pids) == 1
    # Done with its requests: waiting again, no task of it left to cancel.
    assert pids.pop() not in daemon.task_id_to_pid.values()


def test_a_kept_process_ends_after_reuse_limit_requests(make_daemon, monkeypatch):
    monkeypatch.setattr("iostack.storlet_runtime.daemon.REUSE_LIMIT", 2)
    daemon = make_daemon(storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    first = int(run(daemon, b"1")[1]["pid"])
    wait_idle(daemon, first)
    assert int(run(daemon, b"2")[1]["pid"]) == first
    assert wait_exit(first) in (None, 0)  # None: the daemon reaped it
    assert int(run(daemon, b"3")[1]["pid"]) != first


def test_a_kept_process_ends_once_it_used_its_cpu_budget(make_daemon, monkeypatch):
    monkeypatch.setattr("iostack.storlet_runtime.daemon.cpu_budget", lambda: 0.0)
    daemon = make_daemon(storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    pids = [int(run(daemon, body)[1]["pid"]) for body in (b"1", b"2")]
    assert pids[0] != pids[1]
    assert wait_exit(pids[0]) in (None, 0)  # None: the daemon reaped it


def test_a_failed_request_ends_its_process(make_daemon, monkeypatch):
    # Upstream's request process ends with sys.exit(); here that must not unwind into pytest.
    monkeypatch.setattr("sys.exit", lambda *_: os._exit(9))
    daemon = make_daemon(storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    run(daemon, b"ok")
    failed = Request(b"x", fail="1")
    try:
        failed_pid = daemon.task_id_to_pid[execute(daemon, failed)]
    finally:
        failed.close()
    status = wait_exit(failed_pid)  # None: the daemon reaped it
    assert status is None or os.waitstatus_to_exitcode(status) == 9
    daemon._collect()
    assert failed_pid not in [worker.pid for worker in daemon.idle]
    assert int(run(daemon, b"again")[1]["pid"]) != failed_pid


def test_a_kept_process_ends_with_the_daemon(make_daemon):
    daemon = make_daemon(storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    kept = int(run(daemon, b"body")[1]["pid"])
    daemon._terminate()
    status = wait_exit(kept)
    assert status is None or os.waitstatus_to_exitcode(status) == 0


def test_kept_processes_count_in_the_pool(make_daemon):
    daemon = make_daemon(pool_size=1, storlet="kept_storlet.Echo")
    command(daemon, sbus_cmd.SBUS_CMD_PING)
    for body in (b"1", b"2", b"3"):
        kept = int(run(daemon, body)[1]["pid"])
        wait_idle(daemon, kept)
        daemon.fork_spare()  # what the daemon does after each command
        assert [worker.pid for worker in daemon.idle] == [kept]
        assert not daemon.task_id_to_pid
