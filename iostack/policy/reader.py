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
- Cache: per (account, containers of ``policy_paths``), or per object for
  containers with object-level rules (a container's entry never answers for
  such an object), bounded LRU, entries expire after ``max_age`` seconds as
  a safety net.
- Fail closed: a store that cannot be read, or has no ``marker`` key (flushed,
  restarted empty), raises ``PolicyStoreUnavailable``; the callers decide
  (writes answer 503, selection and QoS fail open).
- Invalidation: every controller change publishes on ``<prefix>invalidate``;
  a background thread drops the whole cache on each message (changes are
  rare, requests many). While the subscription is down the cache is bypassed,
  so a reader never serves rules older than the last message it could miss.

Config (the middlewares' ``[filter:...]``, read by
``iostack.swift_middleware.shared_reader``): ``redis_url``, ``key_prefix``
(``iostack:``), ``policy_cache_size`` (10000 entries),
``policy_cache_max_age`` (30 s).
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

from iostack.filters.metadata import FilterMetadata
from iostack.policy.changes import Subscription
from iostack.policy.keys import DEFAULT_PREFIX, KeySpace
from iostack.policy.resolve import Level, RequestInfo, Resolution, resolve

LOG = logging.getLogger(__name__)

# KEYS: none (the key names derive from ARGV[1], the prefix; a single Redis, not a cluster).
# ARGV: prefix, account, JSON list of [container, object] pairs whose rules apply
# (most general first; "" for none), want vocabulary ("1"/"0")
SNAPSHOT_LUA = """
local p, acct = ARGV[1], ARGV[2]
local groups = redis.call('HGET', p .. 'tenant_groups', acct) or '[]'
local levels = {'global', '*', redis.call('HGETALL', p .. 'rules:global:*')}
for _, g in ipairs(cjson.decode(groups)) do
  table.insert(levels, 'group'); table.insert(levels, g)
  table.insert(levels, redis.call('HGETALL', p .. 'rules:group:' .. g))
end
table.insert(levels, 'tenant'); table.insert(levels, acct)
table.insert(levels, redis.call('HGETALL', p .. 'rules:tenant:' .. acct))
local objrules = 0
for _, pair in ipairs(cjson.decode(ARGV[3])) do
  local cont, obj = pair[1], pair[2]
  if cont ~= '' then
    for _, t in ipairs({'*/' .. cont, acct .. '/' .. cont}) do
      table.insert(levels, 'container'); table.insert(levels, t)
      table.insert(levels, redis.call('HGETALL', p .. 'rules:container:' .. t))
    end
    local here = redis.call('HEXISTS', p .. 'objrules', acct .. '/' .. cont)
    if here == 1 then objrules = 1 end
    if obj ~= '' and here == 1 then
      local t = acct .. '/' .. cont .. '/' .. obj
      table.insert(levels, 'object'); table.insert(levels, t)
      table.insert(levels, redis.call('HGETALL', p .. 'rules:object:' .. t))
    end
  end
end
local vocab = {}
if ARGV[4] == '1' then
  vocab = {redis.call('HGETALL', p .. 'filters'), redis.call('HGETALL', p .. 'object_types')}
end
return {redis.call('GET', p .. 'version') or '0', objrules, levels, vocab,
        redis.call('GET', p .. 'marker') or ''}
"""


class PolicyStoreUnavailable(RuntimeError):
    """The rules cannot be read (Redis unreachable, or its marker missing): nothing
    that changes stored bytes may proceed without them."""


@dataclass
class Snapshot:
    """What one round trip returns."""

    version: int
    object_rules: bool  # a container of the request has object-level rules
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
        pairs = [[c or "", o or ""] for c, o in request.policy_paths]
        version, objrules, flat, vocab, marker = self.script(args=[
            self.prefix, request.account, json.dumps(pairs), "1" if want_vocab else "0"])
        if not marker:
            raise PolicyStoreUnavailable(
                "the policy store has no marker (flushed, restarted empty, or never set up "
                "by a controller): its rules cannot be trusted")
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

    def __init__(self, redis_url: str | None = None, prefix: str = DEFAULT_PREFIX,
                 cache_size: int = 10000, max_age: float = 30.0, subscribe: bool = True,
                 client: redis.Redis | None = None) -> None:
        self.keys = KeySpace(prefix)
        self.redis = client or redis.Redis.from_url(redis_url, socket_timeout=5,
                                                    health_check_interval=30)
        self.snapshot = SnapshotScript(self.redis, prefix)
        self.cache_size = cache_size
        self.max_age = max_age
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple, tuple[float, bool, list[Level]]] = OrderedDict()
        self.lookups = 0  # calls to lookup (one per request on the data path)
        self.round_trips = 0  # of them, those that went to Redis
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
        """Levels and vocabulary for ``request``, from the cache or one round trip.

        Raises ``PolicyStoreUnavailable`` when Redis cannot be read or has no marker.
        """
        cacheable = self._subscription is not None and self._subscription.active
        now = time.monotonic()
        with self._lock:
            self.lookups += 1
            generation = self._generation
            vocab = self._vocab if cacheable else None
            if cacheable and vocab:
                hit = self._cached(request, now)
                if hit is not None:
                    return hit, vocab[0], vocab[1]
        try:
            snap = self.snapshot(request, want_vocab=vocab is None)
        except redis.RedisError as exc:
            raise PolicyStoreUnavailable(f"the policy store cannot be read: {exc}") from None
        with self._lock:
            self.round_trips += 1
        if snap.filters is not None:
            vocab = (snap.filters, snap.object_types)
        with self._lock:
            if cacheable and generation == self._generation:
                # A message that arrived during the round trip bumped the
                # generation: the answer may predate it, so it is not kept.
                self._vocab = vocab
                self._cache[self._key(request, snap.object_rules)] = (
                    now, snap.object_rules, snap.levels)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return snap.levels, vocab[0], vocab[1]

    def _cached(self, request: RequestInfo, now: float) -> list[Level] | None:
        # An entry cached without the object part serves an object request only
        # when none of its containers has object-level rules: a container
        # listing must never shadow ``FOR OBJECT`` rules.
        for key, for_object in ((self._key(request, False), False),
                                (self._key(request, True), True)):
            hit = self._cache.get(key)
            if (hit and now - hit[0] < self.max_age
                    and (for_object or request.obj is None or not hit[1])):
                self._cache.move_to_end(key)
                return hit[2]
        return None

    @staticmethod
    def _key(request: RequestInfo, with_object: bool) -> tuple:
        return (request.account, tuple((c, o if with_object else None)
                                       for c, o in request.policy_paths))

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
                    "lookups": self.lookups, "round_trips": self.round_trips,
                    "subscribed": bool(self._subscription and self._subscription.active)}
