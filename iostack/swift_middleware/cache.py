"""IOStack proxy cache: serve object heads from a fast local directory (the ``caching`` filter).

For objects whose policy pipeline includes ``caching`` (``SET CACHING [WITH
head=8M]``), GET and HEAD are answered from a ``CacheStore`` on the proxy's
flash: small objects entirely, large ones their first ``head`` bytes while the
rest streams from the object servers (``HeadCachedSource`` over a ranged
source pinned with ``If-Match``), as in the thesis on SSD caching of object
heads. A miss streams the object to the client and tees it into the cache on
the way (the client never waits for the fill; a failed fill only logs); a
``Range`` miss is answered by the object servers while a side request
fetches the object's head into the cache.

Place it right below ``iostack`` (``... iostack iostack_cache proxy-logging
proxy-server``): it caches the bytes as stored — compressed, encrypted, with
their sysmeta — so no plaintext of an encrypted object reaches the proxy's
disk, and the ``iostack`` middleware above decodes hits as it decodes what
comes from the object servers. ``Range``, multi-range and conditional
requests are answered from the cache exactly as an object server would
(``X-Backend-Etag-Is-At``, ``X-Backend-Ignore-Range-If-Metadata-Present``).

Freshness — the trade-off chosen: a hit costs no request to the object servers
at all; the cache is trusted because every write goes through a proxy and
every proxy tells every other one (``cache_invalidation``: PUT, POST and
DELETE publish the object's path on Redis; each worker drops the entry). An
entry's version is the set of ``caching`` rules (ids and parameters) that
apply to its container, so an entry filled under a policy that was removed
and set again is never served. The cache is bypassed while a worker's
subscription is down and emptied whenever it is (re)established; fills
racing a write are refused; entries past their ``X-Delete-At`` are misses.
What it cannot see: writes that bypass every proxy running this middleware
(object-server tools, a proxy without it) and the few milliseconds a message
takes to reach the other proxies. A HEAD per hit would close those gaps at
the price of a backend round trip on every GET, which is most of what a hit
of a small object saves.

Authorization is checked on a hit as the proxy server would (container
read ACL, then ``swift.authorize``), since the request never reaches it.

Configuration (``[filter:iostack_cache]`` in proxy-server.conf)::

    use = egg:iostack#iostack_cache
    cache_dir = /var/cache/iostack/proxy   # a directory on fast local storage
    cache_size = 1073741824                # bytes on disk, entry headers included
    redis_url = redis://127.0.0.1:6379/0   # the controller's Redis
    key_prefix = iostack:                  # the controller's key prefix

plus the policy-reader options of ``policies``. Cache errors (disk, SQLite)
are logged and turn into misses; an unusable ``cache_dir`` disables the cache
for the worker but never fails a request.

Entry format: the ``CacheStore`` entry holds a 4-byte length, the stored
response headers as JSON, then the body's first bytes; the store's version is
``c1:`` plus a digest of the ``caching`` rules.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

from eventlet import patcher, spawn, spawn_n
from eventlet.greenthread import GreenThread
from swift.common.request_helpers import resolve_etag_is_at_header, resolve_ignore_range_header
from swift.common.swob import Request, Response
from swift.common.utils import close_if_possible, split_path
from swift.common.wsgi import make_subrequest
from swift.proxy.controllers.base import get_container_info

from iostack.controller.reader import PolicyReader
from iostack.controller.resolve import Level, RequestInfo, resolve
from iostack.filters.caching import METADATA, CachedHead, CacheFill, CacheStore, HeadCachedSource
from iostack.filters.errors import ConfigError
from iostack.filters.registry import get_filter
from iostack.swift_middleware.cache_invalidation import InvalidationBus
from iostack.swift_middleware.decode import ViewAppIter
from iostack.swift_middleware.policies import reader_settings, shared_reader
from iostack.swift_middleware.record import SIZE_HEADER
from iostack.swift_middleware.source import SWIFT_SOURCE as DECODER_SOURCE
from iostack.swift_middleware.source import ObjectChanged, SwiftObjectSource

LOG = logging.getLogger(__name__)

DEFAULT_CACHE_DIR = "/var/cache/iostack/proxy"
DEFAULT_CACHE_SIZE = 1 << 30
SWIFT_SOURCE = "IOSC"  # our container-info and tail requests in the proxy log
CACHE_ERRORS = (OSError, sqlite3.Error, ConfigError)
MAX_BACKGROUND_FILLS = 8  # per worker: head fills triggered by Range misses
SUBSCRIBE_WAIT = 0.5  # seconds a new worker's first request waits for the invalidation channel
_LENGTH = struct.Struct(">I")
# Per-response headers that must not be replayed from the cache.
_NOT_CACHED = frozenset({
    "content-length", "content-range", "date", "connection", "transfer-encoding",
    "x-trans-id", "x-openstack-request-id",
})
_LARGE_OBJECT_MANIFEST = ("X-Static-Large-Object", "X-Object-Manifest")


# -- what is cached ---------------------------------------------------------------

def caching_rules(levels: list[Level]) -> list[dict[str, Any]]:
    """Every ``caching`` rule (set or delete, whatever its conditions) at these levels."""
    return [rule for level in levels for rule in level.rules if rule.get("filter") == METADATA.name]


def entry_version(rules: list[dict[str, Any]]) -> str:
    """The cache version of objects under these rules: new rule ids or parameters, new version."""
    text = json.dumps(sorted(rules, key=lambda r: str(r.get("id"))), sort_keys=True, default=str)
    return "c1:" + hashlib.sha256(text.encode()).hexdigest()[:32]


def cached_headers(headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in _NOT_CACHED}


def encode_headers(headers: dict[str, str]) -> bytes:
    data = json.dumps(headers, sort_keys=True).encode()
    return _LENGTH.pack(len(data)) + data


def tenant_request(path: str, headers: dict[str, str]) -> RequestInfo:
    """What the policy conditions see of a stored object (the tenant's size, type and tags)."""
    size = headers.get(SIZE_HEADER) or headers.get("Content-Length")
    return RequestInfo.from_path("GET", path, size=int(size) if size and size.isdigit() else None,
                                 headers=headers)


class CachedObject:
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

    @property
    def length(self) -> int:
        return self.cached

    @property
    def complete(self) -> bool:
        return self.cached == self.object_length

    def read(self, start: int, end: int) -> Iterator[bytes]:
        return self._head.read(self._offset + start, self._offset + end)

    def close(self) -> None:
        self._head.close()

    def expired(self, now: float) -> bool:
        delete_at = self.headers.get("X-Delete-At", "")
        return delete_at.isdigit() and int(delete_at) <= now


# -- one worker's cache -----------------------------------------------------------

class WorkerCache:
    """The store and the invalidation bus of one proxy worker process.

    Every call that touches the disk catches its errors: a cache that fails is
    a cache that misses.
    """

    def __init__(self, cache_dir: str, cache_size: int, redis_url: str, prefix: str) -> None:
        self.store: CacheStore | None = None
        try:
            self.store = CacheStore(cache_dir, cache_size)
        except CACHE_ERRORS as exc:
            LOG.error("IOStack cache disabled: %s", exc)
        if self.store is not None and patcher.is_monkey_patched("thread"):
            # CacheStore keeps a SQLite connection per ``threading.local``, which
            # eventlet makes per green thread: a new connection per request
            # (~0.7 ms against ~0.1 ms for a lookup). A worker's green threads
            # share one OS thread and never switch inside a store call (SQLite
            # and file calls do not yield), so one connection per OS thread is safe.
            self.store._local = patcher.original("threading").local()
        self.bus = InvalidationBus(redis_url, prefix, self.drop, self._clear,
                                   subscribe=self.store is not None)
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
            LOG.warning("IOStack cache: lookup of %s failed (a miss): %s", path, exc)
            return None
        try:
            return CachedObject(head)
        except (ValueError, struct.error, OSError) as exc:
            head.close()
            LOG.warning("IOStack cache: dropping unreadable entry of %s: %s", path, exc)
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
            LOG.warning("IOStack cache: cannot fill %s: %s", path, exc)
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
            LOG.error("IOStack cache disabled: invalidating %s failed: %s", path, exc)
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
            LOG.warning("IOStack cache: fill failed (response unaffected): %s", exc)
            self.abort()

    def abort(self) -> None:
        fill, self.fill = self.fill, None
        if fill is not None:
            try:
                fill.abort()
            except CACHE_ERRORS as exc:
                LOG.warning("IOStack cache: dropping a fill failed: %s", exc)


class _Tail:
    """The object servers' part of a head-cached object; a changed object drops the entry.

    ``prefetch`` sends the ranged request at once from a green thread, so the
    object servers' latency overlaps with sending the head from flash.
    """

    def __init__(self, source: SwiftObjectSource, cache: WorkerCache, path: str) -> None:
        self.source = source
        self.cache = cache
        self.path = path
        self._pending: tuple[int, int, Iterator[bytes], GreenThread] | None = None

    @property
    def length(self) -> int:
        return self.source.length

    def prefetch(self, start: int, end: int) -> None:
        self.close()
        chunks = self.source.read(start, end)
        self._pending = (start, end, chunks, spawn(next, chunks, b""))

    def read(self, start: int, end: int) -> Iterator[bytes]:
        pending = self._pending
        try:
            if pending is not None and pending[:2] == (start, end):
                self._pending = None
                first = pending[3].wait()
                if first:
                    yield first
                yield from pending[2]
            else:
                self.close()
                yield from self.source.read(start, end)
        except ObjectChanged:
            self.cache.written(self.path)
            raise

    def close(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            pending[3].kill()  # closes its sub-request if it is still waiting for it
            close_if_possible(pending[2])


class _HeadThenTail(HeadCachedSource):
    """A head-cached object whose tail is requested before its head is sent."""

    def __init__(self, head: CachedObject, tail: _Tail) -> None:
        super().__init__(head, tail)
        self.head = head
        self.tail = tail

    def read(self, start: int, end: int) -> Iterator[bytes]:
        if start < self.head.cached < end:
            self.tail.prefetch(self.head.cached, end)
        return super().read(start, end)

    def close(self) -> None:
        self.tail.close()
        self.head.close()


class CachingPolicy:
    """The ``caching`` rules that concern one object, and what they say for its headers."""

    def __init__(self, path: str, levels: list[Level], filters, object_types,
                 rules: list[dict[str, Any]]) -> None:
        self.path = path
        self.levels = levels
        self.filters = filters
        self.object_types = object_types
        self.version = entry_version(rules)

    @classmethod
    def of(cls, path: str, levels: list[Level], filters, object_types) -> CachingPolicy | None:
        rules = caching_rules(levels)
        return cls(path, levels, filters, object_types, rules) if rules else None

    def head_for(self, headers: dict[str, str]) -> int | None:
        """The policy's ``head`` for the object with these headers; None if it is not cached
        (``TO`` conditions on size, type or tags do not hold)."""
        request = tenant_request(self.path, headers)
        for entry in resolve(request, self.levels, self.filters, self.object_types).pipeline:
            if entry.filter == METADATA.name:
                return get_filter(entry.filter).validate(entry.params)["head"]
        return None


def _object_length(content_range: str) -> int | None:
    """The complete length from ``bytes a-b/total``."""
    _, _, total = content_range.rpartition("/")
    return int(total) if total.isdigit() else None


# -- the middleware ---------------------------------------------------------------

class IOStackCacheMiddleware:
    def __init__(self, app, conf: dict[str, Any]) -> None:
        self.app = app
        self.reader_settings = reader_settings(conf)
        self.cache_dir = conf.get("cache_dir", DEFAULT_CACHE_DIR)
        size = str(conf.get("cache_size", DEFAULT_CACHE_SIZE))
        if not size.isdigit() or int(size) == 0:
            raise ValueError(f"iostack_cache: cache_size must be a positive number of bytes, "
                             f"got {size!r}")
        self.cache_size = int(size)
        self._workers: dict[int, WorkerCache] = {}
        self._lock = threading.Lock()

    @property
    def reader(self) -> PolicyReader:
        return shared_reader(self.reader_settings)

    def worker(self) -> WorkerCache:
        # Created in the worker: Swift forks after loading the pipeline, and the
        # bus's listener thread and SQLite connections must not cross a fork.
        pid = os.getpid()
        with self._lock:
            cache = self._workers.get(pid)
            if cache is None:
                cache = self._workers[pid] = WorkerCache(
                    self.cache_dir, self.cache_size, self.reader_settings["redis_url"],
                    self.reader_settings["prefix"])
                created = True
            else:
                created = False
        if created and cache.store is not None:
            # Once per worker: give the subscription a moment so the first
            # requests can use the cache (until then they simply bypass it).
            cache.bus.wait_trusted(SUBSCRIBE_WAIT)
        return cache

    def __call__(self, env: dict[str, Any], start_response):
        # Plain WSGI rather than ``wsgify``: requests that are none of our
        # business (most of them, without a policy) pass without swob objects.
        method = env["REQUEST_METHOD"]
        if method in ("PUT", "POST", "DELETE"):
            handler = self.handle_write
        elif method in ("GET", "HEAD") and not env.get("QUERY_STRING") \
                and env.get("HTTP_X_NEWEST", "").lower() not in ("true", "1", "yes"):
            handler = self.handle_read
        else:
            return self.app(env, start_response)
        req = Request(env)
        try:
            split_path(req.path, 4, 4, True)
        except ValueError:
            return self.app(env, start_response)
        return handler(req)(env, start_response)

    def _lookup_policies(self, req: Request):
        # The levels depend on the path alone; headers matter only to resolve().
        return self.reader.lookup(RequestInfo.from_path("GET", req.path))

    # -- writes ------------------------------------------------------------------
    def handle_write(self, req: Request):
        try:
            concerned = bool(caching_rules(self._lookup_policies(req)[0]))
        except Exception as exc:  # noqa: BLE001 - unknown policies: assume cached somewhere
            LOG.warning("IOStack cache: policy lookup for %s failed: %s", req.path, exc)
            concerned = True
        if not concerned:
            # No caching rule applies: no entry of the current rules can exist
            # (versions name the rules), so there is nothing to invalidate.
            return self.app
        cache = self.worker()
        cache.written(req.path)  # fills running now must not publish the old object
        resp = req.get_response(self.app)
        # After the object servers answered: a fill that read the old version
        # meanwhile is voided, and so is every other proxy's entry.
        cache.written(req.path)
        cache.bus.publish(req.path)
        return resp

    # -- reads ------------------------------------------------------------------
    def handle_read(self, req: Request):
        cache = self.worker()
        if not cache.usable:
            return self.app
        try:
            policy = CachingPolicy.of(req.path, *self._lookup_policies(req))
        except Exception as exc:  # noqa: BLE001 - any Redis failure: no caching, plain read
            LOG.warning("IOStack cache: policy lookup for %s failed: %s", req.path, exc)
            return self.app
        if policy is None:
            return self.app
        hit = cache.lookup(req.path, policy.version)
        if hit is not None:
            if hit.expired(time.time()):
                hit.close()
                cache.drop(req.path)
            elif policy.head_for(hit.headers) is None:
                hit.close()
            else:
                served = self.serve_hit(req, hit, cache)
                if served is not None:
                    return served
        ticket = cache.bus.ticket()
        resp = req.get_response(self.app)
        if req.method != "GET" or any(h in resp.headers for h in _LARGE_OBJECT_MANIFEST):
            return resp
        if resp.status_int == 200 and resp.content_length is not None:
            return self._tee(req, resp, cache, policy, ticket)
        if resp.status_int == 206 and req.environ.get("swift.source") != DECODER_SOURCE:
            # A range of an object not cached yet: fetch its head on the side.
            # (The IOStack decoder's own ranged reads belong to a whole-object
            # GET that fills in the foreground.)
            self._fill_in_background(req, resp, cache, policy, ticket)
        return resp

    def _tee(self, req: Request, resp: Response, cache: WorkerCache, policy: CachingPolicy,
             ticket: int) -> Response:
        headers = cached_headers(resp.headers)
        head = policy.head_for(headers)
        filler = head is not None and cache.start_fill(
            req.path, policy.version, headers, resp.content_length, head, ticket)
        if not filler:
            return resp
        # A new response: assigning ``resp.app_iter`` would close the backend body.
        teed = Response(request=req, status=resp.status, headers=resp.headers,
                        app_iter=filler.wrap(resp.app_iter))
        teed.content_length = resp.content_length
        return teed

    def _fill_in_background(self, req: Request, resp: Response, cache: WorkerCache,
                            policy: CachingPolicy, ticket: int) -> None:
        total = _object_length(resp.headers.get("Content-Range", ""))
        if total is None:
            return  # multipart/byteranges: not worth guessing
        head = policy.head_for({**cached_headers(resp.headers), "Content-Length": str(total)})
        if head is None or not cache.claim(req.path):
            return
        sub = make_subrequest(req.environ, method="GET", path=req.path,
                              headers={"Range": f"bytes=0-{min(head, total) - 1}"},
                              swift_source=SWIFT_SOURCE)
        spawn_n(self._background_fill, sub, req.path, resp.headers.get("Etag"), cache,
                policy.version, ticket, head, total)

    def _background_fill(self, sub: Request, path: str, etag: str | None, cache: WorkerCache,
                         version: str, ticket: int, head: int, total: int) -> None:
        try:
            resp = sub.get_response(self.app)
            filler = None
            if resp.status_int in (200, 206) and resp.headers.get("Etag") == etag:
                filler = cache.start_fill(path, version, cached_headers(resp.headers), total,
                                          head, ticket)
            if filler:
                for _chunk in filler.wrap(resp.app_iter):
                    pass
            else:
                close_if_possible(resp.app_iter)
        except Exception:  # noqa: BLE001 - a side fill must never disturb the proxy
            LOG.exception("IOStack cache: background fill of %s failed", path)
        finally:
            cache.release(path)

    def serve_hit(self, req: Request, hit: CachedObject, cache: WorkerCache) -> Response | None:
        """The response from the cache, or None to ask the object servers after all."""
        info = get_container_info(req.environ, self.app, swift_source=SWIFT_SOURCE)
        if not 200 <= info.get("status", 0) < 300:
            hit.close()
            return None  # let the proxy server answer for a missing container
        # What the proxy server's object controller checks before reading.
        req.acl = info.get("read_acl")
        authorize = req.environ.get("swift.authorize")
        denied = authorize(req) if authorize else None
        if denied is not None:
            hit.close()
            return denied
        headers = hit.headers
        # Answer as an object server would, on a copy: the middlewares above
        # share this environ and must still see the client's Range.
        as_sent = Request(dict(req.environ))
        resolve_ignore_range_header(as_sent, headers)
        resp = Response(request=as_sent, headers=headers, conditional_response=True,
                        conditional_etag=resolve_etag_is_at_header(as_sent, headers))
        if req.method == "GET":
            view: CachedObject | _HeadThenTail = hit
            if not hit.complete:
                stored_etag = headers.get("Etag", "").strip('"')
                tail = SwiftObjectSource(self.app, req, hit.object_length, stored_etag)
                view = _HeadThenTail(hit, _Tail(tail, cache, req.path))
            resp.app_iter = ViewAppIter(view, view, req)
        else:
            hit.close()
        resp.content_length = hit.object_length
        return resp


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return IOStackCacheMiddleware(app, conf)

    return factory
