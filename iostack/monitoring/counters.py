"""Per-interval workload counters of one server worker, and the batch they publish.

A ``Window`` counts, per (account, container), the requests of each method
that finished, the body bytes received and sent, a latency histogram per
method, and the requests in progress. ``Window.flush`` hands back the batch
for the interval that just ended (schema in ``docs/monitoring.md``) and
starts a new one. Counting is a few dict updates per request; the lock is
held only for those.

Latencies go into logarithmic buckets (``BUCKETS_PER_DOUBLING`` per factor of
two, from ``BUCKET_BASE`` seconds), so the controller can merge the histograms
of every proxy and read percentiles from the sum (``percentile``) instead of
averaging per-proxy percentiles, which would be wrong.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

BUCKET_BASE = 1e-4  # seconds: bucket 0 holds everything up to 100 µs
BUCKETS_PER_DOUBLING = 4  # ~19 % wide buckets
MAX_BUCKET = 120  # ~100 µs * 2**30: over a day

SCHEMA_VERSION = 1


def bucket_of(seconds: float) -> int:
    if seconds <= BUCKET_BASE:
        return 0
    return min(MAX_BUCKET, math.ceil(math.log2(seconds / BUCKET_BASE) * BUCKETS_PER_DOUBLING))


def bucket_upper(index: int) -> float:
    """The upper bound, in seconds, of a latency bucket."""
    return BUCKET_BASE * 2 ** (index / BUCKETS_PER_DOUBLING)


def percentile(buckets: Mapping[int, int], fraction: float) -> float | None:
    """The ``fraction`` quantile (0..1) of a histogram, as its bucket's upper bound."""
    total = sum(buckets.values())
    if total == 0:
        return None
    rank = max(1, math.ceil(fraction * total))
    seen = 0
    for index in sorted(buckets):
        seen += buckets[index]
        if seen >= rank:
            return bucket_upper(index)
    return bucket_upper(max(buckets))


@dataclass
class Latency:
    count: int = 0
    total: float = 0.0
    buckets: dict[int, int] = field(default_factory=dict)

    def add(self, seconds: float) -> None:
        self.count += 1
        self.total += seconds
        index = bucket_of(seconds)
        self.buckets[index] = self.buckets.get(index, 0) + 1

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "sum": round(self.total, 6),
                "buckets": {str(k): v for k, v in self.buckets.items()}}


@dataclass
class Counts:
    """What one (account, container) did in one interval."""

    ops: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    bytes_out: int = 0
    latency: dict[str, Latency] = field(default_factory=dict)

    def to_json(self, account: str, container: str | None, active: int) -> dict[str, Any]:
        return {"account": account, "container": container, "ops": dict(self.ops),
                "bytes_in": self.bytes_in, "bytes_out": self.bytes_out, "active": active,
                "latency": {m: lat.to_json() for m, lat in self.latency.items()}}


Key = tuple[str, str | None]


class Window:
    """The counters of the current interval of one worker.

    At most ``max_targets`` (account, container) pairs are tracked per
    interval, so a batch stays bounded however many containers clients
    touch; requests for further targets are not counted, only tallied in
    ``untracked`` (reported and reset by ``flush``).
    """

    def __init__(self, max_targets: int = 5000) -> None:
        self._lock = threading.Lock()
        self._counts: dict[Key, Counts] = {}
        self._active: dict[Key, int] = {}
        self.max_targets = max_targets
        self.untracked = 0

    def started(self, key: Key) -> bool:
        """Count a request as in progress; False (and nothing counted) over the cap."""
        with self._lock:
            # The union is built only near the cap: at every request it cost O(targets).
            if (key not in self._active and key not in self._counts
                    and len(self._counts) + len(self._active) >= self.max_targets
                    and len(self._counts.keys() | self._active.keys()) >= self.max_targets):
                self.untracked += 1
                return False
            self._active[key] = self._active.get(key, 0) + 1
            return True

    def transferred(self, key: Key, received: int = 0, sent: int = 0) -> None:
        """Body bytes as they move, so a long transfer counts in the intervals it spans."""
        with self._lock:
            counts = self._counts.get(key)
            if counts is None:
                counts = self._counts[key] = Counts()
            counts.bytes_in += received
            counts.bytes_out += sent

    def finished(self, key: Key, method: str, seconds: float) -> None:
        with self._lock:
            left = self._active.get(key, 1) - 1
            if left > 0:
                self._active[key] = left
            else:
                self._active.pop(key, None)
            counts = self._counts.get(key)
            if counts is None:
                counts = self._counts[key] = Counts()
            counts.ops[method] = counts.ops.get(method, 0) + 1
            latency = counts.latency.get(method)
            if latency is None:
                latency = counts.latency[method] = Latency()
            latency.add(seconds)

    def flush(self) -> list[dict[str, Any]]:
        """The samples of the interval that ended; the next interval starts empty."""
        with self._lock:
            counts, self._counts = self._counts, {}
            active = dict(self._active)
            self.untracked = 0
        keys = set(counts) | set(active)
        return [counts.get(key, Counts()).to_json(key[0], key[1], active.get(key, 0))
                for key in sorted(keys, key=lambda k: (k[0], k[1] or ""))]
