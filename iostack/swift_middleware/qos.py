"""IOStack QoS middleware: shape tenants' traffic to their ``bandwidth`` SLOs.

For a request whose policy pipeline holds ``bandwidth`` (``SET BANDWIDTH
WITH get=30MBps, put=10MBps, ops=50ops``), or whose tenant the global
controller assigned a rate to, the worker paces the stream with token
buckets instead of rejecting it: GET bodies are released chunk by chunk,
PUT bodies are read chunk by chunk, each chunk waiting (a green sleep) until
its bytes are covered, so the rate is smooth with bursts of at most
``burst`` seconds' worth (or one lease of a shared bucket). A request over
the ``ops`` limit waits for its token up to the policy's ``wait``; past that
it gets 429 with Retry-After.

Scopes: limits set on a tenant, a group or everything shape each tenant
(``AUTH_t1``); limits set on a container shape that container
(``AUTH_t1/logs``). The controller's global SLO controller
(``iostack.controller.qos``) computes every scope's rate over all proxies
and splits it among the workers that carry its traffic; it publishes the
parts on ``<namespace>.qos`` (routing key ``qos.assign``).

Bytes (``get``, ``put``) are paced by one bucket per scope and direction
shared by every worker of every proxy, in Redis
(``iostack.swift_middleware.shared_bucket``): each worker leases from it a
little ahead, so the cap holds summed over all workers whichever worker a
GET lands on, and a new stream is shaped at its fair share from its first
byte. The bucket's rate is the sum of the parts the controller assigned (or,
before any assignment, the policy's cap). When Redis cannot be reached, a
worker paces bytes at its own part (the policy's cap if it has none yet).
Requests (``ops``) are paced by each worker's own bucket at its part. A
worker that hears nothing more keeps its last assignment.

Place it in the proxy pipeline right after ``iostack_metrics`` (after
auth), so the metrics see what tenants asked for and the shaping applies
once per client request, not to the sub-requests of copy/SLO/DLO.

Configuration (``[filter:iostack_qos]``)::

    use = egg:iostack#iostack_qos
    amqp_url = amqp://user:password@127.0.0.1:5672/%2F
    namespace = iostack          # exchange <namespace>.qos
    burst = 0.05                 # seconds of traffic a bucket may hold
    shared_buckets = true        # false: bytes too are paced per worker, at its part

plus the policy-reader options
(``iostack.swift_middleware.shared_reader``: ``redis_url``, ``key_prefix``...);
the shared buckets live in that Redis, under that prefix.
A failed policy lookup is logged and the request is served unshaped:
shaping is never a reason to refuse data.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import eventlet
from swift.common.swob import Response
from swift.common.utils import config_true_value, get_logger

from iostack.filters.builtin.bandwidth import DIRECTIONS, scope_of
from iostack.monitoring.bus import Consumer, PerWorker, qos_exchange, source_id
from iostack.policy.connection import connect
from iostack.policy.logs import route_to_swift
from iostack.policy.reader import PolicyStoreUnavailable
from iostack.policy.view import RequestView, view_for
from iostack.swift_middleware.shared_bucket import (
    LOG,
    LeaseStore,
    RedisLeases,
    SharedBucket,
    Stream,
    TokenBucket,
)
from iostack.swift_middleware.shared_reader import reader_settings, shared_reader


class Shaper:
    """One worker's buckets and the rates assigned to it by the global controller.

    Bytes (``get``/``put``) are paced by ``SharedBucket``s at the scope's rate
    over all workers (the sum of the parts the controller assigned, or the
    policy's cap), falling back to the worker's part; requests (``ops``) by
    this worker's own ``TokenBucket`` at its part.
    """

    def __init__(self, burst: float, store: LeaseStore | None = None, lessee: str = "",
                 logger: Any = None) -> None:
        self.burst = burst
        self.store = store
        self.lessee = lessee
        self.logger = logger or LOG
        self.assigned: dict[str, dict[str, float]] = {}  # scope -> direction -> rate
        self.totals: dict[str, dict[str, float]] = {}  # ... over every worker
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._shared: dict[tuple[str, str], SharedBucket] = {}
        self._lock = threading.Lock()

    def assign(self, message: dict[str, Any], source: str) -> None:
        """A ``qos.assign`` message: keep this worker's part (all of it replaces the last)."""
        sources = message.get("sources", {})
        mine = sources.get(source)
        if not isinstance(mine, dict):
            return
        self.assigned = _rates(mine)
        totals: dict[str, dict[str, float]] = {}
        for part in sources.values():
            if isinstance(part, dict):
                for scope, rates in _rates(part).items():
                    for direction, rate in rates.items():
                        row = totals.setdefault(scope, {})
                        row[direction] = row.get(direction, 0.0) + rate
        self.totals = totals
        # Requests under way hold their bucket: a long GET must speed up or slow
        # down with the new rates.
        with self._lock:
            for (scope, direction), bucket in self._buckets.items():
                rate = self.assigned.get(scope, {}).get(direction)
                if rate and rate != bucket.rate:
                    bucket.set_rate(rate)
            for (scope, direction), shared in self._shared.items():
                total = self.totals.get(scope, {}).get(direction)
                if total:
                    shared.set_rates(total, self.assigned.get(scope, {}).get(direction, total))

    def rate(self, scope: str, direction: str, policy: dict[str, Any] | None) -> float:
        """Units per second for this worker; 0 means unshaped."""
        assigned = self.assigned.get(scope, {}).get(direction)
        if assigned is not None:
            return assigned
        return _cap(direction, policy)

    def total(self, scope: str, direction: str, policy: dict[str, Any] | None) -> float:
        """Units per second for the scope over every worker; 0 means unshaped."""
        total = self.totals.get(scope, {}).get(direction)
        if total is not None:
            return total
        return _cap(direction, policy)

    def bucket(self, scope: str, direction: str, rate: float) -> TokenBucket:
        with self._lock:
            bucket = self._buckets.get((scope, direction))
            if bucket is None:
                bucket = self._buckets[(scope, direction)] = TokenBucket(rate, self.burst)
            elif bucket.rate != rate:
                bucket.set_rate(rate)
            return bucket

    def shared(self, scope: str, direction: str, policy: dict[str, Any] | None,
               ) -> SharedBucket | None:
        """The scope's bucket for bytes in ``direction``, or None when they are not shaped."""
        total = self.total(scope, direction, policy)
        if not total:
            return None
        share = self.rate(scope, direction, policy) or total
        with self._lock:
            bucket = self._shared.get((scope, direction))
            if bucket is None:
                bucket = self._shared[(scope, direction)] = SharedBucket(
                    self.store, scope, direction, self.lessee, total, share, self.burst,
                    self.logger)
            else:
                bucket.set_rates(total, share)
            return bucket


def _rates(part: dict[str, Any]) -> dict[str, dict[str, float]]:
    return {str(scope): {d: float(r) for d, r in rates.items() if d in DIRECTIONS and r is not None}
            for scope, rates in part.items() if isinstance(rates, dict)}


def _length(value: str | None) -> int | None:
    """A body's length from its Content-Length, None when unknown (chunked) or bad."""
    try:
        return max(int(value), 0) if value is not None else None
    except ValueError:
        return None


def _cap(direction: str, policy: dict[str, Any] | None) -> float:
    """The policy's own limit in ``direction`` (minimums shape nothing by themselves)."""
    if policy and (direction == "ops" or policy.get("mode") == "max"):
        return float(policy.get(direction) or 0)
    return 0.0


class PacedInput:
    """``wsgi.input`` whose reads wait until the bucket covers the bytes read."""

    def __init__(self, wrapped: Any, stream: Stream) -> None:
        self.wrapped = wrapped
        self.stream = stream
        # Swift reads a PUT body up to its length, not always to EOF: the stream
        # also ends when the request lets go of its input.
        self._finalizer = weakref.finalize(self, stream.close)

    def _paced(self, data: bytes, size: int | None) -> bytes:
        if data:
            self.stream.take(len(data))
        elif size != 0:
            self._finalizer()  # EOF: the stream is over
        return data

    def read(self, *args: Any) -> bytes:
        return self._paced(self.wrapped.read(*args), args[0] if args else None)

    def readline(self, *args: Any) -> bytes:
        return self._paced(self.wrapped.readline(*args), args[0] if args else None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def paced_body(body: Iterable[bytes], stream: Stream) -> Iterator[bytes]:
    try:
        for chunk in body:
            if chunk:
                stream.take(len(chunk))
            yield chunk
    finally:
        stream.close()
        close = getattr(body, "close", None)
        if close is not None:
            close()


class QosMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.conf = conf
        self.logger = get_logger(conf, log_route="iostack_qos")
        route_to_swift(self.logger)
        self.reader_settings = reader_settings(conf)
        self.amqp_url = conf.get("amqp_url")
        self.exchange = qos_exchange(conf.get("namespace", "iostack"))
        self.burst = float(conf.get("burst", 0.05))
        if not 0.001 <= self.burst <= 10:
            raise ValueError("iostack_qos: burst must be between 0.001 and 10 seconds")
        self.shared_buckets = config_true_value(conf.get("shared_buckets", "true"))
        self._shaper = PerWorker(self._start_shaper)

    def _start_shaper(self) -> Shaper:
        source = source_id("proxy", self.conf)
        store = None
        if self.shared_buckets:
            client = connect(self.reader_settings["redis_url"], health_check_interval=30)
            store = RedisLeases(client, self.reader_settings["prefix"])
        shaper = Shaper(self.burst, store, source, self.logger)
        if self.amqp_url:
            Consumer(self.amqp_url, self.exchange, ["qos.assign"],
                     lambda _key, message: shaper.assign(message, source),
                     max_queued=16, name="iostack-qos").start()
        return shaper

    @property
    def shaper(self) -> Shaper:
        return self._shaper.get()

    def _policy(self, view: RequestView) -> tuple[str, dict[str, Any] | None]:
        """(scope, the bandwidth parameters) of a request; (account, None) without a policy."""
        try:
            pipeline = view.resolution(shared_reader(self.reader_settings)).pipeline
        except PolicyStoreUnavailable as exc:
            # QoS fails open: serving unshaped loses no data (docs/datapath.md).
            self.logger.error("IOStack QoS: policy lookup for %s failed: %s", view.path_info, exc)
            return view.account, None
        for entry in pipeline:
            if entry.filter == "bandwidth":
                return scope_of(entry.sources, view.account, view.container), entry.params
        return view.account, None

    def __call__(self, env: dict[str, Any], start_response: Callable) -> Any:
        view = view_for(env, self.app)
        # Only requests Swift lets through take tokens: an anonymous client must
        # not drain a tenant's buckets.
        if view is None or view.internal or not view.authorized():
            return self.app(env, start_response)
        shaper = self.shaper
        scope, policy = self._policy(view)
        if policy is None and scope not in shaper.totals:
            return self.app(env, start_response)
        ops = shaper.rate(scope, "ops", policy)
        if ops:
            bucket = shaper.bucket(scope, "ops", ops)
            delay = bucket.reserve(1)
            wait = float((policy or {}).get("wait", 2))
            if delay > wait:
                bucket.refund(1)
                return Response(
                    status="429 Too Many Requests",
                    body=f"IOStack: {scope} is over its limit of {ops:g} requests/s; "
                         f"retry after {delay:.1f}s",
                    headers={"Retry-After": str(math.ceil(delay))},
                    content_type="text/plain")(env, start_response)
            if delay:
                eventlet.sleep(delay)
        method = env.get("REQUEST_METHOD")
        if method == "PUT" and (put := shaper.shared(scope, "put", policy)):
            env["wsgi.input"] = PacedInput(env["wsgi.input"],
                                           put.stream(_length(env.get("CONTENT_LENGTH"))))
        get = shaper.shared(scope, "get", policy) if method == "GET" else None
        if get is None:
            return self.app(env, start_response)
        length: list[int | None] = [None]

        def start(status: str, headers: list[tuple[str, str]], *args: Any) -> Any:
            length[0] = _length(next((v for k, v in headers if k.lower() == "content-length"),
                                     None))
            return start_response(status, headers, *args)

        body = self.app(env, start)
        return paced_body(body, get.stream(length[0]))


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return QosMiddleware(app, conf)

    return factory
