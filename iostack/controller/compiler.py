"""From checked policies to rules, with the order and conflict checks.

A static policy becomes one rule per (target, action): the rule JSON stored
in ``rules:<level>:<target>`` (schema in ``docs/redis-keys.md``). A dynamic
policy (``WHEN``) gets the same rules computed and checked now, kept in its
record until its actor enforces them.

Checks, per target, over the rules already stored there plus the new ones
(from the filter metadata, nothing hard-coded):

- two different filters of one ``layout_group`` (both define the stored
  bytes) on one target: an error, unless both carry different ``TO``
  conditions, which may never meet (then a warning);
- ``ORDER n`` contradicting a filter's ``runs_before`` (compression after
  encryption compresses ciphertext): a warning, the forced order is kept;
- actions written in an order the metadata will change: a warning;
- a filter set again on a target where another policy (stored, or earlier
  in the same submission) set it: a warning saying which policy's
  parameters are overridden.

Wrong stage, method or parameters were already rejected by the checker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iostack.dsl.checker import CheckedPolicy
from iostack.dsl.errors import Diagnostic, DSLError
from iostack.filters.metadata import FilterMetadata


@dataclass
class Compiled:
    """Rules of one submission (policy id -> its rule JSON) and the warnings found."""

    rules: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # policy id -> rules
    warnings: list[Diagnostic] = field(default_factory=list)


def make_rules(policy: CheckedPolicy, pid: str, seq: int) -> list[dict[str, Any]]:
    """The rule JSON of one policy: one per target and action."""
    rules = []
    for level, target in policy.targets:
        for index, action in enumerate(policy.actions):
            rules.append(action.to_json() | {
                "id": f"{pid}.{len(rules) + 1}", "policy": pid, "seq": seq, "index": index,
                "level": level, "target": target, "object_conds": list(policy.object_conds),
                "line": action.line, "column": action.column,
            })
    return rules


def compile_policies(policies: list[tuple[str, int, CheckedPolicy]],
                     existing: dict[tuple[str, str], list[dict[str, Any]]],
                     filters: dict[str, FilterMetadata]) -> Compiled:
    """Rules for ``(id, seq, policy)`` triples, checked against ``existing`` rules per target."""
    out = Compiled()
    per_target: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pid, seq, policy in policies:
        out.rules[pid] = make_rules(policy, pid, seq)
        for rule in out.rules[pid]:
            per_target.setdefault((rule["level"], rule["target"]), []).append(rule)
        out.warnings += _text_order_warnings(policy, filters)
    errors: list[Diagnostic] = []
    for key, new in per_target.items():
        old = existing.get(key, [])
        errors += _layout_conflicts(key, old, new, filters, out.warnings)
        out.warnings += _forced_order_warnings(key, old, new, filters)
        out.warnings += _override_warnings(key, old, new)
    if errors:
        raise DSLError(errors)
    return out


def _active(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """SET rules still in force at one target once later DELETEs there are applied."""
    active: dict[str, list[dict[str, Any]]] = {}
    for rule in sorted(rules, key=lambda r: (r["seq"], r["index"])):
        if rule["verb"] == "delete":
            active.pop(rule["filter"], None)
        else:
            active.setdefault(rule["filter"], []).append(rule)
    return [r for group in active.values() for r in group]


def _where(key: tuple[str, str]) -> str:
    return f"{key[0]} {key[1]}"


def _layout_conflicts(key, old, new, filters, warnings) -> list[Diagnostic]:
    errors = []
    active = _active(old + new)
    new_ids = {r["id"] for r in new}
    for i, a in enumerate(active):
        for b in active[i + 1:]:
            group = filters[a["filter"]].layout_group
            if a["filter"] == b["filter"] or not group or \
                    filters[b["filter"]].layout_group != group or \
                    not ({a["id"], b["id"]} & new_ids):
                continue
            mine, other = (b, a) if b["id"] in new_ids else (a, b)
            message = (f"{mine['filter']} and {other['filter']} (policy {other['policy']}) both "
                       f"define the stored bytes ({group}) on {_where(key)}")
            if a["object_conds"] and b["object_conds"] and a["object_conds"] != b["object_conds"]:
                warnings.append(Diagnostic(mine["line"], mine["column"],
                                           message + ": only their TO conditions keep them apart"))
            else:
                errors.append(Diagnostic(mine["line"], mine["column"], message))
    return errors


def _forced_order_warnings(key, old, new, filters) -> list[Diagnostic]:
    warnings = []
    ordered = [r for r in _active(old + new) if r.get("order") is not None]
    new_ids = {r["id"] for r in new}
    for a in ordered:
        for b in ordered:
            if a["order"] < b["order"] and a["filter"] in filters[b["filter"]].runs_before \
                    and {a["id"], b["id"]} & new_ids:
                mine = b if b["id"] in new_ids else a
                warnings.append(Diagnostic(
                    mine["line"], mine["column"],
                    f"ORDER runs {a['filter']} before {b['filter']} on {_where(key)}, but "
                    f"{b['filter']} should run first (e.g. compressing encrypted data is "
                    f"pointless); kept as forced"))
    return warnings


def _text_order_warnings(policy: CheckedPolicy, filters) -> list[Diagnostic]:
    warnings = []
    sets = [a for a in policy.actions if a.verb == "set" and a.order is None]
    for i, first in enumerate(sets):
        for later in sets[i + 1:]:
            if first.filter in filters[later.filter].runs_before:
                warnings.append(Diagnostic(
                    later.line, later.column,
                    f"{later.filter} will run before {first.filter} (its metadata says so); "
                    f"write ORDER to force another order"))
    return warnings


def _override_warnings(key, old, new) -> list[Diagnostic]:
    warnings = []
    previous = {r["filter"]: r for r in _active(old) if not r["object_conds"]}
    # In submission order, so a filter set twice in one submission warns as across two.
    for rule in sorted(new, key=lambda r: (r["seq"], r["index"])):
        if rule["verb"] == "delete":
            previous.pop(rule["filter"], None)
            continue
        if rule["object_conds"]:
            continue
        prior = previous.get(rule["filter"])
        if prior:
            by = "earlier in this policy" if prior["policy"] == rule["policy"] else \
                f"by policy {prior['policy']}"
            warnings.append(Diagnostic(
                rule["line"], rule["column"],
                f"{rule['filter']} on {_where(key)} is already set {by}: "
                f"the parameters given here win, the others are inherited"))
        previous[rule["filter"]] = rule
    return warnings
