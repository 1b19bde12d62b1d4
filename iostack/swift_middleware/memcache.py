"""Swift's ``memcache`` middleware, also over a Unix socket.

memcached has no authentication: whoever connects reads every cached item,
and the proxy caches live tempauth tokens and account/container info (ACLs
included) there. On loopback TCP that is every local user (``lru_crawler
metadump`` lists the keys, ``get`` reads them). The all-in-one therefore
runs its memcached on a Unix socket only the stack's uid may open (mode
0600 in a 0700 directory), and Swift's client speaks TCP only; this filter
is Swift's own (``swift.common.middleware.memcache``, same options, same
``swift.cache``) with servers written ``unix:<absolute path>`` connected
over that socket. TCP servers (``host:port``) work as in Swift.

Configuration (``[filter:cache]`` in proxy-server.conf and internal
clients' configs)::

    use = egg:iostack#iostack_memcache
    memcache_servers = unix:/srv/iostack/run/memcached.sock
"""

from __future__ import annotations

import socket
from typing import Any

from swift.common.memcached import MemcacheConnPool, MemcacheRing
from swift.common.middleware.memcache import MemcacheMiddleware
from swift.common.utils import Timeout

UNIX = "unix:"


class UnixMemcacheConnPool(MemcacheConnPool):
    """Swift's connection pool, connecting to a Unix socket (no TLS: local only)."""

    def __init__(self, server: str, size: int, connect_timeout: float) -> None:
        super().__init__(server, size, connect_timeout)
        self.path = server[len(UNIX):]

    def create(self) -> tuple[Any, socket.socket]:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with Timeout(self._connect_timeout):
                sock.connect(self.path)
        except (Exception, Timeout):
            sock.close()
            raise
        return sock.makefile("rwb"), sock


def with_unix_servers(ring: MemcacheRing) -> MemcacheRing:
    """Give the ring's ``unix:`` servers pools that connect over their socket.

    Swift builds one TCP pool per server in ``MemcacheRing.__init__`` (into
    ``_client_cache``); the pools of ``unix:`` servers are replaced here, with
    the same size and connect timeout."""
    for server, pool in list(ring._client_cache.items()):
        if server.startswith(UNIX):
            ring._client_cache[server] = UnixMemcacheConnPool(
                server, pool.max_size, pool._connect_timeout)
    return ring


class UnixMemcacheMiddleware(MemcacheMiddleware):
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        super().__init__(app, conf)
        self.memcache = with_unix_servers(self.memcache)


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def cache_filter(app):
        return UnixMemcacheMiddleware(app, conf)

    return cache_filter
