"""The Python storlet daemon with its next per-request process forked ahead of time.

Runs inside the sandbox in place of ``storlets.agent.daemon`` (the daemon
factory of ``daemon_factory`` starts it, with the same arguments)::

    python3 -m iostack.storlet_runtime.daemon STORLET SBUS_PATH LOG_LEVEL POOL_SIZE ID

Upstream's daemon (``StorletDaemon.execute``) forks one process per request
and answers the gateway's execute command only after the fork: copying the
page tables of a daemon that has the filter library loaded was most of a
warm request's added latency. ``PreforkDaemon`` keeps one process forked in
advance, the *spare*, waiting on a socket of its own. An execute command
hands the request's descriptors and its datagram to the spare over that
socket (``SCM_RIGHTS``), and the spare runs it exactly as upstream's forked
process does (one process per request, ended the same way). The next spare
is forked once the answer to the gateway is written, off the request's path.

A storlet whose module ends its requests with
``filter_runner.end_request_process`` (the packaged library filters'
generated storlets) has its process *kept*: once a request completed the
process says ``ready`` on its socket and the daemon hands it the next
request of this storlet, instead of forking one per request (the fork, the
copy-on-write faults and the teardown of the forked address space were
~10 ms of the sandbox's CPU per warm 1 KiB request). A daemon runs one
storlet in one scope's sandbox, so a kept process only ever sees requests
of the same tenant (scope) and the same code; it ends, and a fresh one is
forked, after ``REUSE_LIMIT`` requests, after any request that did not
complete (an error, a storlet's own exit), once it used half the sandbox's
CPU limit per process, when cancelled, and with the daemon. What a request
leaves in the process (module state, memory) is seen by that tenant's next
requests of that code, and by no one else's. Every other storlet (uploaded
filters, tenants' own Storlets) keeps one process per request.

The objects the daemon holds once the storlet is imported are frozen
(``gc.freeze``): a garbage collection in a request process skips them
rather than writing to every page they sit on (a full collection in a
forked copy of the daemon took 2000 copy-on-write faults and ~25 ms on a
loaded machine, 100 faults and < 1 ms frozen).

What stays as upstream has it:

- isolation between scopes and between storlets: a process is forked from
  its storlet's daemon in its scope's sandbox and serves only that daemon
  (and, for storlets that do not end through ``filter_runner``, one
  request);
- ``pool_size``: spares and kept processes count as the pool's processes,
  so there are never more than ``pool_size`` of them; with the pool full
  there is no spare and a request waits until one ended or is ready again;
- ``cancel``: the task id maps to the process that runs the request, killed
  with ``SIGKILL``; ``_force_terminate`` kills the process group, the spare
  with it;
- reaping: the daemon reaps its requests as upstream does; a spare that died
  is reaped when the next request finds it unreachable (that request forks
  instead); a spare whose daemon ended reads end-of-file and exits, and the
  sandbox's first process (``agent``, a subreaper) reaps it;
- limits: the spare inherits the daemon's rlimits and cgroup; a fork that
  fails (process limit reached, say after a fork bomb) leaves no spare and
  the next request forks as upstream, failing as upstream fails.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import math
import os
import resource
import select
import socket
import sys
import uuid
from collections.abc import Callable
from typing import Any, NoReturn

from storlets.agent.common.server import (
    EXIT_FAILURE,
    CommandResponse,
    CommandSuccess,
    command_handler,
)
from storlets.agent.common.utils import get_logger
from storlets.agent.daemon.server import StorletDaemon
from storlets.sbus import SBus
from storlets.sbus.datagram import build_datagram_from_raw_message

# An execute datagram is at most 4096 bytes on SBus (``sbus_limits``); its two JSON
# texts are re-serialised here, with room to spare.
MAX_HANDOVER = 64 * 1024
# Upstream passes 4 descriptors and one per extra input; SBus carries at most this many.
MAX_FDS = 64
NO_FD = -1
# What a kept request process says once its request completed (``filter_runner``).
READY = b"ready"
# Requests one process serves at most before it ends and a fresh one is forked.
REUSE_LIMIT = 100
# How often a daemon with its pool full looks for a process that ended (upstream blocks
# in waitpid; kept processes do not end, they say so on their socket).
POOL_POLL = 0.05
FILTER_RUNNER = "iostack.storlet_runtime.filter_runner"


class Spare:
    """A forked process waiting for a request, and the daemon's end of its socket."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock

    def hand_over(self, dtg: Any) -> bool:
        """Send the request to the process; False if it is gone (the caller forks instead).

        The answer's descriptor stays here: the gateway reads the answer until
        every copy of it is closed.
        """
        message = dtg.serialized_metadata.encode() + b"\0" + dtg.serialized_cmd_params.encode()
        try:
            socket.send_fds(self.sock, [message], dtg.invocation_fds)
            return True
        except OSError:
            self.discard()
            return False

    def poll(self) -> bytes | None:
        """What the process said since (``READY``; b"": it ended), None if it is still busy."""
        try:
            return self.sock.recv(len(READY), socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            return b""

    def discard(self) -> None:
        """Let the process go (it reads end-of-file and exits) and reap it if it has exited."""
        self.sock.close()
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, os.WNOHANG)


