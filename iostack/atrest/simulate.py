"""What a policy would do to the objects already stored under its targets.

``simulate`` walks the listings of the policy's targets and, for each object,
resolves the pipeline a PUT of it would get with the policy added to today's
rules: the rules in force as the proxies read them (``PolicyReader`` on the
proxies' policy store), plus the candidate's compiled rules at their levels
(``with_candidate``), through the same ``resolve`` as the data path, so
``TO`` conditions hold or fail as they would on a write; ``OBJECT_AGE`` is
the object's age at ``now`` (default: the present). One raw HEAD per
object gives its record and attributes (size, type, tags), so the objects
whose record differs from that pipeline (``inspect.differences``) are
counted exactly: those are what ``iostack reconcile`` would re-encode.

Projected stored bytes come from a sample: a uniform sample (reservoir,
seeded) of the changed objects is read as the tenant wrote it (its first
``sample_bytes`` bytes) and run through the pipeline's native encoders in
memory, filter by filter. The total is the ratio estimator
``sum(stored) / sum(logical)`` over the sample times the changed objects'
logical bytes, with a 95 % bound from its standard error and the finite
population correction; a sample that is the whole population is exact
(bound 0). The proxy-side CPU one object costs (reading and re-encoding it)
is measured on the sample and scaled to the changed bytes. Under ``SET
EXPIRY``, the objects a reconcile pass would give an (earlier)
``X-Delete-At`` are counted (``expiring_objects``), and those already past
it at ``now`` (``overdue_objects``, ``overdue_bytes``). Filters that run
in the sandbox are not run here: they count as keeping their input size,
and the answer names them.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from swift.common.swob import Request
from swift.common.utils import Timestamp

from iostack.atrest import scan
from iostack.atrest.inspect import StoredObject, differences, stored_object, today_layers
from iostack.atrest.swift_access import SwiftAccess, object_path
from iostack.filters.base import FilterContext, KeyProvider, keep_unchanged
from iostack.filters.builtin import expiry
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.filters.metadata import FilterMetadata
from iostack.policy.reader import PolicyReader
from iostack.policy.resolve import Level, PipelineEntry, RequestInfo, resolve
from iostack.policy.view import view_for

Z95 = 1.959964  # two-sided 95 % normal quantile
CANDIDATE_SEQ = 1 << 40  # the candidate's rules come after every rule in force at their level
Progress = Callable[[dict[str, Any]], None]


@dataclass
class Candidate:
    """The compiled rules of the simulated policies (dry-run or stored records)."""

    ids: set[str]
    rules: list[dict[str, Any]]

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Candidate:
        records = list(records)
        return cls({r["id"] for r in records}, [rule for r in records for rule in r["rules"]])

    def targets(self, groups: Mapping[str, list[str]]) -> list[scan.Target]:
        """What to list: each rule's target, groups expanded to their tenants, once each."""
        found: list[scan.Target] = []
        for rule in self.rules:
            level, target = rule["level"], rule["target"]
            if level == "group":
                found += [scan.Target(account) for account in groups.get(target, ())]
            elif level == "global":
                found.append(scan.Target(None))
            else:
                found.append(scan.Target.parse(target))
        if scan.Target(None) in found:
            return [scan.Target(None)]
        return [t for n, t in enumerate(found) if t not in found[:n] and not any(
            _covers(o, t) for o in found if o != t)]


def _covers(outer: scan.Target, inner: scan.Target) -> bool:
    return all(o is None or o == i for o, i in
               ((outer.account, inner.account), (outer.container, inner.container),
                (outer.obj, inner.obj))) and outer != inner


def with_candidate(levels: list[Level], candidate: Candidate, info: RequestInfo,
                   groups: Mapping[str, list[str]]) -> list[Level]:
    """Today's levels for ``info`` with the candidate's rules added after theirs."""
    member_of = {lv.target for lv in levels if lv.level == "group"} | {
        name for name, accounts in groups.items() if info.account in accounts}
    rules = {(lv.level, lv.target): list(lv.rules) for lv in levels}
    order = info.targets(sorted(member_of))
    present = {rule.get("id") for lv in levels for rule in lv.rules}
    for rule in candidate.rules:
        where = (rule["level"], rule["target"])
        if where in order and rule.get("id") not in present:
            rules.setdefault(where, []).append(rule | {"seq": CANDIDATE_SEQ + rule.get("seq", 0)})
    return [Level(level, target, tuple(rules[(level, target)]))
            for level, target in order if rules.get((level, target))]


def request_info(stored: StoredObject, now: float) -> RequestInfo:
    """The PUT of this object as the proxies would see it (its policy paths included),
    with the object's age at ``now`` for ``TO OBJECT_AGE``."""
    headers = {"Content-Length": str(stored.logical_bytes), "Content-Type": stored.content_type}
    headers |= {f"X-Object-Meta-{k}": v for k, v in stored.user_meta.items()}
    env = Request.blank(object_path(stored.account, stored.container, stored.obj),
                        environ={"REQUEST_METHOD": "PUT"}, headers=headers).environ
    age = max(0.0, now - float(Timestamp(stored.timestamp)))
    return dataclasses.replace(view_for(env).info, age=age)


