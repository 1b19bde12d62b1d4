"""RabbitMQ plumbing: JSON messages on topic exchanges, published and consumed off the data path.

Two exchanges per stack, named from its namespace (``AioConfig.namespace``,
``iostack`` by default) so stacks sharing a broker stay apart:

================================  ========================================================
exchange                          messages
================================  ========================================================
``<namespace>.metrics`` (topic)   one batch per source and interval, routing key
                                  ``metrics.<stage>.<source>`` (``docs/monitoring.md``)
``<namespace>.qos`` (topic)       the global controllers' assignments to the proxies,
                                  routing key ``qos.<kind>``
================================  ========================================================

``Publisher`` takes messages from the caller without ever blocking it: they go
into a bounded buffer that a background thread sends. A slow, full or absent
broker fills the buffer; what does not fit is dropped and counted (``lost``),
and the thread reconnects by itself. ``Consumer`` binds a private, bounded,
auto-deleted queue to an exchange and hands each decoded message to a
callback on its own thread, reconnecting likewise.

Bodies are JSON objects: the consumer refuses anything else (anything over
``MAX_MESSAGE_BYTES``, anything nested deeper than ``bounded_json.MAX_DEPTH``
levels) and keeps consuming; nothing is ever unpickled or evaluated.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import pika
import pika.exceptions

from iostack import bounded_json

LOG = logging.getLogger(__name__)
# pika logs every connection step at INFO; our reconnect loop reports what matters.
logging.getLogger("pika").setLevel(logging.WARNING)

MAX_MESSAGE_BYTES = 4 << 20
RECONNECT_DELAYS = (0.5, 1.0, 2.0, 5.0)  # then 5 s between attempts
# A blocked or silent broker must not hold a publisher's socket for long.
CONNECTION_OPTIONS = {"socket_timeout": 3, "blocked_connection_timeout": 5,
                      "connection_attempts": 1, "heartbeat": 30}

MessageHandler = Callable[[str, dict[str, Any]], None]
T = TypeVar("T")


def metrics_exchange(namespace: str) -> str:
    return f"{namespace}.metrics"


def qos_exchange(namespace: str) -> str:
    return f"{namespace}.qos"


def source_id(stage: str, conf: dict[str, Any]) -> str:
    """Who publishes: one server worker, ``<stage>-<bind_ip>:<bind_port>-<pid>``.

    Each worker process of a proxy keeps its own counters and token buckets,
    so metrics and QoS assignments are per worker.
    """
    return f"{stage}-{conf.get('bind_ip', '0.0.0.0')}:{conf.get('bind_port', '')}-{os.getpid()}"  # noqa: S104 - a name


def connection_parameters(amqp_url: str) -> pika.URLParameters:
    params = pika.URLParameters(amqp_url)
    for name, value in CONNECTION_OPTIONS.items():
        setattr(params, name, value)
    return params


def decode(body: bytes) -> dict[str, Any]:
    """A message body as a JSON object; ``ValueError`` with the reason otherwise."""
    if len(body) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(body)} bytes is over {MAX_MESSAGE_BYTES}")
    data = bounded_json.loads(body)
    if not isinstance(data, dict):
        raise ValueError("message is not a JSON object")
    return data


class _Reconnecting:
    """A daemon thread that keeps one broker connection and runs ``_session`` on it."""

    def __init__(self, amqp_url: str, exchange: str, name: str) -> None:
        self.params = connection_parameters(amqp_url)
        self.exchange = exchange
        self.name = name
        self.connected = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake()
        self._thread.join(timeout)

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _wake(self) -> None:
        """Make ``_session`` notice ``stopping`` soon."""

    def _session(self, channel) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            connection = None
            try:
                connection = pika.BlockingConnection(self.params)
                channel = connection.channel()
                channel.exchange_declare(self.exchange, exchange_type="topic")
                if failures:
                    LOG.info("%s: connected to the broker again", self.name)
                failures = 0
                self.connected.set()
                self._session(channel)
            except Exception as exc:  # noqa: BLE001 - any broker failure: reconnect
                if failures == 0:
                    LOG.warning("%s: broker connection lost or refused (%s); retrying",
                                self.name, exc)
                failures += 1
            finally:
                self.connected.clear()
                if connection is not None and connection.is_open:
                    try:
                        connection.close()
                    except Exception:  # noqa: BLE001, S110 - closing a broken connection
                        pass
            delay = RECONNECT_DELAYS[min(failures, len(RECONNECT_DELAYS)) - 1] if failures else 0
            self._stop.wait(delay)


class Publisher(_Reconnecting):
    """Send JSON messages to a topic exchange from a background thread.

    ``publish`` never blocks: when the buffer of ``buffer`` messages is full
    the oldest message is dropped (fresh samples matter more than old ones)
    and ``lost`` counts it, as ``lost_items`` counts the items it carried.
    """

    def __init__(self, amqp_url: str, exchange: str, *, buffer: int = 64,
                 name: str = "iostack-publisher") -> None:
        super().__init__(amqp_url, exchange, name)
        self._queue: collections.deque[tuple[str, bytes, int]] = collections.deque()
        self.capacity = buffer
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.lost = 0
        self.lost_items = 0
        self.sent = 0

    def publish(self, routing_key: str, message: dict[str, Any], items: int = 1) -> None:
        """Queue ``message`` (``items`` samples, for the loss count) for sending."""
        body = json.dumps(message, separators=(",", ":")).encode()
        with self._lock:
            if len(self._queue) >= self.capacity:
                _, _, dropped = self._queue.popleft()
                self.lost += 1
                self.lost_items += dropped
            self._queue.append((routing_key, body, items))
        self._ready.set()

    @property
    def pending(self) -> int:
        return len(self._queue)

    def _wake(self) -> None:
        self._ready.set()

    def _session(self, channel) -> None:
        while not self.stopping:
            self._ready.wait(1.0)
            self._ready.clear()
            # Heartbeats and a closed connection are noticed here too.
            channel.connection.process_data_events(0)
            while self._queue:
                with self._lock:
                    routing_key, body, items = self._queue[0]
                channel.basic_publish(self.exchange, routing_key, body,
                                      pika.BasicProperties(content_type="application/json"))
                with self._lock:
                    # Dropped by publish() meanwhile? Then the head is another message.
                    if self._queue and self._queue[0][1] is body:
                        self._queue.popleft()
                self.sent += 1


class Consumer(_Reconnecting):
    """Hand every JSON message on ``binding_keys`` of an exchange to ``handler``.

    The queue is private to this consumer and holds at most ``max_queued``
    messages (the broker drops the oldest beyond that), so a stalled
    consumer never makes the broker hoard samples.
    """

    def __init__(self, amqp_url: str, exchange: str, binding_keys: Iterable[str],
                 handler: MessageHandler, *, max_queued: int = 10000,
                 name: str = "iostack-consumer") -> None:
        super().__init__(amqp_url, exchange, name)
        self.binding_keys = tuple(binding_keys)
        self.handler = handler
        self.max_queued = max_queued
        self.received = 0
        self.rejected = 0

    def _session(self, channel) -> None:
        declared = channel.queue_declare("", exclusive=True, auto_delete=True,
                                         arguments={"x-max-length": self.max_queued})
        queue = declared.method.queue
        for key in self.binding_keys:
            channel.queue_bind(queue, self.exchange, routing_key=key)
        for method, _properties, body in channel.consume(queue, auto_ack=True,
                                                         inactivity_timeout=0.5):
            if self.stopping:
                break
            if method is None:
                continue
            self._deliver(method.routing_key, body)
        channel.cancel()

    def _deliver(self, routing_key: str, body: bytes) -> None:
        try:
            message = decode(body)
        except ValueError as exc:
            self.rejected += 1
            LOG.warning("%s: ignored a message on %s: %s", self.name, routing_key, exc)
            return
        self.received += 1
        try:
            self.handler(routing_key, message)
        except Exception:  # one bad message must not stop consumption
            LOG.exception("%s: handler failed on a message on %s", self.name, routing_key)


class PerWorker(Generic[T]):
    """A value made once per process, on first use.

    Swift loads the pipeline, then forks its workers, and threads (a bus
    client's) do not survive a fork: middlewares make theirs in the worker.
    """

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._made: tuple[int, T] | None = None
        self._lock = threading.Lock()

    def get(self) -> T:
        made = self._made
        if made is None or made[0] != os.getpid():
            with self._lock:
                made = self._made
                if made is None or made[0] != os.getpid():
                    made = self._made = (os.getpid(), self._make())
        return made[1]


def wait_connected(clients: Iterable[_Reconnecting], timeout: float) -> bool:
    """True once every client is connected (tests and start-up checks)."""
    deadline = time.monotonic() + timeout
    return all(client.connected.wait(max(0.0, deadline - time.monotonic()))
               for client in clients)
