"""The global SLO controller: split bandwidth SLOs among proxies, share capacity fairly.

Every closed proxy interval (``iostack.monitoring.aggregator``), for each
scope (a tenant, or a container with its own ``bandwidth`` policy) that
moved bytes or has a policy, and for each direction (``get``: bytes sent,
``put``: bytes received; ``ops``: requests):

1. Demand. Each proxy worker's usage of the scope in the interval; a worker
   that used (nearly) all it was assigned is taken to want twice as much (it
   is being shaped: its usage hides its demand); others want 20 % over what
   they used.
2. Scope totals (``allocate``). Without a configured capacity, a capped scope
   (``mode=max``) gets its cap and nothing else is shaped. With a capacity
   (``qos_capacity_get`` / ``qos_capacity_put``, bytes/s for the whole
   system) every active scope takes part: minimums (``mode=min``) first, as
   far as the capacity allows; then the rest is water-filled max-min fairly,
   weighted by ``share``, up to each scope's demand and cap; what is still
   left is shared the same way up to the caps. So (1) caps hold summed over all
   proxies, (2) minimums hold when capacity allows, (3) spare capacity is
   shared max-min fairly.
3. Per proxy (``split``). A scope's total is split among the workers that
   report metrics: a small floor each (traffic may move to any of them),
   the rest water-filled by their demands, where workers being shaped share
   what the others do not want equally (a stream that starts on a worker
   holding only the floor gets its fair share in the next interval). The
   parts add up to the total.

Assignments go out on ``<namespace>.qos`` (routing key ``qos.assign``) as
one message naming every worker's rates. The workers pace a scope's bytes
with one bucket shared through Redis at the sum of the parts (so the split
matters only when Redis cannot be reached) and its requests at their own
part (``iostack.swift_middleware.qos``); they apply a message within the
interval and keep it while they hear nothing new. Target vs achieved per scope is kept in Redis
(``qos`` hash) for ``GET /v1/qos`` and ``iostack qos status``.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from iostack.filters.builtin.bandwidth import DIRECTIONS, scope_of
from iostack.filters.library import get_filter
from iostack.monitoring.aggregator import Interval
from iostack.monitoring.bus import Publisher
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import RequestInfo, Resolution

LOG = logging.getLogger(__name__)
SATURATED = 0.8  # a worker using this much of its assignment is being shaped
PINNED = 0.95  # ... and this much: held at its rate, it gets an equal share next
GRANULARITY = 128 * 1024  # bytes/s: two 64 KiB chunks, what one interval's count can miss
PROBE = 2.0  # ... and is taken to want this much more
HEADROOM = 1.2  # others want this much over their usage
FLOOR = 0.05  # of a scope's total, split evenly among workers before the rest
MIN_DEMAND = 64 * 1024  # bytes/s a scope is never thought to want less than
EPSILON = 1e-6


def allocate(demand: Mapping[str, float], caps: Mapping[str, float],
             minimums: Mapping[str, float], shares: Mapping[str, float],
             capacity: float) -> dict[str, float]:
    """Rates per scope under ``capacity``: minimums, then weighted max-min fairness.

    ``caps``/``minimums`` hold only the scopes that have one; ``shares`` default to 1.
    Capacity left once every demand is met is shared the same way up to the caps,
    so no scope is held below what the system could give it.
    """
    cap = {t: caps.get(t, math.inf) for t in demand}
    alloc = {t: min(minimums.get(t, 0.0), demand[t], cap[t]) for t in demand}
    floor_total = sum(alloc.values())
    if floor_total > capacity:  # capacity cannot honour every minimum: scale them
        return {t: a * capacity / floor_total for t, a in alloc.items()}
    remaining = capacity - floor_total
    for ceiling in ({t: min(demand[t], cap[t]) for t in demand}, cap):
        remaining = _water_fill(alloc, ceiling, shares, remaining)
    return alloc


def _water_fill(alloc: dict[str, float], ceiling: Mapping[str, float],
                shares: Mapping[str, float], remaining: float) -> float:
    """Raise ``alloc`` in proportion to shares up to each ceiling; return what is left."""
    active = {t for t in alloc if ceiling[t] - alloc[t] > EPSILON}
    while remaining > EPSILON and active:
        weight = sum(shares.get(t, 1.0) for t in active)
        step = min(remaining / weight,
                   min((ceiling[t] - alloc[t]) / shares.get(t, 1.0) for t in active))
        for t in active:
            alloc[t] += step * shares.get(t, 1.0)
        remaining -= step * weight
        active = {t for t in active if ceiling[t] - alloc[t] > EPSILON}
    return remaining


def split(total: float, wants: Mapping[str, float],
          shaped: frozenset[str] = frozenset()) -> dict[str, float]:
    """``total`` among workers: an even floor, then water-filled by what each wants.

    ``shaped`` workers used all they had: their usage hides their demand, so
    they share what the others do not want equally (max-min fair at once,
    rather than doubling a small share interval after interval).
    """
    if not wants:
        return {}
    wants = {s: total if s in shaped else w for s, w in wants.items()}
    floor = total * FLOOR / len(wants)
    parts = {s: floor for s in wants}
    remaining = total - floor * len(wants)
    active = {s for s in wants if wants[s] > floor + EPSILON}
    while remaining > EPSILON and active:
        step = min(remaining / len(active), min(wants[s] - parts[s] for s in active))
        for s in active:
            parts[s] += step
        remaining -= step * len(active)
        active = {s for s in active if wants[s] - parts[s] > EPSILON}
    if remaining > EPSILON:  # everyone has what it wants: spread the rest evenly
        for s in parts:
            parts[s] += remaining / len(parts)
    return parts


@dataclass
class ScopeUse:
    """What one scope did in an interval, per worker, and its SLO."""

    slo: dict[str, Any] | None = None
    used: dict[str, dict[str, float]] = field(default_factory=dict)  # direction -> src -> /s


class QosController:
    """Runs on each closed proxy interval: assignments out, status into Redis."""

    def __init__(self, client: redis.Redis, keys: KeySpace,
                 resolve: Callable[[RequestInfo], Resolution], publisher: Publisher | None,
                 capacity: Mapping[str, float]) -> None:
        self.redis = client
        self.keys = keys
        self.resolve = resolve
        self.publisher = publisher
        self.capacity = {d: float(capacity.get(d) or 0) for d in ("get", "put")}
        self.assigned: dict[str, dict[str, dict[str, float]]] = {}  # src -> scope -> dir -> r
        self._validate = get_filter("bandwidth").validate

    def scopes(self, interval: Interval) -> dict[str, ScopeUse]:
        scopes: dict[str, ScopeUse] = {}
        for (source, account, container), (b_in, b_out, ops) in interval.by_source.items():
            try:
                entries = self.resolve(RequestInfo("GET", account, container)).pipeline
            except Exception as exc:  # noqa: BLE001 - one bad name must not stop the loop
                LOG.warning("QoS: no policy for %s/%s: %s", account, container, exc)
                continue
            entry = next((e for e in entries if e.filter == "bandwidth"), None)
            scope = scope_of(entry.sources, account, container) if entry else account
            use = scopes.setdefault(scope, ScopeUse())
            if entry is not None:
                use.slo = self._validate(entry.params)
            for direction, amount in zip(("put", "get", "ops"), (b_in, b_out, ops), strict=True):
                per = use.used.setdefault(direction, {})
                per[source] = per.get(source, 0.0) + amount / interval.seconds
        return scopes

    def _saturated(self, scope: str, direction: str, use: ScopeUse, source: str,
                   fraction: float = SATURATED) -> bool:
        used = use.used.get(direction, {}).get(source, 0.0)
        had = self.assigned.get(source, {}).get(scope, {}).get(direction)
        return had is not None and used >= min(fraction * had, had - GRANULARITY)

    def _wants(self, scope: str, direction: str, use: ScopeUse,
               sources: set[str]) -> dict[str, float]:
        wants = {}
        for source in sources:
            used = use.used.get(direction, {}).get(source, 0.0)
            had = self.assigned.get(source, {}).get(scope, {}).get(direction) or 0.0
            wants[source] = (max(used, had) * PROBE
                             if self._saturated(scope, direction, use, source)
                             else used * HEADROOM)
        return wants

    def on_interval(self, interval: Interval) -> None:
        if interval.stage != "proxy":
            return
        scopes = self.scopes(interval)
        sources = set(interval.sources)
        assigned: dict[str, dict[str, dict[str, float]]] = {s: {} for s in sources}
        status = {}
        for direction in DIRECTIONS:
            wants = {t: self._wants(t, direction, u, sources) for t, u in scopes.items()}
            totals = self._totals(direction, scopes, wants)
            for scope, total in totals.items():
                shaped = frozenset(s for s in sources if self._saturated(
                    scope, direction, scopes[scope], s, fraction=PINNED))
                for source, rate in split(total, wants[scope], shaped).items():
                    assigned[source].setdefault(scope, {})[direction] = round(rate, 3)
            for scope, use in scopes.items():
                row = status.setdefault(scope, {"interval": interval.start, "slo": use.slo})
                row[direction] = {"assigned": round(totals[scope], 1) if scope in totals
                                  else None,
                                  "achieved": round(sum(use.used.get(direction, {}).values()), 1)}
        self.assigned = assigned
        if self.publisher is not None:
            self.publisher.publish("qos.assign", {"v": 1, "interval": interval.start,
                                                  "sources": assigned})
        if status:
            self.redis.hset(self.keys.qos, mapping={k: json.dumps(v) for k, v in status.items()})

    def _totals(self, direction: str, scopes: dict[str, ScopeUse],
                wants: dict[str, dict[str, float]]) -> dict[str, float]:
        """Each shaped scope's rate over all proxies for one direction."""
        caps, minimums, shares = {}, {}, {}
        for scope, use in scopes.items():
            slo = use.slo or {}
            if slo.get(direction) and (direction == "ops" or slo.get("mode") == "max"):
                caps[scope] = float(slo[direction])
            elif slo.get(direction) and slo.get("mode") == "min":
                minimums[scope] = float(slo[direction])
            shares[scope] = float(slo.get("share", 1.0))
        capacity = self.capacity.get(direction, 0.0)
        if not capacity:
            return caps
        demand = {t: max(sum(w.values()), MIN_DEMAND, minimums.get(t, 0.0))
                  for t, w in wants.items()}
        return allocate(demand, caps, minimums, shares, capacity)

    def status(self) -> dict[str, Any]:
        return {scope: json.loads(raw) for scope, raw in self.redis.hgetall(self.keys.qos).items()}