def expiry_due(pipeline: list[PipelineEntry], stored: StoredObject) -> int | None:
    """The ``X-Delete-At`` a ``SET EXPIRY`` in ``pipeline`` gives a stored object: its last
    write (timestamp, Last-Modified) plus ``after``; None when there is no such rule or the
    object already goes as soon."""
    entry = next((e for e in pipeline if e.filter == expiry.METADATA.name), None)
    if entry is None:
        return None
    due = expiry.delete_at(expiry.SPEC.validate(entry.params), float(Timestamp(stored.timestamp)),
                           stored.delete_at)
    return None if stored.delete_at is not None and stored.delete_at <= due else due


def encoding_steps(pipeline: list[PipelineEntry]) -> list[PipelineEntry]:
    """Body-transforming entries in the order a PUT runs them: proxy layer, then object layer."""
    steps = [e for e in pipeline if e.sandboxed or get_filter(e.filter).transforms_body]
    return ([e for e in steps if e.sandboxed or e.stage != "object"]
            + [e for e in steps if not e.sandboxed and e.stage == "object"])


@dataclass
class Sampled:
    logical: int  # the object's whole length
    read: int  # bytes read and encoded
    after: list[int]  # bytes after each step, scaled to the whole object
    cpu: float  # seconds of this process's CPU to read and encode them


@dataclass
class Projection:
    """Reservoir sample of changed objects and the ratio estimate over them."""

    size: int
    rng: random.Random
    population: int = 0
    population_bytes: int = 0
    reservoir: list[tuple[StoredObject, list[PipelineEntry]]] = field(default_factory=list)

    def offer(self, stored: StoredObject, steps: list[PipelineEntry]) -> None:
        self.population += 1
        self.population_bytes += stored.logical_bytes
        if len(self.reservoir) < self.size:
            self.reservoir.append((stored, steps))
            return
        at = self.rng.randrange(self.population)
        if at < self.size:
            self.reservoir[at] = (stored, steps)

    def estimate(self, samples: list[Sampled], names: list[str]) -> dict[str, Any]:
        n, big_n, total_x = len(samples), self.population, self.population_bytes
        sum_x = sum(s.logical for s in samples)
        per_filter, bound = [], 0.0
        for k, name in enumerate(names):
            ys = [s.after[k] for s in samples]
            ratio = sum(ys) / sum_x if sum_x else 1.0
            error = _error_bound(samples, ys, ratio, big_n)
            per_filter.append({"filter": name, "projected_bytes": round(ratio * total_x),
                               "error_bound_bytes": error})
            bound = error
        cpu = sum(s.cpu for s in samples)
        return {
            "changed_projected_bytes": per_filter[-1]["projected_bytes"] if names else total_x,
            "error_bound_bytes": bound if names else 0,
            "per_filter": per_filter,
            "sample_size": n,
            "population": big_n,
            "cpu_seconds": round(cpu / sum_x * total_x, 3) if sum_x else 0.0,
        }


def _error_bound(samples: list[Sampled], ys: list[int], ratio: float, big_n: int) -> int | None:
    """The 95 % bound of the ratio estimate of the population total; None if not estimable."""
    n = len(samples)
    if n == big_n:
        return 0
    if n < 2:
        return None
    s2 = sum((y - ratio * s.logical) ** 2 for s, y in zip(samples, ys, strict=True)) / (n - 1)
    return math.ceil(Z95 * big_n * math.sqrt((1 - n / big_n) * s2 / n))


def _sample_one(access: SwiftAccess, stored: StoredObject, steps: list[PipelineEntry],
                keys: KeyProvider | None, limit: int) -> Sampled | None:
    started = time.thread_time()
    read = access.read(stored.account, stored.container, stored.obj,
                       limit=limit if stored.logical_bytes > limit else None)
    if read is None:
        return None  # deleted since it was listed
    body = read[1]
    context = FilterContext(stored.account, stored.container, stored.obj, keys)
    native = [(get_filter(step.filter), step) for step in steps if not step.sandboxed]
    encoders = [spec.encoder(step.params, context) for spec, step in native]
    changing = [encoder for (spec, _), encoder in zip(native, encoders, strict=True)
                if not spec.preserves_bytes]
    # As the proxy does: a body every filter would keep (random bytes under
    # compression) is stored as it came. A sandboxed filter always encodes.
    if len(native) == len(steps) and keep_unchanged(changing, lambda: [body]):
        after = [len(body)] * len(steps)
    else:
        chunks, after, made = [body], [], iter(encoders)
        for step in steps:  # a sandboxed step is counted as keeping the size
            if not step.sandboxed:
                chunks = list(next(made).encode(chunks))
            after.append(sum(len(c) for c in chunks))
    scale = stored.logical_bytes / len(body) if body else 1.0
    return Sampled(stored.logical_bytes, len(body), [round(a * scale) for a in after],
                   time.thread_time() - started)


