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

The objects the daemon holds once the storlet is imported are frozen
(``gc.freeze``): a garbage collection in a request process skips them
rather than writing to every page they sit on (a full collection in a
forked copy of the daemon took 2000 copy-on-write faults and ~25 ms on a
loaded machine, 100 faults and < 1 ms frozen).

What stays as upstream has it:

- isolation: every request runs in its own process, forked from the daemon
  before any request touched it, never reused;
- ``pool_size``: the spare counts as one of the pool's processes, so there
  are never more than ``pool_size`` of them; with the pool full there is no
  spare and a request forks as upstream does, once one has ended;
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
import os
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


class Spare:
    """A forked process waiting for one request, and the daemon's end of its socket."""

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock

    def hand_over(self, dtg: Any) -> bool:
        """Send the request to the spare; False if it is gone (the caller forks instead).

        The daemon's end is closed either way: a spare serves one request. The
        answer's descriptor stays here: the gateway reads the answer until every
        copy of it is closed.
        """
        message = dtg.serialized_metadata.encode() + b"\0" + dtg.serialized_cmd_params.encode()
        try:
            socket.send_fds(self.sock, [message], dtg.invocation_fds)
            return True
        except OSError:
            self.discard()
            return False
        finally:
            self.sock.close()

    def discard(self) -> None:
        """End the spare (never handed a request) and reap it if it has exited."""
        self.sock.close()  # it reads end-of-file and exits
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


class PreforkDaemon(StorletDaemon):
    """Upstream's storlet daemon, with one per-request process forked in advance."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spare: Spare | None = None
        # The storlet and its libraries are imported: a request process's garbage
        # collections skip them, instead of copying every page they sit on.
        gc.freeze()

    @command_handler
    def execute(self, dtg: Any) -> CommandResponse:
        spare, self.spare = self.spare, None
        while len(self.task_id_to_pid) >= self.pool_size:  # upstream's bound (no spare now)
            self._wait_child_process()
        if spare is None or not spare.hand_over(dtg):
            return super().execute(dtg)  # fork now, as upstream
        task_id = str(uuid.uuid4())[:8]
        self.task_id_to_pid[task_id] = spare.pid
        for fd in dtg.invocation_fds:  # the request process has its own copies now
            self._safe_close(fd)
        return CommandSuccess("OK", task_id=task_id)

    def dispatch_command(self, dtg: Any) -> bool:
        """Answer the command (upstream), then fork the next spare if there is room."""
        keep_running = super().dispatch_command(dtg)
        if keep_running:
            self.fork_spare()
        return keep_running

    def fork_spare(self) -> None:
        """Fork the spare unless there is one or it would exceed ``pool_size`` processes."""
        if self.spare is not None:
            return
        self._cleanup_pids()
        if len(self.task_id_to_pid) + 1 > self.pool_size:
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
            self._run_spare(theirs)
        theirs.close()
        self.spare = Spare(pid, ours)

    def _run_spare(self, sock: socket.socket) -> None:
        """The spare's life: wait for a request, run it as upstream's request process does."""
        try:
            dtg = receive_request(sock)
            sock.close()
            if dtg is None:  # the daemon ended without handing a request over
                os._exit(0)
            self._execute(dtg)
        except SystemExit:  # a storlet's own exit ends the process as upstream's
            raise
        except BaseException:  # noqa: BLE001 - whatever it was, never back into the daemon's loop
            os._exit(EXIT_FAILURE)
        sys.exit()  # as upstream's request process ends

    def _terminate(self) -> None:
        if self.spare is not None:
            self.spare.discard()
            self.spare = None
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