def receive_request(sock: socket.socket) -> Any | None:
    """In the spare: the datagram the daemon hands over, or None if the daemon ended.

    Its answer descriptor (the first) is ``NO_FD``: the daemon kept it.
    """
    message, fds, flags, _ = socket.recv_fds(sock, MAX_HANDOVER, MAX_FDS)
    if not message or flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
        for fd in fds:
            os.close(fd)
        return None
    metadata, _, params = message.decode().partition("\0")
    return build_datagram_from_raw_message([NO_FD, *fds], metadata, params)


def cpu_seconds_used() -> float:
    """CPU seconds this process has used (the sandbox's rlimit counts them per process)."""
    times = os.times()
    return times.user + times.system


def cpu_budget() -> float:
    """CPU seconds a kept process may have used and still take another request.

    Half the sandbox's CPU limit per process (``sandbox_cpu_seconds``): a
    request in a kept process still gets at least half of it, where one
    process per request gave it all.
    """
    soft, _ = resource.getrlimit(resource.RLIMIT_CPU)
    return math.inf if soft == resource.RLIM_INFINITY else soft / 2


def request_process_reuse(storlet_cls: type) -> Any | None:
    """``filter_runner.RequestProcess`` if the storlet ends its requests through it, else None.

    Such a storlet (the packaged library filters' generated storlets) says
    when a request completed: its process may then
    serve the next request of the same storlet. Others end every request
    process as upstream does.
    """
    runner = sys.modules.get(FILTER_RUNNER)
    module = sys.modules.get(storlet_cls.__module__)
    if runner is None or getattr(module, "end_request_process", None) is not \
            runner.end_request_process:
        return None
    return runner.RequestProcess


