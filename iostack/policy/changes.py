"""How a change to the policy store reaches every data-path cache.

The controller writes a change and ``announce``s it in the same MULTI: the
``version`` key is bumped and ``changed`` is published on ``<prefix>invalidate``.

The data path listens with a ``Subscription``, a Redis pub/sub subscription
kept alive in a background thread. The proxy cache trusts what it holds only
while it is subscribed to its invalidation channel (a message missed while
the connection was down could mean a stale answer); the policy reader reads
the whole state again on every message and every re-subscription, and keeps
enforcing its copy meanwhile. ``Subscription`` owns that loop once for all of them: it
subscribes, calls ``on_subscribed`` (whatever was cached before may have
missed messages), delivers every message to ``on_message``, and on any loss
calls ``on_lost``, then reconnects with exponential backoff (0.1 s up to
5 s). ``active`` says whether messages are flowing right now.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__name__)


def announce(pipe: redis.client.Pipeline, keys: KeySpace) -> None:
    """Queue the version bump and the invalidation message (inside a MULTI)."""
    pipe.incr(keys.version)
    pipe.publish(keys.invalidate, "changed")


class Subscription:
    def __init__(self, client: redis.Redis, channel: str,
                 on_message: Callable[[bytes | str], None],
                 on_subscribed: Callable[[], None], on_lost: Callable[[], None],
                 name: str) -> None:
        self.client = client
        self.channel = channel
        self.on_message = on_message
        self.on_subscribed = on_subscribed
        self.on_lost = on_lost
        self.name = name
        self._active = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def active(self) -> bool:
        return self._active.is_set()

    def wait_active(self, timeout: float) -> bool:
        return self._active.wait(timeout)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            pubsub = self.client.pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.channel)
                # redis-py would reconnect and subscribe again inside get_message, so
                # a broken connection (a Redis restart, a failover, a kill) would go
                # unnoticed and the messages sent meanwhile be lost without anyone
                # knowing: let the error through, to be handled below.
                pubsub.connection.retry = Retry(NoBackoff(), 0)
                self.on_subscribed()
                self._active.set()
                backoff = 0.1
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None and message.get("type") == "message":
                        self.on_message(message["data"])
            except (redis.RedisError, OSError) as exc:
                LOG.warning("%s: channel %s lost (%s); reconnecting", self.name, self.channel,
                            exc)
            except Exception:  # the listener must survive a bad callback
                LOG.exception("%s: listener failed; reconnecting", self.name)
            finally:
                self._active.clear()
                self.on_lost()
                pubsub.close()
            self._stop.wait(backoff)
            backoff = min(backoff * 2, 5.0)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=3)
