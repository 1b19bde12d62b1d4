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
takes to reach the other proxies. ``validate = head`` closes those gaps with
a HEAD to the object servers per hit (ETag and X-Timestamp must match), at
the price of a backend round trip on every GET, which is most of what a hit
of a small object saves; the default trusts the invalidations.

Authorization is checked on a hit as the proxy server would (container
read ACL, then ``swift.authorize``), since the request never reaches it.

Configuration (``[filter:iostack_cache]`` in proxy-server.conf)::

    use = egg:iostack#iostack_cache
    cache_dir = /var/cache/iostack/proxy   # a directory on fast local storage
    cache_size = 1073741824                # bytes on disk, entry headers included
    redis_url = redis://127.0.0.1:6379/0   # the controller's Redis
    key_prefix = iostack:                  # the controller's key prefix
    validate = none                        # or head: check each hit with a HEAD

plus the policy-reader options
(``iostack.swift_middleware.shared_reader``: ``redis_url``, ``key_prefix``...).
Cache errors (disk, SQLite) are logged and turn into misses; an unusable
``cache_dir`` disables the cache for the worker but never fails a request.

Modules of ``iostack.swift_middleware.cache``: ``admission`` (what is cached,
entry versions), ``worker`` (a worker's store, fills, entry format),
``store`` (the SQLite index and files), ``invalidation`` (pub/sub).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from typing import Any

from eventlet import spawn, spawn_n
from eventlet.greenthread import GreenThread
from swift.common.request_helpers import resolve_etag_is_at_header, resolve_ignore_range_header
from swift.common.swob import Request, Response
from swift.common.utils import close_if_possible, get_logger
from swift.proxy.controllers.base import get_container_info

from iostack.filters.records import prepend
from iostack.policy.logs import route_to_swift
from iostack.policy.reader import PolicyReader
from iostack.policy.view import view_for
from iostack.swift_middleware.cache.admission import CachingPolicy, caching_rules
from iostack.swift_middleware.cache.store import HeadCachedSource
from iostack.swift_middleware.cache.worker import CachedObject, WorkerCache, cached_headers
from iostack.swift_middleware.enforce.decode import ViewAppIter
from iostack.swift_middleware.enforce.source import SWIFT_SOURCE as DECODER_SOURCE
from iostack.swift_middleware.enforce.source import ObjectChanged, SwiftObjectSource
from iostack.swift_middleware.shared_reader import reader_settings, shared_reader
from iostack.swift_middleware.subrequest import object_subrequest

DEFAULT_CACHE_DIR = "/var/cache/iostack/proxy"
DEFAULT_CACHE_SIZE = 1 << 30
SWIFT_SOURCE = "IOSC"  # our container-info and tail requests in the proxy log
SUBSCRIBE_WAIT = 0.5  # seconds a new worker's first request waits for the invalidation channel
_LARGE_OBJECT_MANIFEST = ("X-Static-Large-Object", "X-Object-Manifest")
# Backend request headers a hit honours as an object server would (or that
# only widen which names may be read).
_EMULATED_BACKEND_HEADERS = frozenset({
    "HTTP_X_BACKEND_ETAG_IS_AT", "HTTP_X_BACKEND_IGNORE_RANGE_IF_METADATA_PRESENT",
    "HTTP_X_BACKEND_ALLOW_RESERVED_NAMES",
})


# -- serving a head-cached object -------------------------------------------------

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
                yield from prepend(pending[3].wait(), pending[2])
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


def cacheable_read(env: dict[str, Any]) -> bool:
    """Whether a GET/HEAD asks for the object's ordinary representation.

    Not if it asks for something else: a query (``multipart-manifest=get``,
    ``symlink=get`` ...), the newest replica, a storlet run on the object
    servers, or backend headers the cache does not answer like an object
    server (the stored form of ``X-Backend-Iostack-Raw``, a storage policy
    index ...). The two that ``iostack`` sets are emulated on hits.
    """
    if env.get("QUERY_STRING") or env.get("HTTP_X_NEWEST", "").lower() in ("true", "1", "yes") \
            or "HTTP_X_RUN_STORLET" in env:
        return False
    return all(key in _EMULATED_BACKEND_HEADERS for key in env
               if key.startswith("HTTP_X_BACKEND_"))


def _object_length(content_range: str) -> int | None:
    """The complete length from ``bytes a-b/total``."""
    _, _, total = content_range.rpartition("/")
    return int(total) if total.isdigit() else None


# -- the middleware ---------------------------------------------------------------

class IOStackCacheMiddleware:
    def __init__(self, app, conf: dict[str, Any]) -> None:
        self.app = app
        self.logger = get_logger(conf, log_route="iostack_cache")
        route_to_swift(self.logger)
        self.reader_settings = reader_settings(conf)
        self.cache_dir = conf.get("cache_dir", DEFAULT_CACHE_DIR)
        size = str(conf.get("cache_size", DEFAULT_CACHE_SIZE))
        if not size.isdigit() or int(size) == 0:
            raise ValueError(f"iostack_cache: cache_size must be a positive number of bytes, "
                             f"got {size!r}")
        self.cache_size = int(size)
        validate = conf.get("validate", "none")
        if validate not in ("none", "head"):
            raise ValueError(f"iostack_cache: validate must be none or head, got {validate!r}")
        self.validate_with_head = validate == "head"
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
                    self.reader_settings["prefix"], self.logger)
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
        elif method in ("GET", "HEAD") and cacheable_read(env):
            handler = self.handle_read
        else:
            return self.app(env, start_response)
        view = view_for(env, self.app)
        if view is None or view.obj is None or view.internal:
            return self.app(env, start_response)
        return handler(Request(env))(env, start_response)

    def _lookup_policies(self, req: Request):
        # The request's one lookup (the levels depend on the path alone); the
        # conditions are resolved on the object's headers (``CachingPolicy``).
        return view_for(req.environ, self.app).lookup(self.reader)

    # -- writes ------------------------------------------------------------------
    def handle_write(self, req: Request):
        try:
            concerned = bool(caching_rules(self._lookup_policies(req)[0]))
        except Exception as exc:  # noqa: BLE001 - unknown policies: assume cached somewhere
            self.logger.warning("IOStack cache: policy lookup for %s failed: %s", req.path, exc)
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
            self.logger.warning("IOStack cache: policy lookup for %s failed: %s", req.path, exc)
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
        sub = object_subrequest(req, "GET", SWIFT_SOURCE,
                                {"Range": f"bytes=0-{min(head, total) - 1}"})
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
        except Exception:  # a side fill must never disturb the proxy
            self.logger.exception("IOStack cache: background fill of %s failed", path)
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
        if self.validate_with_head and not self._still_current(req, hit):
            hit.close()
            cache.drop(req.path)
            return None
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


    def _still_current(self, req: Request, hit: CachedObject) -> bool:
        """``validate = head``: the object servers still hold the cached version."""
        sub = object_subrequest(req, "HEAD", SWIFT_SOURCE)
        resp = sub.get_response(self.app)
        close_if_possible(resp.app_iter)
        return resp.status_int == 200 and all(
            resp.headers.get(h) == hit.headers.get(h) for h in ("Etag", "X-Timestamp"))


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return IOStackCacheMiddleware(app, conf)

    return factory
