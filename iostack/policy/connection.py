"""Connecting to the policy store: one URL form, bounded timeouts, Sentinel failover.

Every component that talks to the stack's Redis (controller, guardian, the
data path's policy reader, QoS shared buckets, the proxy cache's
invalidation, metrics writers, ``iostack doctor``) connects through
``connect(url)``, so all of them accept the same URLs and none can hang on a
hung store:

- ``redis://[[user]:password@]host[:port][/db]`` and ``rediss://...`` (TLS):
  one server, as redis-py reads them.
- ``redis+sentinel://[[user]:password@]host1:port1[,host2:port2...]/service[/db]``:
  the master of ``service`` as the Sentinels at those addresses name it.
  The password is the master's (and the replicas'); the Sentinels are asked
  with the same one unless ``?sentinel_password=...`` gives another. On a
  failover the connection pool asks the Sentinels again on its next
  connection, so clients follow the new master without a restart.

Timeouts (``STORE_TIMEOUT``): a command waits at most 2 s for its answer and
a connection at most 1 s to open, unless the caller passes its own. A
command that fails on a connection error or a timeout is tried once more,
at once, on a new connection (``ATTEMPTS``; through the Sentinels for a
sentinel URL, so a connection to a master that was replaced is), never
more: redis-py's default (3 retries, with backoff of up to 10 s) would hold
a caller of a hung store 15 s and more. A store that is down, restarting or
hung (``CLIENT PAUSE``) therefore costs a caller at most ``ATTEMPTS`` x
(1 s + 2 s), plus, through Sentinel, the Sentinels' answers (each bounded
the same way, tried once); the data path does not wait even that, since it
enforces from its local copy (``iostack.policy.reader``) and talks to Redis
only in background threads.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

SENTINEL_SCHEME = "redis+sentinel"
STORE_TIMEOUT = 2.0  # seconds a command may wait for the store's answer
CONNECT_TIMEOUT = 1.0  # seconds to open a connection
ATTEMPTS = 2  # tries of a command that meets a connection error or a timeout, no pause


def connect(url: str, **kwargs: Any) -> redis.Redis:
    """A client for the store at ``url`` (see the module docstring); ``kwargs`` go to redis-py."""
    kwargs.setdefault("socket_timeout", STORE_TIMEOUT)
    kwargs.setdefault("socket_connect_timeout", CONNECT_TIMEOUT)
    kwargs.setdefault("retry", Retry(NoBackoff(), ATTEMPTS - 1))
    if urlsplit(url).scheme != SENTINEL_SCHEME:
        return redis.Redis.from_url(url, **kwargs)
    target = sentinel_target(url)
    sentinel_kwargs = {"socket_timeout": kwargs["socket_timeout"],
                       "socket_connect_timeout": kwargs["socket_connect_timeout"],
                       "retry": Retry(NoBackoff(), 0)}
    if target["sentinel_password"]:
        sentinel_kwargs["password"] = target["sentinel_password"]
    sentinel = Sentinel(target["hosts"], sentinel_kwargs=sentinel_kwargs)
    if target["username"]:
        kwargs.setdefault("username", target["username"])
    if target["password"]:
        kwargs.setdefault("password", target["password"])
    return sentinel.master_for(target["service"], db=target["db"], **kwargs)


def sentinel_target(url: str) -> dict[str, Any]:
    """The parts of a ``redis+sentinel://`` URL: hosts, service, db, credentials."""
    parts = urlsplit(url)
    if parts.scheme != SENTINEL_SCHEME:
        raise ValueError(f"not a {SENTINEL_SCHEME}:// URL")
    credentials, _, hostlist = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":")
    hosts = []
    for item in hostlist.split(","):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"sentinel address {item!r} is not host:port")
        hosts.append((host.strip("[]"), int(port)))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
        raise ValueError("a sentinel URL names the service, and optionally the db: "
                         "redis+sentinel://:PASSWORD@HOST:PORT,.../SERVICE[/DB]")
    query = parse_qs(parts.query)
    password = unquote(password) or None
    return {"hosts": hosts, "service": unquote(path[0]),
            "db": int(path[1]) if len(path) == 2 else 0,
            "username": unquote(username) or None, "password": password,
            "sentinel_password": query.get("sentinel_password", [password])[0]}