class PreforkDaemon(StorletDaemon):
    """Upstream's storlet daemon, with its per-request processes forked in advance."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Processes waiting for a request (a fresh spare, or one kept after a request), and
        # kept ones running a request, by pid (their tasks are in task_id_to_pid).
        self.idle: list[Spare] = []
        self.busy: dict[int, Spare] = {}
        self.reuse = request_process_reuse(self.storlet_cls)
        # The storlet and its libraries are imported: a request process's garbage
        # collections skip them, instead of copying every page they sit on.
        gc.freeze()

    @command_handler
    def execute(self, dtg: Any) -> CommandResponse:
        worker = self._next_process()
        if worker is None or not worker.hand_over(dtg):
            return super().execute(dtg)  # fork now, as upstream
        task_id = str(uuid.uuid4())[:8]
        self.task_id_to_pid[task_id] = worker.pid
        if self.reuse is not None:
            self.busy[worker.pid] = worker
        else:
            worker.sock.close()  # it serves this one request
        for fd in dtg.invocation_fds:  # the request process has its own copies now
            self._safe_close(fd)
        return CommandSuccess("OK", task_id=task_id)

    def _next_process(self) -> Spare | None:
        """A waiting process for the next request, or None once one may be forked.

        With ``pool_size`` processes running requests, waits (as upstream) until
        one ends or, if it is kept, says it is ready for another.
        """
        while True:
            self._collect()
            if self.idle:
                return self.idle.pop()  # the most recently used: its pages are warm
            if len(self.task_id_to_pid) < self.pool_size:
                return None
            select.select([worker.sock for worker in self.busy.values()], [], [], POOL_POLL)

    def _collect(self) -> None:
        """Kept processes that finished their request wait again; ended ones are let go."""
        for pid, worker in list(self.busy.items()):
            said = worker.poll()
            if said is None:
                continue
            del self.busy[pid]
            if said == READY:
                self._remove_pid(pid)
                self.idle.append(worker)
            else:  # it ended: reaped through task_id_to_pid, as upstream's processes are
                worker.sock.close()
        self._cleanup_pids()

    def dispatch_command(self, dtg: Any) -> bool:
        """Answer the command (upstream), then fork the next spare if there is room."""
        keep_running = super().dispatch_command(dtg)
        if keep_running:
            self.fork_spare()
        return keep_running

    def fork_spare(self) -> None:
        """Fork a spare unless one waits or it would exceed ``pool_size`` processes."""
        self._collect()  # first: a kept process that is ready again is the next spare
        if self.idle or len(self.task_id_to_pid) + 1 > self.pool_size:
            return
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            pid = os.fork()
        except OSError:  # e.g. the process limit: the next request forks (and fails) as upstream
            self.logger.warning("Could not fork a spare request process", exc_info=True)
            ours.close()
            theirs.close()
            return
        if pid == 0:
            ours.close()
            # Other processes must see end-of-file when the daemon lets them go.
            for worker in self.busy.values():
                worker.sock.close()
            self._run_spare(theirs)
        theirs.close()
        self.idle.append(Spare(pid, ours))

    def _run_spare(self, sock: socket.socket) -> NoReturn:
        """The spare's life: run requests as upstream's request process does, one or several.

        A storlet that ends its requests through ``filter_runner`` serves up
        to ``REUSE_LIMIT`` of them in this process, the next only after one
        completed (``RequestProcess.completed``) and while the process has
        used less than ``cpu_budget()``; any other ending ends it.
        """
        try:
            served = 0
            while True:
                dtg = receive_request(sock)
                if dtg is None:  # the daemon ended or let this process go
                    os._exit(0)
                served += 1
                kept = (self.reuse is not None and served < REUSE_LIMIT
                        and cpu_seconds_used() < cpu_budget())
                if self.reuse is not None:
                    self.reuse.kept, self.reuse.completed = kept, False
                else:
                    sock.close()
                self._execute(dtg)
                if not (kept and self.reuse.completed):
                    break
                try:
                    sock.send(READY)
                except OSError:  # the daemon ended
                    os._exit(0)
        except SystemExit:  # a storlet's own exit ends the process as upstream's
            raise
        except BaseException:  # noqa: BLE001 - whatever it was, never back into the daemon's loop
            os._exit(EXIT_FAILURE)
        sys.exit()  # as upstream's request process ends

    def _terminate(self) -> None:
        for worker in self.idle:
            worker.discard()
        for worker in self.busy.values():  # each ends after its request
            worker.sock.close()
        self.idle, self.busy = [], {}
        super()._terminate()


def serve(make_server: Callable[[Any], Any], name: str, log_level: str,
          container_id: str) -> NoReturn:
    """Run an SBus server as upstream's entry points do: its logger, SBus' logger, exit code.

    (Upstream's ``main`` functions build their own classes, named there.)
    """
    logger = get_logger(name, log_level, container_id)
    try:
        SBus.start_logger(log_level.upper(), container_id=container_id)
        sys.exit(make_server(logger).main_loop())
    except Exception:
        logger.exception("Unhandled exception")
        sys.exit(EXIT_FAILURE)


def main() -> None:
    parser = argparse.ArgumentParser(description="Storlet daemon forking its requests ahead")
    for arg in ("storlet_name", "sbus_path", "log_level"):
        parser.add_argument(arg)
    parser.add_argument("pool_size", type=int)
    parser.add_argument("container_id")
    opts = parser.parse_args()
    serve(lambda logger: PreforkDaemon(opts.storlet_name, opts.sbus_path, logger,
                                       opts.pool_size),
          "storlets-daemon", opts.log_level, opts.container_id)


if __name__ == "__main__":
    main()
