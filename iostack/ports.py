"""Loopback ports: finding a free one, and telling whether something listens.

The all-in-one, the block bridge, the tests and the benchmarks all bring
servers up on private ports of 127.0.0.1; these are their helpers.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable


class NoFreePortError(RuntimeError):
    """The kernel handed out only ports that must be avoided (or none)."""


def free_port(preferred: int | None = None, host: str = "127.0.0.1",
              avoid: frozenset[int] = frozenset()) -> int:
    """``preferred`` if nothing listens there, else a port the kernel says is free.

    Ports in ``avoid`` (configured for components not started yet) are never
    returned, however free they look now. Connections left in TIME_WAIT by a
    server that just stopped do not count (SO_REUSEADDR, as servers bind): a
    restarted Redis or RabbitMQ gets its port back, so its clients reconnect.
    """
    candidates = ([preferred] if preferred and preferred not in avoid else []) + [0] * 20
    for port in candidates:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError:
                continue
            chosen = sock.getsockname()[1]
        if chosen not in avoid:
            return chosen
    raise NoFreePortError(f"no free TCP port on {host}")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], object], timeout: float, interval: float = 0.1) -> bool:
    """Poll ``check`` until it is true (True) or ``timeout`` seconds pass (False)."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
