"""Policy actors: dynamic policies (``WHEN``) enforced and reverted from live metrics.

Every dynamic policy has an actor; an ``ActorManager`` runs them all on each
interval the metric aggregator closes (``iostack.monitoring.aggregator``).
An actor evaluates its policy's condition (comparisons joined by ``AND`` /
``OR``) per target of the policy, on that target's metrics for the interval:

- the condition holds and the target's rules are not in force: the actor
  writes them (``PolicyStore.enforce``, the same atomic path as static
  policies), so the data path applies them within a policy-cache
  invalidation (well under a second);
- it stops holding and the policy has ``TRANSIENT`` actions: once it has not
  held for ``hold`` seconds (hysteresis, so a noisy metric does not flap) the
  actor removes the transient rules (``PolicyStore.revert``); actions without
  ``TRANSIENT`` stay, as the paper's "turn compression on" does.

Targets map to metrics as follows: ``ALL`` -> everything, ``TENANT`` -> its
account, ``CONTAINER`` -> that container (``*/c`` in any account),
``GROUP`` -> the sum over its tenants, ``OBJECT`` -> its container (metrics
are not kept per object). A metric with no data (a latency percentile with
no request) makes its comparison false. Volume targets have no metrics yet:
their actor reports that and waits.

Actor state lives in Redis (``actors`` hash, JSON per policy: per target
``state``, ``since``, ``applied``, ``false_since``, last ``values``; the
policy's ``error`` if any), so a restarted controller resumes every actor
where it left off. A policy that was deleted loses its actor (the store
already removed its rules). One actor's failure is logged and recorded in
its state; the others run on.
"""

from __future__ import annotations

import json
import logging
import operator
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from iostack.controller.policy_store import PolicyStore, in_force_rules
from iostack.monitoring.aggregator import Interval
from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__name__)

COMPARE: dict[str, Callable[[float, float], bool]] = {
    ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le,
    "==": operator.eq, "=": operator.eq, "!=": operator.ne,
}
DEFAULT_HOLD = 5.0


def metrics_of(condition: dict[str, Any]) -> list[str]:
    if "metric" in condition:
        return [condition["metric"]]
    return metrics_of(condition["left"]) + metrics_of(condition["right"])


def holds(condition: dict[str, Any], values: dict[str, float | None]) -> bool:
    """Evaluate a checked condition on metric values (None: no data, comparison false)."""
    if "metric" in condition:
        value = values.get(condition["metric"])
        return value is not None and COMPARE[condition["op"]](value, condition["value"])
    left = holds(condition["left"], values)
    if condition["op"] == "AND":
        return left and holds(condition["right"], values)
    return left or holds(condition["right"], values)


def metric_target(kind: str, name: str, groups: dict[str, list[str]]) -> str | list[str] | None:
    """What to measure for a policy target (see the module docstring); None: not measured."""
    if kind == "global":
        return "*"
    if kind in ("tenant", "container"):
        return name
    if kind == "object":
        return name.rsplit("/", 1)[0]
    if kind == "group":
        return groups.get(name, [])
    return None


def target_key(kind: str, name: str) -> str:
    return f"{kind}:{name}"


class ActorManager:
    """Runs the actor of every dynamic policy on each closed interval."""

    def __init__(self, client: redis.Redis, keys: KeySpace, store: PolicyStore,
                 groups: Callable[[], dict[str, list[str]]], hold: float = DEFAULT_HOLD,
                 stage: str = "proxy", clock: Callable[[], float] = time.time) -> None:
        self.redis = client
        self.keys = keys
        self.store = store
        self.groups = groups
        self.hold = hold
        self.stage = stage
        self.clock = clock
        self._lock = threading.Lock()  # one interval at a time
        self._dynamic: list[dict[str, Any]] = []
        self._version: str | None = None

    def _dynamic_policies(self) -> list[dict[str, Any]]:
        # Every change (a policy added or removed, an actor's enforce) bumps the
        # version: re-read the records only then, not on every interval.
        version = self.redis.get(self.keys.version)
        if version is None or version != self._version:
            self._dynamic = [r for r in self.store.list() if r["dynamic"]]
            self._version = version
        return self._dynamic

    def states(self) -> dict[str, dict[str, Any]]:
        return {pid: json.loads(raw) for pid, raw in self.redis.hgetall(self.keys.actors).items()}

    def on_interval(self, interval: Interval) -> None:
        if interval.stage != self.stage:
            return
        with self._lock:
            policies = self._dynamic_policies()
            states = self.states()
            groups = self.groups()
            updated = {}
            for record in policies:
                state = states.get(record["id"]) or {"policy": record["id"], "targets": {}}
                try:
                    self._run(record, state, interval, groups)
                    state.pop("error", None)
                except Exception as exc:  # isolate actors from each other
                    LOG.exception("actor of policy %s failed", record["id"])
                    state["error"] = f"{type(exc).__name__}: {exc}"
                state["interval"] = interval.start
                updated[record["id"]] = json.dumps(state)
            gone = set(states) - set(updated)
            pipe = self.redis.pipeline()
            if updated:
                pipe.hset(self.keys.actors, mapping=updated)
            if gone:
                pipe.hdel(self.keys.actors, *gone)
            pipe.execute()

    def _run(self, record: dict[str, Any], state: dict[str, Any], interval: Interval,
             groups: dict[str, list[str]]) -> None:
        condition = record["condition"]
        names = metrics_of(condition)
        in_force = {r["id"] for r in in_force_rules(record)}
        now = self.clock()
        for target in record["targets"]:
            kind, name = target["kind"], target["name"]
            entry = state["targets"].setdefault(target_key(kind, name), {"state": "idle"})
            measured = metric_target(kind, name, groups)
            if measured is None:
                entry["state"] = "unmeasured"
                entry["note"] = f"no metrics are collected for {kind} targets"
                continue
            values = {m: interval.value(m, measured) for m in names}
            entry["values"] = values
            rules = [r for r in record["rules"] if (r["level"], r["target"]) == (kind, name)]
            if holds(condition, values):
                entry["false_since"] = None
                if any(r["id"] not in in_force for r in rules):
                    self.store.enforce(record["id"], (kind, name))
                    entry.update(state="enforced", since=now, applied=now,
                                 interval_applied=interval.start)
                    LOG.info("policy %s enforced on %s %s: %s", record["id"], kind, name,
                             values)
                continue
            if not any(r["id"] in in_force and r.get("transient") for r in rules):
                continue
            if entry.get("false_since") is None:
                entry["false_since"] = now
            if now - entry["false_since"] >= self.hold:
                self.store.revert(record["id"], (kind, name), transient_only=True)
                entry.update(state="reverted", since=now, false_since=None)
                LOG.info("policy %s reverted on %s %s: %s", record["id"], kind, name, values)
