"""Data-path access to policies: one Redis round trip per cache miss, pub/sub invalidation.

The Swift middleware builds a ``RequestInfo`` for each request and calls
``PolicyReader.resolve(request)``, which returns the ordered pipeline (filter,
params, stage, sandboxed) computed by ``resolve.resolve``, the same code the
controller's ``explain`` runs.

- One round trip: a Lua script (``SNAPSHOT_LUA``) reads the rules of every
  level that concerns the request (global, the tenant's groups, the tenant,
  ``*/container``, the container, the object when the container has object
  rules), plus the filter metadata and object types when the reader has not
  cached them.
- Cache: per (account, container) (or per object for containers with
  object-level rules), bounded LRU, entries expire after ``max_age`` seconds
  as a safety net.
- Invalidation: every controller change publishes on ``<prefix>invalidate``;
  a background thread drops the whole cache on each message (changes are
  rare, requests many). While the subscription is down the cache is bypassed,
  so a reader never serves rules older than the last message it could miss.

Config (middleware): ``redis_url``, ``key_prefix`` (``iostack:``),
``cache_size`` (10000 entries), ``max_age`` (30 s).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import redis

from iostack.controller.keys import DEFAULT_PREFIX, KeySpace
from iostack.controller.resolve import Level, RequestInfo, Resolution, resolve
from iostack.controller.subscription import Subscription
from iostack.filters.metadata import FilterMetadata

LOG = logging.getLogger(__name__)

# KEYS: none (the key names derive from ARGV[1], the prefix; a single Redis, not a cluster).
# ARGV: prefix, account, container ("" for none), object ("" for none), want vocabulary ("1"/"0")
SNAPSHOT_LUA = """
local p, acct, cont, obj = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local groups = redis.call('HGET', p .. 'tenant_groups', acct) or '[]'
local levels = {'global', '*', redis.call('HGETALL', p .. 'rules:global:*')}
for _, g in ipairs(cjson.decode(groups)) do
  table.insert(levels, 'group'); table.insert(levels, g)
  table.insert(levels, redis.call('HGETALL', p .. 'rules:group:' .. g))
end
table.insert(levels, 'tenant'); table.insert(levels, acct)
table.insert(levels, redis.call('HGETALL', p .. 'rules:tenant:' .. acct))
local objrules = 0
if cont ~= '' then
  for _, t in ipairs({'*/' .. cont, acct .. '/' .. cont}) do
    table.insert(levels, 'container'); table.insert(levels, t)
    table.insert(levels, redis.call('HGETALL', p .. 'rules:container:' .. t))
  end
  objrules = redis.call('HEXISTS', p .. 'objrules', acct .. '/' .. cont)
  if obj ~= '' and objrules == 1 then
    local t = acct .. '/' .. cont .. '/' .. obj
    table.insert(levels, 'object'); table.insert(levels, t)
    table.insert(levels, redis.call('HGETALL', p .. 'rules:object:' .. t))
  end
end
local vocab = {}
if ARGV[5] == '1' then
  vocab = {redis.call('HGETALL', p .. 'filters'), redis.call('HGETALL', p .. 'object_types')}
