"""Policy history: every change to the policy set, who made it, and how to go back.

Each change the store commits (policies added, a policy deleted, a rollback)
appends one entry to the ``history`` list in the *same* transaction as the
change itself, so history and policy set can never disagree. An entry's
version is its position in the list: version 0 is the ``baseline`` (the
policies that existed when history began, written with the first change),
then 1, 2, ... Entries hold ids only::

    {"op": "add" | "delete" | "rollback" | "baseline", "who": "admin",
     "at": "2026-11-25T12:00:00Z", "time": 1795000000.0,
     "added": ["P7"], "removed": [], "note": "rollback to version 3"}

The records of every policy ever added stay in ``history:policies`` (id ->
the record as stored at submission), so the text and the compiled rules of
a deleted policy can still be shown, diffed and restored. The policy set at
version N is the baseline plus the adds minus the removals through N.

``rollback_plan`` turns "go back to version N" into one store change: the
policies to remove and the text of those to add again, which the store
checks and compiles like any submission and commits atomically (re-added
policies get new ids; classes are not part of the history).

Policy actors' enforce/revert events go to ``actor_events`` (newest first,
the last ``EVENTS_KEPT``), where the console draws them as chart markers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from typing import Any

import redis

from iostack.controller.registry import RegistryError
from iostack.policy.redis_keys import KeySpace

EVENTS_KEPT = 1000

Write = tuple[str, tuple[Any, ...]]


def now_iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def rule_key(rule: dict[str, Any]) -> str:
    """What a compiled rule does, without its ids: equal keys mean the same effect."""
    return json.dumps([rule["level"], rule["target"], rule["verb"], rule["filter"],
                       rule["params"], rule.get("stage"), rule.get("object_conds", []),
                       rule.get("methods", []), bool(rule.get("transient"))], sort_keys=True)


class PolicyHistory:
    """Reads and writes the ``history`` keys; the store calls ``writes`` in its transactions."""

    def __init__(self, client: redis.Redis, keys: KeySpace) -> None:
        self.redis = client
        self.keys = keys

    # -- writing (inside the store's WATCH/MULTI) ----------------------------------

    def writes(self, pipe: redis.client.Pipeline, op: str, who: str,
               added: list[dict[str, Any]], removed: Iterable[str],
               note: str = "") -> list[Write]:
        """The commands that record one change; ``pipe`` is still reading (WATCH mode)."""
        at = time.time()
        out: list[Write] = []
        if not pipe.exists(self.keys.history):
            # First change with history on: record what exists as version 0.
            current = pipe.hgetall(self.keys.policies)
            records = sorted((json.loads(v) for v in current.values()), key=lambda r: r["seq"])
            out += [("hsetnx", (self.keys.history_policies, r["id"], json.dumps(r)))
                    for r in records]
            out.append(("rpush", (self.keys.history, json.dumps({
                "op": "baseline", "who": "", "at": now_iso(at), "time": at,
                "added": [r["id"] for r in records], "removed": [], "note": ""}))))
        out += [("hset", (self.keys.history_policies, r["id"], json.dumps(r))) for r in added]
        out.append(("rpush", (self.keys.history, json.dumps({
            "op": op, "who": who, "at": now_iso(at), "time": at,
            "added": [r["id"] for r in added], "removed": list(removed), "note": note}))))
        return out

    def event(self, policy: str, level: str, target: str, on: bool) -> list[Write]:
        """The commands that record an actor's enforce (``on``) or revert of one target."""
        entry = {"time": time.time(), "policy": policy, "level": level, "target": target,
                 "state": "enforced" if on else "reverted"}
        return [("lpush", (self.keys.actor_events, json.dumps(entry))),
                ("ltrim", (self.keys.actor_events, 0, EVENTS_KEPT - 1))]

    # -- reading -------------------------------------------------------------------

    def events(self, since: float = 0.0) -> list[dict[str, Any]]:
        """Actor events newer than ``since`` (epoch seconds), newest first."""
        out = []
        for raw in self.redis.lrange(self.keys.actor_events, 0, -1):
            event = json.loads(raw)
            if event["time"] <= since:
                break
            out.append(event)
        return out

    def count(self) -> int:
        return self.redis.llen(self.keys.history)

    def entries(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Entries newest first (the last ``limit`` of them), each with its ``version``."""
        total = self.count()
        first = 0 if limit is None else max(0, total - limit)
        raw = self.redis.lrange(self.keys.history, first, -1)
        return [json.loads(e) | {"version": first + i} for i, e in enumerate(raw)][::-1]

    def entry(self, version: int) -> dict[str, Any]:
        raw = self.redis.lindex(self.keys.history, version) if version >= 0 else None
        if raw is None:
            raise RegistryError(f"no policy history version {version}", status=404)
        return json.loads(raw) | {"version": version}

    def records(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(ids)
        if not ids:
            return []
        raw = self.redis.hmget(self.keys.history_policies, ids)
        return [json.loads(r) for r in raw if r is not None]

    def ids_at(self, version: int, client: redis.Redis | None = None) -> list[str]:
        """Policy ids in force right after ``version`` (replayed from the baseline)."""
        client = client or self.redis
        raw = client.lrange(self.keys.history, 0, version) if version >= 0 else []
        if len(raw) <= version:
            raise RegistryError(f"no policy history version {version}", status=404)
        ids: dict[str, None] = {}  # ordered set
        for item in raw:
            entry = json.loads(item)
            for pid in entry["removed"]:
                ids.pop(pid, None)
            ids.update(dict.fromkeys(entry["added"]))
        return list(ids)

    def policies_at(self, version: int) -> list[dict[str, Any]]:
        return self.records(self.ids_at(version))

    def diff(self, old: int, new: int) -> dict[str, Any]:
        """Policies (by text) and compiled rules (by effect) in one version and not the other."""
        before, after = self.policies_at(old), self.policies_at(new)
        texts_before = {r["text"] for r in before}
        texts_after = {r["text"] for r in after}
        rules_before = {rule_key(x): x for r in before for x in r["rules"]}
        rules_after = {rule_key(x): x for r in after for x in r["rules"]}
        return {
            "from": old, "to": new,
            "policies_added": [r for r in after if r["text"] not in texts_before],
            "policies_removed": [r for r in before if r["text"] not in texts_after],
            "rules_added": [v for k, v in rules_after.items() if k not in rules_before],
            "rules_removed": [v for k, v in rules_before.items() if k not in rules_after],
        }

    def rollback_plan(self, pipe: redis.client.Pipeline, version: int) -> tuple[str, list[str]]:
        """(text of the policies to add again, ids to remove) to return to ``version``.

        Policies are matched by text: one whose text is in force already stays as it is.
        """
        wanted = self.records(self.ids_at(version, pipe))
        current = [json.loads(v) for v in pipe.hgetall(self.keys.policies).values()]
        current_texts = {r["text"] for r in current}
        wanted_texts = {r["text"] for r in wanted}
        remove = [r["id"] for r in sorted(current, key=lambda r: r["seq"])
                  if r["text"] not in wanted_texts]
        add = [r["text"] for r in wanted if r["text"] not in current_texts]
        return "\n".join(add), remove
