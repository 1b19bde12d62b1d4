"""IOStack metric middleware: count tenants' requests and publish them to RabbitMQ.

Counts, per account and container, the requests of each method that
finished, the body bytes received (PUT) and sent (GET) as they move, the
requests in progress and a latency histogram per method (``counters``). A
request is in progress until its response body is read to the end, closed,
or dropped unread (``CountedResponse``).
Every ``interval`` seconds, on wall-clock multiples of it, a background
thread of the worker publishes the interval's batch to the ``<namespace>.metrics``
topic exchange with routing key ``metrics.<stage>.<source>`` (``bus``,
``docs/monitoring.md``). The request path only updates counters: a slow,
full or absent broker never delays or fails a request. Batches that do not
fit the publisher's bounded buffer are dropped, counted in the next batch's
``lost`` and logged once per interval.

Place it in the proxy pipeline right after the auth middleware (it counts
what tenants asked for, once, not the sub-requests of copy/SLO/DLO), and in
the object servers' pipeline in front of the object server (stage
``object``: what the disks served).

Configuration (``[filter:iostack_metrics]``)::

    use = egg:iostack#iostack_metrics
    amqp_url = amqp://user:password@127.0.0.1:5672/%2F
    namespace = iostack          # the stack's namespace: exchange <namespace>.metrics
    stage = proxy                # or object
    interval = 1                 # seconds per sample
    buffer = 64                  # batches kept while the broker is unreachable
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from swift.common.utils import get_logger, split_path

from iostack.monitoring.bus import PerWorker, Publisher, metrics_exchange, source_id
from iostack.monitoring.counters import SCHEMA_VERSION, Key, Window
from iostack.policy.logs import route_to_swift
from iostack.policy.view import view_for

LOG = logging.getLogger(__name__)
STAGES = ("proxy", "object")
# Object-server requests of replication, not of tenants.
BACKGROUND_METHODS = ("REPLICATE", "SSYNC")


class Reporter:
    """One worker's counters and the thread that publishes them every interval."""

    def __init__(self, publisher: Publisher, source: str, stage: str, interval: float,
                 logger: logging.Logger | logging.LoggerAdapter = LOG) -> None:
        self.logger = logger
        self.window = Window()
        self.publisher = publisher
        self.source = source
        self.stage = stage
        self.interval = interval
        self.routing_key = f"metrics.{stage}.{source}"
        self._lost_reported = 0
        self._thread = threading.Thread(target=self._run, name="iostack-metrics", daemon=True)

    def start(self) -> None:
        self.publisher.start()
        self._thread.start()

    def _run(self) -> None:
        while True:
            now = time.time()
            end = (now // self.interval + 1) * self.interval
            time.sleep(end - now)
            try:
                self.flush(end - self.interval)
            except Exception:  # the reporter must outlive any one failure
                self.logger.exception("IOStack metrics: could not publish a sample")

    def flush(self, start: float) -> None:
        untracked = self.window.untracked
        samples = self.window.flush()
        if untracked:
            self.logger.warning("IOStack metrics: %d requests not counted: over the cap of %d "
                        "targets per batch", untracked, self.window.max_targets)
        lost = self.publisher.lost_items - self._lost_reported
        if lost:
            self._lost_reported += lost
            self.logger.warning("IOStack metrics: %d samples lost (broker unreachable or slow); "
                        "%d batches pending", lost, self.publisher.pending)
        self.publisher.publish(self.routing_key, {
            "v": SCHEMA_VERSION, "source": self.source, "stage": self.stage,
            "start": start, "interval": self.interval, "lost": lost, "samples": samples,
        }, items=max(1, len(samples)))


class ByteTally:
    """Body bytes of one request, handed to the window ``FLUSH_BYTES`` at a time.

    A body moves in 64 KiB pieces: taking the window's lock for each cost an
    object server ~3 % of its CPU. Flushing every MiB (and at the end) keeps a
    long transfer counted in the intervals it spans.
    """

    FLUSH_BYTES = 1 << 20

    def __init__(self, window: Window, key: Key, direction: str) -> None:
        self.window = window
        self.key = key
        self.direction = direction  # "received" or "sent"
        self.pending = 0

    def add(self, count: int) -> None:
        self.pending += count
        if self.pending >= self.FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.window.transferred(self.key, **{self.direction: self.pending})
            self.pending = 0


class CountingInput:
    """``wsgi.input`` that counts the body bytes the application reads."""

    def __init__(self, wrapped: Any, count: Callable[[int], None]) -> None:
        self.wrapped = wrapped
        self.count = count

    def read(self, *args: Any) -> bytes:
        data = self.wrapped.read(*args)
        self.count(len(data))
        return data

    def readline(self, *args: Any) -> bytes:
        data = self.wrapped.readline(*args)
        self.count(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)


class CountedResponse:
    """A response body that counts what it sends and ends the request when it
    is read to the end, closed, or dropped: a caller that only looks at the
    status (s3api's sub-requests for the segments container, swob's
    ``get_response`` callers) neither reads nor closes the body, and the
    request used to stay active for good."""

    def __init__(self, body: Iterable[bytes], count: Callable[[int], None],
                 done: Callable[[], None]) -> None:
        self.body = body
        self.count = count
        self.done = done
        weakref.finalize(self, done)  # done must not refer to self

    def __iter__(self) -> Iterator[bytes]:
        # Callers such as proxy-logging close the iterator they got, not this object.
        try:
            for chunk in self.body:
                self.count(len(chunk))
                yield chunk
        finally:
            self.done()

    def close(self) -> None:
        try:
            close = getattr(self.body, "close", None)
            if close is not None:
                close()
        finally:
            self.done()


class MetricsMiddleware:
    def __init__(self, app: Any, conf: dict[str, Any]) -> None:
        self.app = app
        self.conf = conf
        self.logger = get_logger(conf, log_route="iostack_metrics")
        route_to_swift(self.logger)
        self.stage = conf.get("stage", "proxy")
        if self.stage not in STAGES:
            raise ValueError(f"iostack_metrics: stage must be one of {STAGES}, "
                             f"not {self.stage!r}")
        self.interval = float(conf.get("interval", 1.0))
        if not 0.05 <= self.interval <= 3600:
            raise ValueError("iostack_metrics: interval must be between 0.05 and 3600 seconds")
        self.amqp_url = conf.get("amqp_url", "amqp://127.0.0.1:5672/%2F")
        self.exchange = metrics_exchange(conf.get("namespace", "iostack"))
        self.buffer = int(conf.get("buffer", 64))
        self._reporter = PerWorker(self._start_reporter)

    def _start_reporter(self) -> Reporter:
        publisher = Publisher(self.amqp_url, self.exchange, buffer=self.buffer,
                              name=f"iostack-metrics-{self.stage}")
        reporter = Reporter(publisher, source_id(self.stage, self.conf), self.stage,
                            self.interval, self.logger)
        reporter.start()
        return reporter

    @property
    def reporter(self) -> Reporter:
        return self._reporter.get()

    def _key(self, env: dict[str, Any]) -> Key | None:
        """(account, container) of a tenant request; None for anything else.

        On the proxy only requests Swift authorizes count: an anonymous client
        must not raise a tenant's metrics (and fire its policies' actors)."""
        path = env.get("PATH_INFO", "")
        if self.stage == "proxy":
            view = view_for(env, self.app)
            if view is None or view.internal or not view.authorized():
                return None
            return view.account, view.container
        try:
            if env.get("REQUEST_METHOD") in BACKGROUND_METHODS:
                return None
            _dev, _part, account, container, _obj = split_path(path, 5, 5, True)
            return account, container
        except ValueError:
            return None

    def __call__(self, env: dict[str, Any], start_response: Callable) -> Any:
        key = self._key(env)
        if key is None:
            return self.app(env, start_response)
        window = self.reporter.window
        method = env.get("REQUEST_METHOD", "GET")
        began = time.monotonic()
        if not window.started(key):
            return self.app(env, start_response)
        ended = False
        received, sent = ByteTally(window, key, "received"), ByteTally(window, key, "sent")

        def done() -> None:
            nonlocal ended
            if not ended:
                ended = True
                received.flush()
                sent.flush()
                window.finished(key, method, time.monotonic() - began)

        if "wsgi.input" in env:
            env["wsgi.input"] = CountingInput(env["wsgi.input"], received.add)
        try:
            body = self.app(env, start_response)
        except BaseException:
            done()
            raise
        return CountedResponse(body, sent.add, done)


def filter_factory(global_conf: dict[str, Any], **local_conf: Any):
    conf = dict(global_conf, **local_conf)

    def factory(app):
        return MetricsMiddleware(app, conf)

    return factory
