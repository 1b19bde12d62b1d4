"""The policy store: atomic submissions, listing, removal and explain.

``submit(text)`` parses, checks and compiles every statement of the text
against the vocabulary and the rules already stored, then writes the policy
records, their rules, the classes defined and the version bump in one
``MULTI``: all or nothing. The reads happen under ``WATCH`` of the version
key, which every change bumps, so a concurrent change makes the transaction
retry with fresh data instead of writing rules checked against stale ones.

A policy record (``policies`` hash, JSON) holds the text, the checked form
(targets, condition, object conditions, actions), its rules, the warnings
and ``status``: ``active`` for static policies; ``stored`` for dynamic ones
while none of their rules is in force, ``enforced`` while some are, and
``in_force`` lists those rule ids. Policy actors (``actors``) call
``enforce``/``revert`` per target, which write or remove that target's rules
atomically, like any other change.

Every change to the policy set (submit, delete, rollback) is recorded in the
policy history in the same transaction, with who made it (``history``);
actors' enforce/revert events are recorded there too, for the console.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from swift.common.swob import Request

from iostack.controller.compiler import compile_policies
from iostack.controller.history import PolicyHistory
from iostack.controller.registry import Registries, RegistryError
from iostack.dsl.checker import check_text
from iostack.policy.changes import announce
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import Level, Resolution, resolve_block
from iostack.policy.view import RequestView, view_for

MAX_RETRIES = 20


def in_force_rules(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The rules of a policy record that are in ``rules:*`` now.

    Static policies: all of them. Dynamic ones: those their actor enforced
    (``in_force``; records written before per-target enforcement say only
    ``status: enforced``, meaning all).
    """
    if not record["dynamic"]:
        return record["rules"]
    if "in_force" not in record:
        return record["rules"] if record["status"] == "enforced" else []
    ids = set(record["in_force"])
    return [rule for rule in record["rules"] if rule["id"] in ids]


