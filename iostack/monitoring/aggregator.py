"""Aggregation of metric batches from every proxy (and object server) per interval.

The controller feeds every batch it consumes (``add``) into an
``Aggregator``. Batches are grouped by stage and interval start; an interval
closes once every source seen recently has reported it, or ``grace`` seconds
after its end, whichever comes first (a dead proxy delays it by ``grace`` at
most). Batches for an interval already closed are counted as ``late`` and
dropped. Each closed interval (``Interval``) keeps the merged counters per
(account, container) and is handed to the listeners (the policy actors) and
kept in a short history (``history`` intervals) for the REST API.

Metric values (``METRICS``, the names the DSL knows) are computed on demand
for a target: ``*`` (everything), an account (``AUTH_t1``), a container
(``AUTH_t1/logs``, or ``*/logs`` in any account) or a set of accounts (a
group). Rates are per second of the interval; latency percentiles come from
the merged histograms; ``ACTIVE_REQUESTS`` is the sum of what each source had
in progress when its interval ended. A metric registered at run time
(``iostack metric add``) is read from the ``gauges`` of the samples (summed
over the target), which any publisher on the exchange may send.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from iostack.monitoring.counters import percentile
from iostack.monitoring.metric import Metric

LOG = logging.getLogger(__name__)

Key = tuple[str, "str | None"]

_METHODS = ("GET", "PUT", "DELETE", "HEAD", "POST")
METRICS: tuple[Metric, ...] = (
    *(Metric(f"{m}S_SEC", "number", f"{m} requests per second") for m in _METHODS),
    Metric("OPS_SEC", "number", "requests per second, all methods"),
    Metric("GET_BW", "rate", "bytes per second sent to clients (GET bodies)"),
    Metric("PUT_BW", "rate", "bytes per second received from clients (PUT bodies)"),
    Metric("ACTIVE_REQUESTS", "number", "requests in progress at the end of the interval"),
    Metric("LATENCY", "duration", "mean request latency, all methods"),
    *(Metric(f"{m}_LATENCY_P{p}", "duration", f"{p}th percentile of {m} latency")
      for m in ("GET", "PUT") for p in (50, 95, 99)),
    Metric("LATENCY_P95", "duration", "95th percentile of request latency, all methods"),
)


@dataclass
class Totals:
    """Counters merged over sources and (account, container) keys."""

    ops: collections.Counter = field(default_factory=collections.Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    active: int = 0
    latency_count: collections.Counter = field(default_factory=collections.Counter)
    latency_sum: collections.Counter = field(default_factory=collections.Counter)
    buckets: dict[str, collections.Counter] = field(default_factory=dict)
    gauges: collections.Counter = field(default_factory=collections.Counter)

    def add_sample(self, sample: dict[str, Any]) -> None:
        for method, count in sample.get("ops", {}).items():
            self.ops[str(method)] += int(count)
        self.bytes_in += int(sample.get("bytes_in", 0))
        self.bytes_out += int(sample.get("bytes_out", 0))
        self.active += int(sample.get("active", 0))
        for method, lat in sample.get("latency", {}).items():
            self.latency_count[method] += int(lat.get("count", 0))
            self.latency_sum[method] += float(lat.get("sum", 0.0))
            hist = self.buckets.setdefault(method, collections.Counter())
            for index, count in lat.get("buckets", {}).items():
                hist[int(index)] += int(count)
        for name, value in sample.get("gauges", {}).items():
            self.gauges[str(name).upper()] += float(value)

    def merge(self, other: Totals) -> None:
        self.ops.update(other.ops)
        self.bytes_in += other.bytes_in
        self.bytes_out += other.bytes_out
        self.active += other.active
        self.latency_count.update(other.latency_count)
        self.latency_sum.update(other.latency_sum)
        for method, hist in other.buckets.items():
            self.buckets.setdefault(method, collections.Counter()).update(hist)
        self.gauges.update(other.gauges)

    def value(self, metric: str, seconds: float) -> float | None:
        """The metric's value over an interval of ``seconds``; None where it has no data."""
        if metric.endswith("S_SEC") and metric[:-5] in _METHODS:
            return self.ops[metric[:-5]] / seconds
        if metric == "OPS_SEC":
            return sum(self.ops.values()) / seconds
        if metric == "GET_BW":
            return self.bytes_out / seconds
        if metric == "PUT_BW":
            return self.bytes_in / seconds
        if metric == "ACTIVE_REQUESTS":
            return float(self.active)
        if metric == "LATENCY":
            count = sum(self.latency_count.values())
            return sum(self.latency_sum.values()) / count if count else None
        if "_P" in metric and metric.startswith(("GET_LATENCY", "PUT_LATENCY", "LATENCY")):
            prefix, pct = metric.rsplit("_P", 1)
            if prefix == "LATENCY":
                hist: collections.Counter = collections.Counter()
                for method_hist in self.buckets.values():
                    hist.update(method_hist)
            else:
                hist = self.buckets.get(prefix.split("_")[0], collections.Counter())
            return percentile(hist, int(pct) / 100)
        # Metrics registered at run time are gauges other publishers send.
        return self.gauges.get(metric)


