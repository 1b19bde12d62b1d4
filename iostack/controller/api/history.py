"""``/v1/policies/history``: every policy change, the difference between two versions,
one version, and a rollback to it."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from iostack.controller.api.base import (
    ctl,
    dry_run,
    redact,
    redact_params,
    require_admin,
)
from iostack.controller.api.policies import redact_result
from iostack.controller.registry import RegistryError

bp = Blueprint("history", __name__, url_prefix="/policies/history")


def history_entries(limit: int | None) -> list[dict[str, Any]]:
    """History entries, newest first, with the (redacted) text of the policies they name."""
    history = ctl().store.history
    entries = history.entries(limit)
    ids = {pid for e in entries for pid in e["added"] + e["removed"]}
    texts = {r["id"]: redact(r)["text"] for r in history.records(ids)}
    for entry in entries:
        for name in ("added", "removed"):
            entry[f"{name}_policies"] = [{"id": pid, "text": texts.get(pid, "")}
                                         for pid in entry[name]]
    return entries


def history_diff(old: int, new: int) -> dict[str, Any]:
    diff = ctl().store.history.diff(old, new)
    for name in ("policies_added", "policies_removed"):
        diff[name] = [redact(r) for r in diff[name]]
    for name in ("rules_added", "rules_removed"):
        redact_params(diff[name])
    return diff


def version_number(text: str | None, name: str) -> int:
    try:
        return int(text or "")
    except ValueError:
        raise RegistryError(f"{name} must be a history version number") from None


@bp.get("")
def policy_history():
    require_admin()
    limit = request.args.get("limit", type=int)
    return jsonify(history=history_entries(limit), count=ctl().store.history.count())


@bp.get("/diff")
def policy_history_diff():
    require_admin()
    return jsonify(history_diff(version_number(request.args.get("from"), "from"),
                                version_number(request.args.get("to"), "to")))


@bp.get("/<version>")
def policy_history_version(version: str):
    require_admin()
    history = ctl().store.history
    number = version_number(version, "version")
    entry = history.entry(number)
    change = history_diff(number - 1, number) if number > 0 else history_diff(0, 0)
    return jsonify(entry | {"policies": [redact(r) for r in history.policies_at(number)],
                            "rules_added": change["rules_added"],
                            "rules_removed": change["rules_removed"]})


@bp.post("/<version>/rollback")
def policy_rollback(version: str):
    principal = require_admin()
    result = ctl().store.rollback(version_number(version, "version"), who=principal.name,
                                  dry_run=dry_run())
    return jsonify(redact_result(result))