class PolicyStore:
    def __init__(self, client: redis.Redis, keys: KeySpace, registries: Registries) -> None:
        self.redis = client
        self.keys = keys
        self.registries = registries
        self._reader = PolicyReader(prefix=keys.prefix, live=True, client=client)
        self.history = PolicyHistory(client, keys)
        # Called after each committed change (the server journals the store there, so a
        # store lost right after a change is restored with it, not without it).
        self.after_commit: Callable[[], object] = lambda: None

    # -- submission -------------------------------------------------------------

    def submit(self, text: str, dry_run: bool = False, who: str = "") -> dict[str, Any]:
        """Add every policy and class in ``text`` atomically; ``DSLError`` if any is wrong.

        With ``dry_run`` nothing is written and ids are placeholders (``new-1``...).
        ``who`` is recorded in the policy history.
        """
        return self._change(lambda pipe: (text, []), dry_run, who, "add")

    def rollback(self, version: int, who: str = "", dry_run: bool = False) -> dict[str, Any]:
        """Make the policy set what it was right after history ``version``, atomically.

        Policies added since are removed, those removed since are checked and
        compiled again from their text (they get new ids), in one transaction.
        """
        self.history.entry(version)  # 404 for a version that does not exist
        return self._change(lambda pipe: self.history.rollback_plan(pipe, version), dry_run,
                            who, "rollback", note=f"rollback to version {version}")

    def _change(self, plan: Callable[[Any], tuple[str, list[str]]], dry_run: bool, who: str,
                op: str, note: str = "") -> dict[str, Any]:
        """One atomic change: ``plan(pipe)`` -> (policy text to add, policy ids to remove).

        The plan runs under WATCH of the version key, like every read the
        change is checked against; any concurrent change makes it run again.
        """
        for _ in range(MAX_RETRIES):
            with self.redis.pipeline() as pipe:
                try:
                    pipe.watch(self.keys.version)
                    text, remove = plan(pipe)
                    result, writes = self._prepare(pipe, text, dry_run, remove)
                    if dry_run or not writes:
                        return result
                    writes += self.history.writes(pipe, op, who, result["policies"],
                                                  remove, note)
                    pipe.multi()
                    for command, args in writes:
                        getattr(pipe, command)(*args)
                    announce(pipe, self.keys)
                    pipe.execute()
                    self.after_commit()
                    return result
                except redis.WatchError:
                    continue
        raise RegistryError("the policy store is too busy: try again", status=503)

    def _prepare(self, pipe, text: str, dry_run: bool, remove: list[str]):
        vocab = self.registries.vocabulary(pipe)
        checked = check_text(text, vocab)
        policies = checked.policies
        removed, writes = self._removal(pipe, remove)
        if dry_run or not policies:
            first = 0
        else:
            first = self.redis.incrby(self.keys.policy_seq, len(policies)) - len(policies)
        numbered = []
        for n, policy in enumerate(policies, start=1):
            pid = f"new-{n}" if dry_run else f"P{first + n}"
            numbered.append((pid, first + n, policy))
        targets = {t for p in policies for t in p.targets}
        # Rules of policies removed in this same change no longer count for conflicts.
        existing = {t: [r for r in rules if r.get("policy") not in remove]
                    for t, rules in self._rules_at(targets).items()}
        compiled = compile_policies(numbered, existing, vocab.filters)
        diagnostics = checked.warnings + compiled.warnings
        by_line: dict[int, list] = {}
        for diagnostic in diagnostics:
            by_line.setdefault(diagnostic.line, []).append(diagnostic)
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        records = []
        for pid, seq, policy in numbered:
            rules = compiled.rules[pid]
            mine = [d.to_json() for d in by_line.get(policy.line, ()) if policy.covers(d)]
            record = policy.to_json() | {
                "id": pid, "seq": seq, "created": now, "warnings": mine, "rules": rules,
                "status": "stored" if policy.dynamic else "active",
            }
            records.append(record)
            writes.append(("hset", (self.keys.policies, pid, json.dumps(record))))
            if not policy.dynamic:
                writes += self._rule_writes(rules)
        for qos in checked.classes:
            writes.append(("hset", (self.keys.classes, qos.name,
                                    json.dumps(qos.qos_class.to_json()))))
        result = {"policies": records, "warnings": [d.to_json() for d in diagnostics],
                  "dry_run": dry_run, "removed": removed,
                  "classes": [c.qos_class.to_json() for c in checked.classes]}
        return result, writes

    def _removal(self, pipe, pids: list[str]) -> tuple[list[dict[str, Any]], list]:
        """(records, writes) that remove policies ``pids`` and their rules in force.

        Removal writes come first in the transaction: object-rule counts are
        set to what is left, and rules added by the same change increment them after.
        """
        if not pids:
            return [], []
        records = []
        for pid, raw in zip(pids, pipe.hmget(self.keys.policies, pids), strict=True):
            if raw is None:
                raise RegistryError(f"no policy {pid!r}", status=404)
            records.append(json.loads(raw))
        rules = [rule for record in records for rule in in_force_rules(record)]
        writes = [("hdel", (self.keys.rules(r["level"], r["target"]), r["id"])) for r in rules]
        writes += self._count_writes(self._object_rule_counts(pipe, rules))
        writes.append(("hdel", (self.keys.policies, *pids)))
        return records, writes

    def _rules_at(self, targets) -> dict[tuple[str, str], list[dict[str, Any]]]:
        """Stored rules of each (level, target), read in one round trip.

        The read goes through another connection than the WATCHing one; the
        WATCH on the version key still catches any change made since.
        """
        targets = list(targets)
        pipe = self.redis.pipeline(transaction=False)
        for level, target in targets:
            pipe.hgetall(self.keys.rules(level, target))
        return {t: [json.loads(v) for v in rules.values()]
                for t, rules in zip(targets, pipe.execute(), strict=True)}

    def _rule_writes(self, rules, enforced: str | None = None):
        """Writes that put ``rules`` in force; an actor's enforce stamps each with
        ``enforced`` (fresh per enforce), so a rule reverted and enforced again
        is never byte-identical to its earlier self: what the data path derives
        from rules (the proxy cache's entry versions) cannot repeat."""
        writes = []
        for rule in rules:
            stored = rule | {"enforced": enforced} if enforced else rule
            writes.append(("hset", (self.keys.rules(rule["level"], rule["target"]), rule["id"],
                                    json.dumps(stored))))
            if rule["level"] == "object":
                container = rule["target"].rsplit("/", 1)[0]
                writes.append(("hincrby", (self.keys.objrules, container, 1)))
        return writes

    # -- reading ----------------------------------------------------------------

    def list(self) -> list[dict[str, Any]]:
        records = [json.loads(v) for v in self.redis.hgetall(self.keys.policies).values()]
        return sorted(records, key=lambda r: r["seq"])

    def get(self, pid: str) -> dict[str, Any]:
        raw = self.redis.hget(self.keys.policies, pid)
        if raw is None:
            raise RegistryError(f"no policy {pid!r}", status=404)
        return json.loads(raw)

    def for_tenant(self, account: str) -> list[dict[str, Any]]:
        """Policies that can apply to ``account``'s requests (what a tenant may read)."""
        groups = set(json.loads(self.redis.hget(self.keys.tenant_groups, account) or "[]"))

        def concerns(target: dict[str, str]) -> bool:
            kind, name = target["kind"], target["name"]
            return (kind == "global" or (kind == "tenant" and name == account)
                    or (kind == "group" and name in groups)
                    or (kind in ("container", "object")
                        and name.split("/", 1)[0] in (account, "*")))

        return [r for r in self.list() if any(concerns(t) for t in r["targets"])]

    def explain(self, method: str, path: str, headers: dict[str, str] | None = None,
                size: int | None = None) -> tuple[RequestView, Resolution]:
        """What the data path would run for a request: the same request view and the
        same lookup and resolution code (``iostack.policy.view``).

        ``path`` is quoted as a client sends it. On GET and HEAD, ``size`` and the
        headers (``Content-Type``, ``X-Object-Meta-*``) stand for the stored object's
        attributes, which the data path reads with a HEAD. ``ValueError`` for a path
        that is not ``/v1/<account>/...``; ``PolicyStoreUnavailable`` as on the data path.
        """
        headers = dict(headers or {})
        if size is not None:
            headers["Content-Length"] = str(size)
        env = Request.blank(path, environ={"REQUEST_METHOD": method.upper()},
                            headers=headers).environ
        view = view_for(env)
        if view is None:
            raise ValueError(f"not a Swift path: {path!r} (expected /v1/<account>/...)")
        return view, view.resolution(self._reader)

    def block_stack(self, volume: str, storage_group: str | None = None) -> Resolution:
        """The filter stack of a volume (for the block bridge and ``explain``)."""
        targets = ([("storage_group", storage_group)] if storage_group else []) + \
            [("volume", volume)]
        rules = self._rules_at(targets)
        levels = [Level(level, target, tuple(rules[(level, target)]))
                  for level, target in targets]
        return resolve_block(levels, self.registries.vocabulary().filters)

    # -- removal ----------------------------------------------------------------

    def delete(self, pid: str, who: str = "") -> dict[str, Any]:
        """Remove a policy and its rules atomically; return its record."""
        return self._change(lambda pipe: ("", [pid]), False, who, "delete")["removed"][0]

    # -- revocation ---------------------------------------------------------------

    def revoke(self, reason: str, who: str = "") -> dict[str, Any]:
        """Revoke the store's state: every node that applies this version refuses writes.

        For a store whose content is not to be trusted (written by someone
        who should not have, restored from a doubtful backup): nodes stop
        enforcing rules that may have been tampered with and fail closed
        instead, until ``reinstate``. Policies can still be changed meanwhile.
        """
        reason = " ".join(str(reason).split())[:200]
        if not reason:
            raise RegistryError("a revocation needs a reason (shown in every refusal)")
        record = {"reason": reason, "by": who, "at": time.time()}
        self._set_revocation(json.dumps(record))
        return record

    def reinstate(self) -> bool:
        """Lift a revocation; False when there was none."""
        return self._set_revocation(None)

    def _set_revocation(self, value: str | None) -> bool:
        pipe = self.redis.pipeline()
        if value is None:
            pipe.delete(self.keys.revoked)
        else:
            pipe.set(self.keys.revoked, value)
        announce(pipe, self.keys)
        changed = bool(pipe.execute()[0])
        self.after_commit()
        return changed

    # -- dynamic policies (for their actors) --------------------------------------

    def enforce(self, pid: str, target: tuple[str, str] | None = None) -> bool:
        """Write a dynamic policy's rules (of one ``(level, target)`` only, if given).

        False if they were all in force already.
        """
        return self._switch(pid, True, target)

    def revert(self, pid: str, target: tuple[str, str] | None = None,
               transient_only: bool = False) -> bool:
        """Remove a dynamic policy's rules in force (of one target; only TRANSIENT ones).

        False if none was in force.
        """
        return self._switch(pid, False, target, transient_only)

    def _switch(self, pid: str, on: bool, target: tuple[str, str] | None,
                transient_only: bool = False) -> bool:
        def switch(pipe: redis.client.Pipeline) -> bool:
            raw = pipe.hget(self.keys.policies, pid)
            if raw is None:
                raise RegistryError(f"no policy {pid!r}", status=404)
            record = json.loads(raw)
            if not record["dynamic"]:
                raise RegistryError(f"policy {pid} is static: it is always in force", 409)
            in_force = {rule["id"] for rule in in_force_rules(record)}
            chosen = [r for r in record["rules"]
                      if target is None or (r["level"], r["target"]) == tuple(target)]
            if on:
                change = [r for r in chosen if r["id"] not in in_force]
            else:
                change = [r for r in chosen if r["id"] in in_force
                          and (r.get("transient") or not transient_only)]
            if not change:
                return False
            counts = {} if on else self._object_rule_counts(pipe, change)
            events = [w for level, name in dict.fromkeys((r["level"], r["target"]) for r in change)
                      for w in self.history.event(pid, level, name, on)]
            pipe.multi()
            if on:
                for command, args in self._rule_writes(change, uuid.uuid4().hex):
                    getattr(pipe, command)(*args)
                in_force |= {r["id"] for r in change}
            else:
                for rule in change:
                    pipe.hdel(self.keys.rules(rule["level"], rule["target"]), rule["id"])
                for command, args in self._count_writes(counts):
                    getattr(pipe, command)(*args)
                in_force -= {r["id"] for r in change}
            record["in_force"] = [r["id"] for r in record["rules"] if r["id"] in in_force]
            record["status"] = "enforced" if in_force else "stored"
            pipe.hset(self.keys.policies, pid, json.dumps(record))
            for command, args in events:
                getattr(pipe, command)(*args)
            announce(pipe, self.keys)
            return True

        switched = self.redis.transaction(switch, self.keys.version, value_from_callable=True)
        if switched:
            self.after_commit()
        return switched

    def _count_writes(self, counts: dict[str, int]) -> list:
        return [("hset", (self.keys.objrules, container, left)) if left > 0
                else ("hdel", (self.keys.objrules, container))
                for container, left in counts.items()]

    def _object_rule_counts(self, client, rules) -> dict[str, int]:
        """Object-level rules each touched container keeps once ``rules`` are gone."""
        counts: dict[str, int] = {}
        for rule in rules:
            if rule["level"] == "object":
                container = rule["target"].rsplit("/", 1)[0]
                if container not in counts:
                    counts[container] = int(client.hget(self.keys.objrules, container) or 0)
                counts[container] -= 1
        return counts