end
return {redis.call('GET', p .. 'version') or '0', objrules, levels, vocab}
"""


@dataclass
class Snapshot:
    """What one round trip returns."""

    version: int
    object_rules: bool  # the container has object-level rules
    levels: list[Level]
    filters: dict[str, FilterMetadata] | None
    object_types: dict[str, list[str]] | None


def _pairs(flat: list[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def decode_vocab(filters: dict[str, str], object_types: dict[str, str]):
    return ({n: FilterMetadata.from_json(json.loads(v)) for n, v in filters.items()},
            {n: json.loads(v) for n, v in object_types.items()})


class SnapshotScript:
    """The registered Lua script (EVALSHA, reloaded by redis-py on NOSCRIPT)."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.prefix = prefix
        self.script = client.register_script(SNAPSHOT_LUA)

    def __call__(self, request: RequestInfo, want_vocab: bool) -> Snapshot:
        version, objrules, flat, vocab = self.script(args=[
            self.prefix, request.account, request.container or "", request.obj or "",
            "1" if want_vocab else "0"])
        levels = [Level(_s(flat[i]), _s(flat[i + 1]),
                        tuple(json.loads(v) for v in _pairs([_s(x) for x in flat[i + 2]]).values()))
                  for i in range(0, len(flat), 3)]
        filters = object_types = None
        if vocab:
            filters, object_types = decode_vocab(_pairs([_s(x) for x in vocab[0]]),
                                                 _pairs([_s(x) for x in vocab[1]]))
        return Snapshot(int(version), bool(objrules), levels, filters, object_types)


def _s(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class PolicyReader:
    """Resolve requests against the policies in Redis, with a cache kept fresh by pub/sub."""

    def __init__(self, redis_url: str, prefix: str = DEFAULT_PREFIX, cache_size: int = 10000,
                 max_age: float = 30.0, subscribe: bool = True) -> None:
        self.keys = KeySpace(prefix)
        self.redis = redis.Redis.from_url(redis_url, socket_timeout=5,
                                          health_check_interval=30)
        self.snapshot = SnapshotScript(self.redis, prefix)
        self.cache_size = cache_size
        self.max_age = max_age
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, tuple[float, list[Level]]] = OrderedDict()
        self._vocab: tuple[dict[str, FilterMetadata], dict[str, list[str]]] | None = None
        self._generation = 0
        # Every message drops the whole cache; so do (re)subscribing and losing the
        # channel, since a message may have been missed in between.
        self._subscription = Subscription(
            self.redis, self.keys.invalidate, lambda _data: self.invalidate(),
            self.invalidate, self.invalidate, "iostack-invalidate") if subscribe else None

    # -- the data path ----------------------------------------------------------

    def resolve(self, request: RequestInfo) -> Resolution:
        levels, filters, object_types = self.lookup(request)
        return resolve(request, levels, filters, object_types)

    def lookup(self, request: RequestInfo):
        """Levels and vocabulary for ``request``, from the cache or one round trip."""
        cacheable = self._subscription is not None and self._subscription.active
        now = time.monotonic()
        with self._lock:
            generation = self._generation
            vocab = self._vocab if cacheable else None
            for key in self._cache_keys(request):
                hit = self._cache.get(key) if cacheable else None
                if hit and now - hit[0] < self.max_age and vocab:
                    self._cache.move_to_end(key)
                    return hit[1], vocab[0], vocab[1]
        snap = self.snapshot(request, want_vocab=vocab is None)
        if snap.filters is not None:
            vocab = (snap.filters, snap.object_types)
        with self._lock:
            if cacheable and generation == self._generation:
                # A message that arrived during the round trip bumped the
                # generation: the answer may predate it, so it is not kept.
                self._vocab = vocab
                key = (request.account, request.container,
                       request.obj if snap.object_rules else None)
                self._cache[key] = (now, snap.levels)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return snap.levels, vocab[0], vocab[1]

    @staticmethod
    def _cache_keys(request: RequestInfo) -> list[tuple]:
        keys = [(request.account, request.container, None)]
        if request.obj:
            keys.append((request.account, request.container, request.obj))
        return keys

    def invalidate(self) -> None:
        with self._lock:
            self._generation += 1
            self._cache.clear()
            self._vocab = None

    # -- invalidation -----------------------------------------------------------

    def wait_subscribed(self, timeout: float = 5.0) -> bool:
        return self._subscription is not None and self._subscription.wait_active(timeout)

    def close(self) -> None:
        if self._subscription:
            self._subscription.close()
        self.redis.close()

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"entries": len(self._cache), "generation": self._generation,
                    "subscribed": bool(self._subscription and self._subscription.active)}
