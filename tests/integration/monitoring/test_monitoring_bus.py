"""The RabbitMQ plumbing against the stack's real broker."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pika
import pytest

from iostack.monitoring.bus import Consumer, Publisher, decode, wait_connected

pytestmark = pytest.mark.integration


def test_decode_takes_json_objects_only():
    assert decode(b'{"a": 1}') == {"a": 1}
    for body in (b"[1, 2]", b"\x80\x04K\x01.", b"not json",  # the middle one is a pickle
                 b"[" * 100_000, b"{\"a\":" * 40 + b"1" + b"}" * 40):  # too deep
        with pytest.raises(ValueError):
            decode(body)


def test_messages_flow_and_anything_but_json_is_refused(aio):
    exchange = f"test-{uuid.uuid4().hex[:8]}.metrics"
    got: list[tuple[str, dict]] = []
    arrived = threading.Event()

    def handle(key: str, message: dict) -> None:
        got.append((key, message))
        if len(got) == 3:
            arrived.set()

    consumer = Consumer(aio["amqp_url"], exchange, ["metrics.proxy.#"], handle)
    publisher = Publisher(aio["amqp_url"], exchange)
    consumer.start()
    publisher.start()
    try:
        assert wait_connected([consumer, publisher], 10)
        time.sleep(0.2)  # the consumer's queue is bound once connected
        with pika.BlockingConnection(pika.URLParameters(aio["amqp_url"])) as raw:
            raw.channel().basic_publish(exchange, "metrics.proxy.evil", b"\x80\x04K\x01.")
        for n in range(3):
            publisher.publish(f"metrics.proxy.p{n}", {"n": n})
        publisher.publish("metrics.object.x", {"n": 99})  # not bound: never delivered
        assert arrived.wait(10)
        assert sorted(m["n"] for _, m in got) == [0, 1, 2]
        assert consumer.rejected == 1 and publisher.lost == 0
    finally:
        publisher.stop()
        consumer.stop()


def test_a_deeply_nested_body_is_refused_and_the_queue_survives(aio):
    """Security regression: a body of nested arrays raised RecursionError out of
    the consumer's session; it reconnected with a fresh queue, and the messages
    already queued behind the hostile one were lost."""
    exchange = f"test-{uuid.uuid4().hex[:8]}.metrics"
    got: list[int] = []
    arrived = threading.Event()

    def handle(_key: str, message: dict) -> None:
        got.append(message["n"])
        if len(got) == 3:
            arrived.set()

    consumer = Consumer(aio["amqp_url"], exchange, ["metrics.proxy.#"], handle)
    consumer.start()
    try:
        assert wait_connected([consumer], 10)
        time.sleep(0.2)  # the consumer's queue is bound once connected
        with pika.BlockingConnection(pika.URLParameters(aio["amqp_url"])) as raw:
            channel = raw.channel()
            for body in (b"[" * 100_000, b'{"a":' * 500 + b"1" + b"}" * 500):
                channel.basic_publish(exchange, "metrics.proxy.evil", body)
            for n in range(3):  # queued right behind the hostile ones
                channel.basic_publish(exchange, f"metrics.proxy.p{n}",
                                      json.dumps({"n": n}).encode())
        assert arrived.wait(10), f"messages behind the hostile ones were lost: got {got}"
        assert sorted(got) == [0, 1, 2] and consumer.rejected == 2
        assert consumer.connected.is_set()
    finally:
        consumer.stop()