def simulate(access: SwiftAccess, reader: PolicyReader, candidate: Candidate,
             groups: Mapping[str, list[str]], known_accounts: Iterable[str], *,
             keys: KeyProvider | None = None, sample_size: int = 100,
             sample_bytes: int = 4 << 20, seed: int = 0, limit: int | None = None,
             progress: Progress | None = None, every: float = 1.0,
             now: float | None = None) -> dict[str, Any]:
    """Impact of ``candidate`` over the objects its targets hold (see the module docstring)."""
    started = time.monotonic()
    known_accounts = list(known_accounts)
    totals = {"listed": 0, "objects": 0, "bytes": 0, "stored_bytes": 0, "changed_objects": 0,
              "changed_bytes": 0, "changed_stored_bytes": 0, "skipped": 0,
              "expiring_objects": 0, "overdue_objects": 0, "overdue_bytes": 0}
    projection = Projection(sample_size, random.Random(seed))  # noqa: S311 - a reproducible sample
    filters: Mapping[str, FilterMetadata] = {}
    truncated, shown = False, started
    for target in candidate.targets(groups):
        listed = scan.objects(access, target, known_accounts)
        if limit is not None:
            listed = itertools.islice(listed, limit - totals["listed"] + 1)
        for account, container, entry, headers in scan.with_headers(access, listed):
            if limit is not None and totals["listed"] >= limit:
                truncated = True
                break
            totals["listed"] += 1
            if headers is None:
                continue
            stored = stored_object(account, container, entry["name"], headers)
            at = now if now is not None else time.time()
            info = request_info(stored, at)
            levels, filters, object_types = reader.lookup(info)
            resolution = resolve(info, with_candidate(levels, candidate, info, groups),
                                 filters, object_types)
            if not any(n.policy in candidate.ids and n.outcome == "applied"
                       for n in resolution.notes):
                continue
            totals["objects"] += 1
            totals["bytes"] += stored.logical_bytes
            totals["stored_bytes"] += stored.stored_bytes
            if stored.kind != "object":
                totals["skipped"] += 1
                continue
            today = today_layers({"pipeline": [e.to_json() for e in resolution.pipeline]},
                                 filters)
            _count_expiry(totals, expiry_due(resolution.pipeline, stored), stored, at)
            if differences(stored, today, filters):
                totals["changed_objects"] += 1
                totals["changed_bytes"] += stored.logical_bytes
                totals["changed_stored_bytes"] += stored.stored_bytes
                projection.offer(stored, encoding_steps(resolution.pipeline))
            if progress and time.monotonic() - shown >= every:
                shown = time.monotonic()
                progress(dict(totals, phase="listing"))
        if truncated:
            break
    samples, names, not_projected = _run_sample(access, projection, keys, sample_bytes,
                                                progress, every)
    estimate = projection.estimate(samples, names)
    return totals | {
        "projected_stored_bytes": (totals["stored_bytes"] - totals["changed_stored_bytes"]
                                   + estimate["changed_projected_bytes"]),
        "projection": {k: v for k, v in estimate.items() if k != "cpu_seconds"}
        | {"confidence": 0.95, "sample_bytes_per_object": sample_bytes, "seed": seed,
           "not_projected": not_projected},
        "reconcile_cpu_seconds": estimate["cpu_seconds"],
        "truncated": truncated,
        "seconds": round(time.monotonic() - started, 3),
    }


def _count_expiry(totals: dict[str, int], due: int | None, stored: StoredObject,
                  now: float) -> None:
    """``SET EXPIRY``: objects a reconcile pass would give an (earlier) X-Delete-At, and
    those of them already past it (they go at the expirer's pass after it)."""
    if due is None:
        return
    totals["expiring_objects"] += 1
    if due <= now:
        totals["overdue_objects"] += 1
        totals["overdue_bytes"] += stored.logical_bytes


def _run_sample(access: SwiftAccess, projection: Projection, keys: KeyProvider | None,
                sample_bytes: int, progress: Progress | None, every: float
                ) -> tuple[list[Sampled], list[str], list[str]]:
    """Encode the reservoir; the step names of its first pipeline label the estimate.

    Samples whose pipeline differs from that one (rules with ``TO`` conditions
    give objects different pipelines) still count in the total, at their last step.
    """
    samples: list[Sampled] = []
    names: list[str] = []
    not_projected: set[str] = set()
    shown = time.monotonic()
    for n, (stored, steps) in enumerate(projection.reservoir, 1):
        if not names:
            names = [s.filter for s in steps]
        not_projected |= {s.filter for s in steps if s.sandboxed}
        try:
            sampled = _sample_one(access, stored, steps, keys, sample_bytes)
        except FilterError:
            sampled = None
        if sampled is None:
            continue
        width = len(names)
        sampled.after = (sampled.after + [sampled.after[-1] if sampled.after
                                          else sampled.logical] * width)[:width]
        samples.append(sampled)
        if progress and time.monotonic() - shown >= every:
            shown = time.monotonic()
            progress({"phase": "sampling", "sampled": n, "sample_size": len(projection.reservoir)})
    return samples, names, sorted(not_projected)
