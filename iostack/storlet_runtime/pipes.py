"""The pieces bodies cross the pipes between a Swift server and a storlet in.

Storlets moves a request's input and output through pipes. On the server
side each piece costs a green ``select``, a timer and a green read or write
in the server's one event loop; upstream reads 64 KiB at a time, and Swift
hands bodies over in 64 KiB chunks, so for a 10 MiB body those per-piece
costs dominated. Both sides use ``PIPE_PIECE`` (1 MiB) pieces instead: the
gateway joins a streamed input into pieces that size and reads the output in
pieces up to that size, and the packaged filters inside the sandbox widen
their pipes to it (``widen``) and write that much at a time.

No eventlet, no Storlets here: the sandbox imports it too.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterable, Iterator

PIPE_PIECE = 1 << 20


def widen(fd: int) -> None:
    """Make the pipe ``fd`` (either end) hold ``PIPE_PIECE`` bytes, if it is a pipe and allowed."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_PIECE)
    except OSError:  # not a pipe, or above /proc/sys/fs/pipe-max-size: keep the default
        pass


def joined(chunks: Iterable[bytes], size: int = PIPE_PIECE) -> Iterator[bytes]:
    """``chunks`` joined into pieces of at least ``size`` bytes (the last one may be shorter)."""
    held: list[bytes] = []
    held_bytes = 0
    for chunk in chunks:
        held.append(chunk)
        held_bytes += len(chunk)
        if held_bytes >= size:
            yield b"".join(held)
            held, held_bytes = [], 0
    if held:
        yield b"".join(held)