@dataclass
class Interval:
    """One closed interval of one stage, merged over its sources."""

    stage: str
    start: float
    seconds: float
    per_key: dict[Key, Totals] = field(default_factory=dict)
    sources: set[str] = field(default_factory=set)
    lost: int = 0
    # (source, account, container) -> [bytes_in, bytes_out, requests]: what each proxy
    # carried, for the QoS controller's per-proxy assignments.
    by_source: dict[tuple[str, str, str | None], list[int]] = field(default_factory=dict)

    def totals(self, select: Callable[[Key], bool]) -> Totals:
        out = Totals()
        for key, totals in self.per_key.items():
            if select(key):
                out.merge(totals)
        return out

    def value(self, metric: str, target: str | Iterable[str]) -> float | None:
        """``metric`` for a target: ``*``, ``AUTH_t1``, ``AUTH_t1/c``, ``*/c``, or accounts."""
        return self.totals(selector(target)).value(metric, self.seconds)

    def targets(self) -> dict[str, Totals]:
        """Totals per tenant and per container present in this interval, and ``*``."""
        out: dict[str, Totals] = {"*": Totals()}
        for (account, container), totals in self.per_key.items():
            names = [account] + ([f"{account}/{container}"] if container else [])
            for name in names:
                out.setdefault(name, Totals()).merge(totals)
            out["*"].merge(totals)
        return out


def selector(target: str | Iterable[str]) -> Callable[[Key], bool]:
    """Which (account, container) keys a metric target covers."""
    if not isinstance(target, str):
        accounts = frozenset(target)
        return lambda key: key[0] in accounts
    if target == "*":
        return lambda key: True
    if "/" in target:
        account, container = target.split("/", 1)
        if account == "*":
            return lambda key: key[1] == container
        return lambda key: key == (account, container)
    return lambda key: key[0] == target


