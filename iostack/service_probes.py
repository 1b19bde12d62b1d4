"""Probes of the backing services: does it answer, does it let anyone in, how to print its URL.

The all-in-one (``iostack.aio``) refuses a Redis or RabbitMQ that answers
without the credentials it was given, and ``iostack doctor`` reports the
same on an existing cluster; both use these probes. Each probe opens one
short-lived connection (timeouts of 1-2 s) and never raises for "not there".
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

GUEST = ("guest", "guest")


def redis_answers(url: str) -> bool:
    import redis

    from iostack.policy.connection import connect

    try:
        return bool(connect(url, socket_timeout=1, socket_connect_timeout=1).ping())
    except (redis.RedisError, OSError):
        return False


def amqp_answers(url: str) -> bool:
    import pika

    params = pika.URLParameters(url)
    params.socket_timeout = 2
    params.blocked_connection_timeout = 2
    params.connection_attempts = 1
    try:
        pika.BlockingConnection(params).close()
        return True
    except Exception:  # noqa: BLE001 - pika raises many unrelated types for "not there"
        return False


UNIX_MEMCACHE = "unix:"  # a memcached URL naming a Unix socket: unix:/path/memcached.sock


def memcached_answers(url: str) -> bool:
    """Whether a memcached answers at ``host:port`` or ``unix:<path>``."""
    try:
        if url.startswith(UNIX_MEMCACHE):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(1)
            sock.connect(url[len(UNIX_MEMCACHE):])
        else:
            host, _, port = url.rpartition(":")
            sock = socket.create_connection((host, int(port)), timeout=1)
        with sock:
            sock.sendall(b"version\r\n")
            return sock.recv(64).startswith(b"VERSION")
    except (OSError, ValueError):
        return False


def redis_open_door(url: str) -> str | None:
    """Why anyone could use the Redis at ``url`` without its credentials, or None."""
    parts = urlsplit(url)
    if not parts.password:
        return "the URL has no password"
    bare = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
    if redis_answers(bare):
        return "the server answers without a password"
    return None


def amqp_open_door(url: str) -> str | None:
    """Why anyone could use the RabbitMQ at ``url`` without its credentials, or None."""
    parts = urlsplit(url)
    if not parts.password:
        return "the URL has no password (pika would log in as guest)"
    if (parts.username, parts.password) == GUEST:
        return "it logs in with RabbitMQ's well-known guest account"
    guest = parts._replace(netloc=f"{GUEST[0]}:{GUEST[1]}@{parts.netloc.rpartition('@')[2]}")
    if amqp_answers(guest.geturl()):
        return "the server takes RabbitMQ's well-known guest/guest"
    return None


def redact(url: str) -> str:
    """The URL without its password, for printing."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    netloc = f"{parts.username or ''}:***@{parts.netloc.rpartition('@')[2]}"
    return parts._replace(netloc=netloc).geturl()
