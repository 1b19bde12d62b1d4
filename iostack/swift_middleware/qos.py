"""IOStack QoS middleware: shape tenants' traffic to their ``bandwidth`` SLOs.

For a request whose policy pipeline holds ``bandwidth`` (``SET BANDWIDTH
WITH get=30MBps, put=10MBps, ops=50ops``), or whose tenant the global
controller assigned a rate to, the worker paces the stream with token
buckets instead of rejecting it: GET bodies are released chunk by chunk,
PUT bodies are read chunk by chunk, each chunk waiting (a green sleep) until
its bytes are covered, so the rate is smooth with bursts of at most
``burst`` seconds' worth. A request over the ``ops`` limit waits for its
token up to the policy's ``wait``; past that it gets 429 with Retry-After.

Scopes: limits set on a tenant, a group or everything shape each tenant
(``AUTH_t1``); limits set on a container shape that container
(``AUTH_t1/logs``). Each worker has its own buckets; the controller's global
SLO controller (``iostack.controller.qos``) splits every scope's rate among
the workers that carry its traffic and publishes the assignments on
``<namespace>.qos`` (routing key ``qos.assign``). A worker that has heard
no assignment for a scope uses the policy's caps as they are; one that hears
nothing more keeps its last assignment.

Place it in the proxy pipeline right after ``iostack_metrics`` (after
auth), so the metrics see what tenants asked for and the shaping applies
once per client request, not to the sub-requests of copy/SLO/DLO.

Configuration (``[filter:iostack_qos]``)::

    use = egg:iostack#iostack_qos
    amqp_url = amqp://user:password@127.0.0.1:5672/%2F
    namespace = iostack          # exchange <namespace>.qos
    burst = 0.05                 # seconds of traffic a bucket may hold

plus the policy-reader options of ``policies`` (``redis_url``, ``key_prefix``...).
A failed policy lookup is logged and the request is served unshaped:
shaping is never a reason to refuse data.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import eventlet
from swift.common.swob import Response
from swift.common.utils import get_logger

from iostack.filters.bandwidth import DIRECTIONS, scope_of
from iostack.monitoring.bus import Consumer, PerWorker, qos_exchange, source_id
from iostack.policy.reader import PolicyStoreUnavailable
from iostack.policy.view import RequestView, view_for
from iostack.swift_middleware.shared_reader import reader_settings, shared_reader


class TokenBucket:
    """``rate`` units per second, holding at most ``burst`` seconds' worth.

    ``reserve(n)`` takes ``n`` units at once, going into debt if need be, and
    says how long the caller must wait before using them: concurrent users of
    one bucket queue behind each other, in order.
    """

    def __init__(self, rate: float, burst: float, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.burst = burst
        self.rate = rate
        self.tokens = self.capacity
        self.stamp = clock()

    @property
    def capacity(self) -> float:
        return max(self.rate * self.burst, 1.0)

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def set_rate(self, rate: float) -> None:
        self._refill()
        self.rate = rate
        self.tokens = min(self.tokens, self.capacity)

    def reserve(self, amount: float) -> float:
        self._refill()
        self.tokens -= amount
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def refund(self, amount: float) -> None:
        self.tokens += amount


class Shaper:
    """One worker's buckets and the rates assigned to it by the global controller."""

    def __init__(self, burst: float) -> None:
        self.burst = burst
        self.assigned: dict[str, dict[str, float]] = {}  # scope -> direction -> rate
        self._buckets: dict[tuple[str, str], TokenBucket] = {}
        self._lock = threading.Lock()

    def assign(self, message: dict[str, Any], source: str) -> None:
        """A ``qos.assign`` message: keep this worker's part (all of it replaces the last)."""
        mine = message.get("sources", {}).get(source)
        if isinstance(mine, dict):
            self.assigned = {str(scope): {d: float(r) for d, r in rates.items()
                                          if d in DIRECTIONS and r is not None}
                             for scope, rates in mine.items() if isinstance(rates, dict)}
            # Requests under way hold their bucket: a long GET that started while
            # this worker had a small share must speed up when the share grows.
            with self._lock:
                for (scope, direction), bucket in self._buckets.items():
                    rate = self.assigned.get(scope, {}).get(direction)
                    if rate and rate != bucket.rate:
                        bucket.set_rate(rate)

    def rate(self, scope: str, direction: str, policy: dict[str, Any] | None) -> float:
        """Units per second for this worker; 0 means unshaped."""
        assigned = self.assigned.get(scope, {}).get(direction)
        if assigned is not None:
            return assigned
        if policy and (direction == "ops" or policy.get("mode") == "max"):
            return float(policy.get(direction) or 0)
        return 0.0

    def bucket(self, scope: str, direction: str, rate: float) -> TokenBucket:
        with self._lock:
            bucket = self._buckets.get((scope, direction))
            if bucket is None:
                bucket = self._buckets[(scope, direction)] = TokenBucket(rate, self.burst)
            elif bucket.rate != rate:
                bucket.set_rate(rate)
            return bucket


class PacedInput:
    """``wsgi.input`` whose reads wait until the bucket covers the bytes read."""

    def __init__(self, wrapped: Any, bucket: TokenBucket) -> None:
        self.wrapped = wrapped
        self.bucket = bucket

    def _paced(self, data: bytes) -> bytes:
        if data and (delay := self.bucket.reserve(len(data))):
            eventlet.sleep(delay)
        return data

    def read(self, *args: Any) -> bytes:
        return self._paced(self.wrapped.read(*args))

    def readline(self, *args: Any) -> bytes:
        return self._paced(self.wrapped.readline(*args))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


def paced_body(body: Iterable[bytes], bucket: TokenBucket) -> Iterator[bytes]:
    try:
        for chunk in body:
            if chunk and (delay := bucket.reserve(len(chunk))):
                eventlet.sleep(delay)
            yield chunk
    finally:
        close = getattr(body, "close", None)
        if close is not None:
            close()


class QosMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.conf = conf
        self.logger = get_logger(conf, log_route="iostack_qos")
        self.reader_settings = reader_settings(conf)
        self.amqp_url = conf.get("amqp_url")
        self.exchange = qos_exchange(conf.get("namespace", "iostack"))
        self.burst = float(conf.get("burst", 0.05))
        if not 0.001 <= self.burst <= 10:
            raise ValueError("iostack_qos: burst must be between 0.001 and 10 seconds")
        self._shaper = PerWorker(self._start_shaper)

    def _start_shaper(self) -> Shaper:
        shaper = Shaper(self.burst)
        if self.amqp_url:
            source = source_id("proxy", self.conf)
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
        if policy is None and scope not in shaper.assigned:
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
        if method == "PUT" and (put := shaper.rate(scope, "put", policy)):
            env["wsgi.input"] = PacedInput(env["wsgi.input"], shaper.bucket(scope, "put", put))
        body = self.app(env, start_response)
        if method == "GET" and (get := shaper.rate(scope, "get", policy)):
            return paced_body(body, shaper.bucket(scope, "get", get))
        return body


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return QosMiddleware(app, conf)

    return factory
