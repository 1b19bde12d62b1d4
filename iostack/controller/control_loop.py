"""The controller's metric-driven loop: consume metrics, aggregate them, act on them.

``ControlLoop`` owns a RabbitMQ consumer bound to ``metrics.#`` on the
stack's metrics exchange, the ``Aggregator`` it feeds, a ticker thread that
closes intervals whose grace has passed, and what runs on every closed proxy
interval: the ``ActorManager`` (dynamic policies) and the ``QosController``
(bandwidth SLOs split among proxies, published on ``<namespace>.qos``). The
REST API reads metrics from its aggregator (``GET /v1/metrics/<metric>/<target>``,
``GET /v1/monitoring``) and QoS status from its ``QosController`` (``GET /v1/qos``).

Config keys (controller JSON): ``amqp_url``; ``namespace`` (default: the
key prefix without its colon, ``iostack``); ``metrics_grace`` (0.5 s: how long
after an interval's end to wait for a silent proxy); ``metrics_history``
(300 intervals); ``actor_hold_seconds`` (5 s: how long a TRANSIENT policy's
condition must stay false before it is reverted); ``qos_capacity_get`` and
``qos_capacity_put`` (bytes/s the whole system moves each way; 0, the
default, means unknown: only caps are enforced).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis

from iostack.controller.actors import DEFAULT_HOLD, ActorManager
from iostack.controller.policy_store import PolicyStore
from iostack.controller.qos import QosController
from iostack.controller.registry import Registries
from iostack.monitoring.aggregator import Aggregator
from iostack.monitoring.bus import Consumer, Publisher, metrics_exchange, qos_exchange
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__name__)
TICK = 0.1  # seconds between checks for intervals past their grace


def namespace_of(config: dict[str, Any]) -> str:
    return config.get("namespace") or config.get("key_prefix", "iostack:").rstrip(":")


class ControlLoop:
    def __init__(self, config: dict[str, Any], client: redis.Redis, keys: KeySpace,
                 store: PolicyStore, registries: Registries) -> None:
        self.aggregator = Aggregator(grace=float(config.get("metrics_grace", 0.5)),
                                     history=int(config.get("metrics_history", 300)))
        self.actors = ActorManager(
            client, keys, store, groups=lambda: registries.vocabulary().groups,
            hold=float(config.get("actor_hold_seconds", DEFAULT_HOLD)))
        self.aggregator.on_interval(self.actors.on_interval)
        namespace = namespace_of(config)
        self.reader = PolicyReader(config["redis_url"], prefix=keys.prefix)
        self.qos_publisher = Publisher(config["amqp_url"], qos_exchange(namespace), buffer=4,
                                       name="iostack-controller-qos")
        self.qos = QosController(client, keys, self.reader.resolve, self.qos_publisher,
                                 {"get": config.get("qos_capacity_get", 0),
                                  "put": config.get("qos_capacity_put", 0)})
        self.aggregator.on_interval(self.qos.on_interval)
        self.consumer = Consumer(config["amqp_url"], metrics_exchange(namespace),
                                 ["metrics.#"], self.aggregator.add,
                                 name="iostack-controller-metrics")
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="iostack-metrics-ticker",
                                        daemon=True)

    def start(self) -> None:
        self.qos_publisher.start()
        self.consumer.start()
        self._ticker.start()

    def stop(self) -> None:
        self._stop.set()
        self.consumer.stop()
        self.qos_publisher.stop()
        self._ticker.join(2)
        self.reader.close()

    def _tick(self) -> None:
        while not self._stop.wait(TICK):
            try:
                self.aggregator.tick()
            except Exception:  # the ticker must keep running
                LOG.exception("closing metric intervals failed")
