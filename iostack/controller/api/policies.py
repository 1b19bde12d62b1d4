"""``/v1/policies``: add (atomically), validate, list, show and remove policies,
which version each proxy worker enforces (``/v1/policies/status``), and the
operator's revocation of the store's state (``/v1/policies/revocation``: PUT
with a reason, DELETE to reinstate; ``iostack.policy.reader``)."""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, jsonify, request

from iostack.controller.api.base import body, ctl, dry_run, field, redact, require_admin
from iostack.controller.convergence import policy_status

bp = Blueprint("policies", __name__, url_prefix="/policies")


def _policy_text() -> str:
    if request.mimetype == "text/plain":
        return request.get_data(as_text=True)
    return field(body(), "text")


def with_actors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Policy records with their actor's state (dynamic policies), secrets hidden."""
    controller = ctl()
    dynamic = [r["id"] for r in records if r.get("dynamic")]
    states = controller.redis.hmget(controller.keys.actors, dynamic) if dynamic else []
    actors = {pid: json.loads(raw) for pid, raw in zip(dynamic, states, strict=True) if raw}
    return [redact(r) | ({"actor": actors[r["id"]]} if r["id"] in actors else {})
            for r in records]


def redact_result(result: dict[str, Any]) -> dict[str, Any]:
    """A submission's or rollback's answer with secrets hidden."""
    for name in ("policies", "removed"):
        result[name] = [redact(r) for r in result.get(name, [])]
    return result


@bp.get("")
def list_policies():
    require_admin()
    return jsonify(policies=with_actors(ctl().store.list()))


@bp.post("")
def add_policies():
    principal = require_admin()
    checking = dry_run()
    text = _policy_text()
    result = ctl().store.submit(text, dry_run=checking, who=principal.name)
    return jsonify(redact_result(result)), (200 if checking else 201)


@bp.post("/validate")
def validate_policies():
    require_admin()
    result = ctl().store.submit(_policy_text(), dry_run=True)
    return jsonify(redact_result(result) | {"valid": True})


@bp.get("/status")
def status():
    require_admin()
    controller = ctl()
    return jsonify(policy_status(controller.redis, controller.keys))


@bp.put("/revocation")
def revoke():
    principal = require_admin()
    return jsonify(revoked=ctl().store.revoke(field(body(), "reason"), who=principal.name))


@bp.delete("/revocation")
def reinstate():
    require_admin()
    return jsonify(reinstated=ctl().store.reinstate())


@bp.get("/<pid>")
def get_policy(pid: str):
    require_admin()
    return jsonify(with_actors([ctl().store.get(pid)])[0])


@bp.delete("/<pid>")
def delete_policy(pid: str):
    principal = require_admin()
    return jsonify(deleted=redact(ctl().store.delete(pid, who=principal.name)))
