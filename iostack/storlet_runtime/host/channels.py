"""The server's side of a scope's channels: who owns each socket.

A scope's SBus sockets (the daemon factory's and one per storlet daemon)
live in the sandbox's own ``0700`` tmpfs at ``/mnt/channels``, reached from
the host through ``/proc/<sandbox init>/root/mnt/channels``
(``gateway.SandboxPaths`` resolves it and records the scope's uid here with
``expect``), so every SBus client the upstream runtime makes (ping, daemon
start/stop/status, execute, cancel) talks to the running sandbox's own
sockets.

Each message carries file descriptors of a tenant's request (its data, its
output, its log), so before anything is sent the socket is checked:
``send_checked`` opens the path with ``O_PATH | O_NOFOLLOW`` (a symlink is
refused, never followed), checks that it is a socket owned by the scope's
uid, and sends through ``/proc/self/fd/<that descriptor>``, so the socket
checked is the socket written to (no window in which the name could be
replaced). ``install`` makes Storlets' ``SBus.send``, through which every
host-side message goes, this check; a path the gateway did not resolve
itself is refused.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from storlets.sbus import SBus

# Host channel directory -> uid its sockets must belong to (the scope's).
_owners: dict[str, int] = {}
_upstream_send = SBus.send


class ChannelError(RuntimeError):
    """A channel socket is not the scope's own; nothing was sent."""


def expect(channel_dir: str, uid: int) -> None:
    """Sockets in ``channel_dir`` (a running sandbox's) must belong to ``uid``."""
    _owners[channel_dir] = uid


def send_checked(sbus_name: str, datagram: Any) -> int:
    """``SBus.send`` to ``sbus_name`` once it is a socket of the scope's uid."""
    try:
        fd = os.open(sbus_name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:  # no sandbox (there any more): upstream's "send failed"
        return -abs(exc.errno or 1)
    try:
        owner = _owners.get(os.path.dirname(sbus_name))
        if owner is None:
            raise ChannelError(f"{sbus_name}: not a channel of a running sandbox")
        st = os.fstat(fd)
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != owner:
            raise ChannelError(
                f"{sbus_name}: expected a socket owned by uid {owner}, found "
                f"{'a socket' if stat.S_ISSOCK(st.st_mode) else 'no socket'} of uid "
                f"{st.st_uid}; not sending the request's descriptors there")
        return _upstream_send(f"/proc/self/fd/{fd}", datagram)
    finally:
        os.close(fd)


def install() -> None:
    """Route every host-side SBus message through ``send_checked`` (idempotent)."""
    SBus.send = staticmethod(send_checked)



