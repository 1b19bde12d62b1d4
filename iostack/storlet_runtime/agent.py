"""The sandbox's first program: a log socket for the Storlets agent, then the agent.

Runs inside the sandbox (system Python, no Storlets, no eventlet)::

    python3 -m iostack.storlet_runtime.agent /mnt/channels/log -- python3 -m \\
        iostack.storlet_runtime.daemon_factory ...

Storlets' agent logs to syslog at ``/dev/log``. The sandbox gets no host
``/dev/log`` (it would hand every tenant's code a socket into the host's
logging daemon, shared by all tenants); its ``/dev/log`` is a symlink to
this log socket in the sandbox's own channels tmpfs. This process binds it,
starts the agent as its child and copies each log datagram, one line each,
to its stderr, which is the scope's ``sandbox.log`` on the host. It exits
with the agent's status once the agent has exited.

A flood cannot grow the log past the sandbox's ``RLIMIT_FSIZE``: a write
past it fails (``SIGXFSZ`` is ignored here) and the line is dropped.

In a container (``docker_gateway``) the engine sets the other rlimits but
has none for the address space: ``--address-space BYTES`` (before the log
socket) sets ``RLIMIT_AS`` here, inherited by everything the agent starts,
as bubblewrap's ``prlimit --as`` does. ``--container`` (only there) makes
the channels directory ``0700`` (the engine mounts the tmpfs owned by the
sandbox's uid, but with its own mode) and links ``/dev/log`` to the log
socket (the container's ``/dev`` is a tmpfs of the sandbox's uid;
bubblewrap makes the link itself). Never without it: run on a host (a
test, a debugging session), the link would land on the host's ``/dev/log``
and, once this process is gone, point every server's syslog at a dead
socket (each Swift log line then failed with a traceback: a whole test
run slowed down several times).

Every orphan of the sandbox (a storlet's children whose request process
already ended) becomes this process's child: it is PID 1 in a container, and
a child subreaper anywhere. It reaps them all, as bubblewrap's own init
does; in a container their zombies would otherwise hold the process limit
for good (after one fork bomb, every later request failed to fork).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import select
import signal
import socket
import sys

MAX_DATAGRAM = 8192
PR_SET_CHILD_SUBREAPER = 36
REAP_EVERY = 0.2  # seconds: exited children are reaped at least this often


USAGE = "usage: agent [--address-space BYTES] [--container] LOG_SOCKET -- PROGRAM [ARGS...]"


def relay(log_path: str, argv: list[str], container: bool = False) -> int:
    if container:
        with contextlib.suppress(OSError):  # an engine that did either already
            os.chmod(os.path.dirname(log_path), 0o700)
            os.symlink(log_path, "/dev/log")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(log_path)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _become_subreaper()
    child = os.fork()
    if child == 0:
        sock.close()
        os.execv(argv[0], argv)  # noqa: S606 - the runner's argv, in the child
    while True:
        ready, _, _ = select.select([sock], [], [], REAP_EVERY)
        if ready:
            line = sock.recv(MAX_DATAGRAM).replace(b"\n", b" ").rstrip(b"\0") + b"\n"
            try:
                os.write(2, line)
            except OSError:  # past the file-size limit, or stderr closed: drop the line
                pass
        status = reap(child)
        if status is not None:
            return status


def _become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap(child: int) -> int | None:
    """Reap every exited child (orphans included); the agent's exit code once it exited."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return None
        if pid == 0:
            return None
        if pid == child:
            return os.waitstatus_to_exitcode(status)


def main() -> None:
    args = sys.argv[1:]
    container = False
    while args[:1] in (["--address-space"], ["--container"]):
        if args[0] == "--container":
            container, args = True, args[1:]
        elif len(args) > 1 and args[1].isdigit():
            limit = int(args[1])
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            args = args[2:]
        else:
            sys.exit(USAGE)
    if len(args) < 3 or args[1] != "--":
        sys.exit(USAGE)
    sys.exit(relay(args[0], args[2:], container))


if __name__ == "__main__":
    main()
