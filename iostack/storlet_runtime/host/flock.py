"""An exclusive ``flock`` taken by polling, so that an eventlet server is never blocked."""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path


@contextlib.contextmanager
def held(path: Path, timeout: float, too_long: Callable[[], Exception],
         poll: float = 0.01) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created 0600); ``too_long()`` is raised
    when it cannot be had within ``timeout`` seconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise too_long() from None
                time.sleep(poll)
        yield
    finally:
        os.close(fd)  # also releases the lock
