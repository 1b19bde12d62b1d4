"""One proxy worker's cache: the store, its invalidation bus, and the fills.

``WorkerCache`` wraps a ``CacheStore`` (shared by the proxy's workers through
its directory) and an ``InvalidationBus`` (one subscription per worker).
Every call that touches the disk catches its errors: a cache that fails is a
cache that misses. ``Filler`` tees a body streaming to the client into a
fill and publishes the entry as soon as its head is complete, if no write of
the object was seen meanwhile.

Entry format: the ``CacheStore`` entry holds a 4-byte length, the stored
response headers as JSON (``str -> str``, checked on read), then the body's
first bytes; ``CachedObject`` presents that as the headers plus a
``ByteSource`` over the body bytes.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import struct
import threading
from collections.abc import Iterator

from eventlet import patcher
from swift.common.utils import close_if_possible

from iostack.filters.errors import ConfigError
from iostack.swift_middleware.cache.invalidation import InvalidationBus
from iostack.swift_middleware.cache.store import CachedBytes, CachedHead, CacheFill, CacheStore

LOG = logging.getLogger(__name__)

CACHE_ERRORS = (OSError, sqlite3.Error, ConfigError)
MAX_BACKGROUND_FILLS = 8  # per worker: head fills triggered by Range misses
_LENGTH = struct.Struct(">I")
# Per-response headers that must not be replayed from the cache.
_NOT_CACHED = frozenset({
    "content-length", "content-range", "date", "connection", "transfer-encoding",
    "x-trans-id", "x-openstack-request-id",
})


def cached_headers(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_CACHED}


def encode_headers(headers: dict[str, str]) -> bytes:
    data = json.dumps(headers, sort_keys=True).encode()
    return _LENGTH.pack(len(data)) + data


class CachedObject(CachedBytes):
    """An open entry: the stored headers and a ``ByteSource`` over the cached body bytes."""

    def __init__(self, head: CachedHead) -> None:
        self._head = head
        prefix = b"".join(head.read(0, _LENGTH.size))
        (size,) = _LENGTH.unpack(prefix)
        self._offset = _LENGTH.size + size
        data = json.loads(b"".join(head.read(_LENGTH.size, self._offset)))
        if not (isinstance(data, dict)
                and all(isinstance(k, str) and isinstance(v, str) for k, v in data.items())):
            raise ValueError("cache entry headers are not a str -> str map")
        self.headers: dict[str, str] = data
        self.cached = head.cached - self._offset
        self.object_length = head.object_length - self._offset

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        return self._head.read(self._offset + start, self._offset + end)

    def close(self) -> None:
        self._head.close()

    def expired(self, now: float) -> bool:
        delete_at = self.headers.get("X-Delete-At", "")
        return delete_at.isdigit() and int(delete_at) <= now


class WorkerCache:
    """The store and the invalidation bus of one proxy worker process.

    Every call that touches the disk catches its errors: a cache that fails is
    a cache that misses.
    """

    def __init__(self, cache_dir: str, cache_size: int, redis_url: str, prefix: str,
                 logger: logging.Logger | logging.LoggerAdapter = LOG) -> None:
        """``logger``: the middleware's (Swift's ``get_logger``), so lines carry its name."""
        self.logger = logger
        self.store: CacheStore | None = None
        # A worker's green threads share one OS thread and never switch inside a
        # store call (SQLite and file calls do not yield): one SQLite connection
        # per OS thread is safe, where one per green thread would cost a new
        # connection per request (~0.7 ms against ~0.1 ms for a lookup).
        thread_local = (patcher.original("threading").local
                        if patcher.is_monkey_patched("thread") else threading.local)
        try:
            self.store = CacheStore(cache_dir, cache_size, thread_local)
        except CACHE_ERRORS as exc:
            logger.error("IOStack cache disabled: %s", exc)
        self.bus = InvalidationBus(redis_url, prefix, self.drop, self._clear,
                                   subscribe=self.store is not None, logger=logger)
        self._background: set[str] = set()

    @property
    def usable(self) -> bool:
        return self.store is not None and self.bus.trusted

    def lookup(self, path: str, version: str) -> CachedObject | None:
        if not self.usable:
            return None
        try:
            head = self.store.lookup(path, version)
            if head is None:
                return None
        except CACHE_ERRORS as exc:
            self.logger.warning("IOStack cache: lookup of %s failed (a miss): %s", path, exc)
            return None
        try:
            return CachedObject(head)
        except (ValueError, struct.error, OSError) as exc:
            head.close()
            self.logger.warning("IOStack cache: dropping unreadable entry of %s: %s", path, exc)
            self.drop(path)
            return None

    def start_fill(self, path: str, version: str, headers: dict[str, str], length: int,
                   head: int, ticket: int) -> Filler | None:
        if not self.usable:
            return None
        prefix = encode_headers(headers)
        try:
            fill = self.store.fill(path, version, len(prefix) + length, len(prefix) + head)
            if fill is None:
                return None  # larger than the whole cache
            fill.write(prefix)
        except CACHE_ERRORS as exc:
            self.logger.warning("IOStack cache: cannot fill %s: %s", path, exc)
            return None
        return Filler(self, fill, ticket)

    def commit(self, fill: CacheFill, ticket: int) -> None:
        # A write of this object since the fill began, or a lost subscription,
        # could make the entry stale: drop it then.
        if not (self.bus.trusted and self.bus.still_valid(fill.path, ticket)):
            fill.abort()
            return
        fill.commit()
        if not self.bus.still_valid(fill.path, ticket):
            self.drop(fill.path)  # the write raced the commit itself

    def claim(self, path: str) -> bool:
        """Reserve a background fill of ``path`` (one per path, a few at a time)."""
        if not self.usable or path in self._background or \
                len(self._background) >= MAX_BACKGROUND_FILLS:
            return False
        self._background.add(path)
        return True

    def release(self, path: str) -> None:
        self._background.discard(path)

    def written(self, path: str) -> None:
        """Before and after a write of ``path`` through this worker."""
        self.bus.changed(path)

    def drop(self, path: str) -> None:
        if self.store is None:
            return
        try:
            self.store.invalidate(path)
        except CACHE_ERRORS as exc:
            # A stale entry could outlive its invalidation: stop using the cache.
            self.logger.error("IOStack cache disabled: invalidating %s failed: %s", path, exc)
            self.store = None

    def _clear(self) -> None:
        if self.store is not None:
            self.store.clear()  # errors propagate: the bus stays untrusted and retries


class Filler:
    """Tees a backend body into a cache fill as it streams to the client."""

    def __init__(self, cache: WorkerCache, fill: CacheFill, ticket: int) -> None:
        self.cache = cache
        self.fill: CacheFill | None = fill
        self.ticket = ticket

    def wrap(self, body) -> Iterator[bytes]:
        try:
            self._feed(b"")  # an empty object is complete before its first chunk
            for chunk in body:
                if self.fill is not None:
                    self._feed(chunk)
                yield chunk
        finally:
            self.abort()
            close_if_possible(body)

    def _feed(self, chunk: bytes) -> None:
        try:
            self.fill.write(chunk)
            if self.fill.full:
                fill, self.fill = self.fill, None
                self.cache.commit(fill, self.ticket)
        except CACHE_ERRORS as exc:
            self.cache.logger.warning("IOStack cache: fill failed (response unaffected): %s", exc)
            self.abort()

    def abort(self) -> None:
        fill, self.fill = self.fill, None
        if fill is not None:
            try:
                fill.abort()
            except CACHE_ERRORS as exc:
                self.cache.logger.warning("IOStack cache: dropping a fill failed: %s", exc)