class Aggregator:
    """Merge batches per stage and interval; close intervals; keep a short history."""

    def __init__(self, grace: float = 0.5, history: int = 300,
                 clock: Callable[[], float] = time.time) -> None:
        self.grace = grace
        self.clock = clock
        self._lock = threading.Lock()
        self._open: dict[tuple[str, float], Interval] = {}
        self._closed_until: dict[str, float] = {}
        self._last_seen: dict[str, dict[str, float]] = {}  # stage -> source -> when
        self.history: dict[str, collections.deque[Interval]] = {}
        self._history_len = history
        self._listeners: list[Callable[[Interval], None]] = []
        self.received = 0
        self.late = 0
        self.lost = 0

    def on_interval(self, listener: Callable[[Interval], None]) -> None:
        self._listeners.append(listener)

    # -- input --------------------------------------------------------------------

    def add(self, routing_key: str, message: dict[str, Any]) -> None:
        """One batch (the consumer's handler); malformed batches raise ``ValueError``."""
        try:
            stage, source = str(message["stage"]), str(message["source"])
            start, seconds = float(message["start"]), float(message["interval"])
            samples = message["samples"]
            if not isinstance(samples, list) or seconds <= 0:
                raise ValueError("bad samples or interval")
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed metric batch on {routing_key}: {exc}") from None
        closed: list[Interval] = []
        with self._lock:
            self.received += 1
            self.lost += int(message.get("lost", 0))
            self._last_seen.setdefault(stage, {})[source] = self.clock()
            if start < self._closed_until.get(stage, float("-inf")):
                self.late += 1
                return
            interval = self._open.get((stage, start))
            if interval is None:
                interval = self._open[(stage, start)] = Interval(stage, start, seconds)
            interval.sources.add(source)
            interval.lost += int(message.get("lost", 0))
            for sample in samples:
                key = (str(sample["account"]), sample.get("container"))
                interval.per_key.setdefault(key, Totals()).add_sample(sample)
                used = interval.by_source.setdefault((source, *key), [0, 0, 0])
                used[0] += int(sample.get("bytes_in", 0))
                used[1] += int(sample.get("bytes_out", 0))
                used[2] += sum(int(n) for n in sample.get("ops", {}).values())
            if interval.sources >= self._live_sources(stage, seconds):
                closed = self._close_through(stage, start)
        self._notify(closed)

    def tick(self) -> None:
        """Close intervals whose grace has passed (called a few times a second)."""
        now = self.clock()
        closed: list[Interval] = []
        with self._lock:
            for (stage, start), interval in sorted(self._open.items(), key=lambda i: i[0][1]):
                if start + interval.seconds + self.grace <= now:
                    closed += self._close_through(stage, start)
        self._notify(closed)

    def _live_sources(self, stage: str, seconds: float) -> set[str]:
        # Sources heard from within three intervals are expected to report.
        horizon = self.clock() - 3 * seconds - self.grace
        return {s for s, when in self._last_seen.get(stage, {}).items() if when >= horizon}

    def _close_through(self, stage: str, start: float) -> list[Interval]:
        """Close every open interval of ``stage`` up to ``start`` (older ones first)."""
        closed = []
        for key in sorted(k for k in self._open if k[0] == stage and k[1] <= start):
            interval = self._open.pop(key)
            closed.append(interval)
            self.history.setdefault(stage, collections.deque(maxlen=self._history_len)).append(
                interval)
        self._closed_until[stage] = max(self._closed_until.get(stage, start), start + 1e-9)
        return closed

    def _notify(self, closed: list[Interval]) -> None:
        for interval in closed:
            for listener in self._listeners:
                try:
                    listener(interval)
                except Exception:  # one listener must not starve others
                    LOG.exception("metric listener failed on interval %s", interval.start)

    # -- output -------------------------------------------------------------------

    def series(self, metric: str, target: str | Iterable[str], stage: str = "proxy",
               last: int | None = None) -> list[tuple[float, float | None]]:
        """``(interval start, value)`` of ``metric`` for ``target`` over the history."""
        with self._lock:
            intervals = list(self.history.get(stage, ()))
        if last is not None:
            intervals = intervals[-last:]
        return [(i.start, i.value(metric, target)) for i in intervals]

    def intervals(self, stage: str = "proxy", since: float | None = None,
                  last: int | None = None) -> list[Interval]:
        """Closed intervals of ``stage`` that start after ``since`` (the last ``last`` of them)."""
        with self._lock:
            intervals = list(self.history.get(stage, ()))
        if since is not None:
            intervals = [i for i in intervals if i.start > since]
        return intervals[-last:] if last is not None else intervals

    def latest(self, stage: str = "proxy") -> Interval | None:
        with self._lock:
            history = self.history.get(stage)
            return history[-1] if history else None

    def sources(self) -> dict[str, list[str]]:
        with self._lock:
            return {stage: sorted(seen) for stage, seen in self._last_seen.items()}
