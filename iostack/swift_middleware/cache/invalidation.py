"""Cross-proxy invalidation for the proxy cache: Redis pub/sub plus fill tickets.

Every proxy worker that runs the cache middleware owns one ``InvalidationBus``:

- ``publish(path)`` announces, on ``<key_prefix>cache:invalidate``, that an
  object was written (PUT, POST, DELETE) through this proxy; the message is
  the object's path (``/v1/<account>/<container>/<object>``), nothing else.
- A listener thread subscribes to that channel and, for every message (its
  own included), calls ``on_path(path)`` so the worker drops the entry from
  its cache directory.
- The cache is *trusted* only while the subscription is up. Whenever it is
  (re)established, messages may have been missed (the worker just started,
  or Redis went away for a while), so ``on_reset()`` drops everything first.

Fill tickets close the race between a miss that is filling the cache and a
write of the same object: a fill takes ``ticket()`` before it reads the
object from the object servers and may publish its entry only if
``still_valid(path, ticket)``, i.e. no invalidation of that path (and no
reset) was seen since. An invalidation that arrives after the commit removes
the entry anyway, so either way no stale entry survives a message.

Messages are plain UTF-8 paths, checked before use; nothing received is
evaluated or unpickled.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable

import redis

from iostack.policy.changes import Subscription
from iostack.policy.connection import connect
from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__name__)

CLIENT_NAME = "iostack-proxy-cache"
MAX_PATH_BYTES = 8192
# Paths whose last invalidation is remembered for fill tickets; when one is
# forgotten, fills that started before it are refused (conservative).
REMEMBERED_PATHS = 10000


def valid_path(path: str) -> bool:
    return path.startswith("/v1/") and path.count("/") >= 4 and len(path) <= MAX_PATH_BYTES


class InvalidationBus:
    """Publish this proxy's writes, apply everybody's, and hand out fill tickets."""

    def __init__(self, redis_url: str, prefix: str, on_path: Callable[[str], None],
                 on_reset: Callable[[], None], subscribe: bool = True,
                 client_name: str = CLIENT_NAME,
                 logger: logging.Logger | logging.LoggerAdapter = LOG) -> None:
        self.logger = logger
        self.channel = KeySpace(prefix).cache_invalidate
        # Named, so that an operator can tell the cache's subscriptions apart.
        self.redis = connect(redis_url, health_check_interval=30, client_name=client_name)
        self._on_path = on_path
        self._on_reset = on_reset
        self._lock = threading.Lock()
        self._seq = 0
        self._floor = 0  # tickets below this are void (a reset, or a forgotten path)
        self._changed: OrderedDict[str, int] = OrderedDict()
        # Subscribed from on_subscribed on; whatever happened before may be unknown.
        self._subscription = Subscription(
            self.redis, self.channel, self._message, self._reset, self._lost,
            "iostack-cache-bus") if subscribe else None

    @property
    def trusted(self) -> bool:
        """Whether cached entries may be served: no invalidation can have been missed."""
        return self._subscription is not None and self._subscription.active

    def wait_trusted(self, timeout: float) -> bool:
        return self._subscription is not None and self._subscription.wait_active(timeout)

    # -- fill tickets -------------------------------------------------------------

    def ticket(self) -> int:
        with self._lock:
            return self._seq

    def still_valid(self, path: str, ticket: int) -> bool:
        with self._lock:
            return ticket >= self._floor and self._changed.get(path, -1) < ticket

    # -- invalidation -------------------------------------------------------------

    def changed(self, path: str) -> None:
        """``path`` was (or is being) written: void running fills and drop the entry."""
        with self._lock:
            self._seq += 1
            self._changed[path] = self._seq
            self._changed.move_to_end(path)
            while len(self._changed) > REMEMBERED_PATHS:
                _, seq = self._changed.popitem(last=False)
                self._floor = max(self._floor, seq + 1)
            self._seq += 1  # tickets taken from now on are newer than this change
        self._on_path(path)

    def publish(self, path: str) -> bool:
        """Tell every proxy (this one included) that ``path`` changed."""
        try:
            self.redis.publish(self.channel, path.encode())
            return True
        except (redis.RedisError, OSError) as exc:
            # The write itself succeeded; other proxies keep serving their
            # entry until their own subscription drops and resets them.
            self.logger.error("IOStack cache: could not publish invalidation of %s: %s", path, exc)
            return False

    def _reset(self) -> None:
        with self._lock:
            self._seq += 1
            self._floor = self._seq
            self._changed.clear()
        self._on_reset()

    def _message(self, data: bytes | str) -> None:
        try:
            path = data.decode() if isinstance(data, bytes) else data
        except UnicodeDecodeError:
            path = ""
        if not valid_path(path):
            self.logger.warning("IOStack cache: ignoring invalidation message %r", data[:100])
            return
        self.changed(path)

    def _lost(self) -> None:
        with self._lock:
            self._seq += 1
            self._floor = self._seq  # fills running now might miss a message

    def close(self) -> None:
        if self._subscription:
            self._subscription.close()
        self.redis.close()
