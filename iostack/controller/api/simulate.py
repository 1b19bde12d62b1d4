"""``/v1/simulate``: what a policy would do to the objects already stored (a job).

``POST /v1/simulate`` with ``{"text": "FOR CONTAINER AUTH_t1/logs DO SET
COMPRESSION"}`` (or ``{"id": "P7"}``, a stored policy), optionally
``limit``, ``sample`` and ``now``, answers ``202`` with the job
(``simulations``); ``GET /v1/simulate/<job>`` its progress and result.

Who: administrators simulate anything; a tenant (with a Swift token, it
names its ``account`` in the body, or ``?account=`` on the GET) only a
policy whose every target is in its own account (a tenant, or its containers and objects; not
a group, not everything), and reads only its own jobs. The text is
compiled first (a dry run, nothing stored): a DSL error is a 400 with its
line and column, before any job starts.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, request

from iostack.controller.api.base import authenticate, body, ctl
from iostack.controller.auth import AuthError, Principal, request_token
from iostack.controller.registry import RegistryError
from iostack.controller.simulations import SimulationError

bp = Blueprint("simulate", __name__)


def _options(data: dict[str, Any]) -> dict[str, Any]:
    if ("text" in data) == ("id" in data):
        raise RegistryError("give the policy as 'text' or a stored policy's 'id'")
    options: dict[str, Any] = {}
    for key in ("text", "id"):
        if key in data:
            if not isinstance(data[key], str) or not data[key].strip():
                raise RegistryError(f"field {key!r} must be a non-empty string")
            options[key] = data[key]
    for key, kind in (("limit", int), ("sample", int), ("now", (int, float))):
        value = data.get(key)
        if value is not None and (not isinstance(value, kind) or isinstance(value, bool)
                                  or value < 0):
            raise RegistryError(f"field {key!r} must be a non-negative number")
        options[key] = value
    return options


def _records(options: dict[str, Any]) -> list[dict[str, Any]]:
    store = ctl().store
    if "id" in options:
        return [store.get(options["id"])]
    return store.submit(options["text"], dry_run=True)["policies"]


def _account(records: list[dict[str, Any]]) -> str | None:
    """The one account every rule targets; None: a group, everything or several accounts."""
    accounts = {rule["target"].split("/", 1)[0] if rule["level"] in
                ("tenant", "container", "object") else None
                for record in records for rule in record["rules"]}
    return accounts.pop() if len(accounts) == 1 else None


def _owner(principal: Principal, records: list[dict[str, Any]]) -> str | None:
    """Whose job it is: None for an administrator's, the tenant's account for its own."""
    if principal.admin:
        return None
    if principal.account is None or _account(records) != principal.account:
        raise AuthError("a tenant may simulate policies on its own account only", 403)
    return principal.account


@bp.post("/simulate")
def start_simulation():
    if not request_token(request.headers):
        raise AuthError("authentication required: send X-Auth-Token")
    data = body()
    account = data.get("account")  # a tenant's Swift token is checked against its account
    if account is not None and not isinstance(account, str):
        raise RegistryError("field 'account' must be a string")
    principal = authenticate(account)
    options = _options(data)
    owner = _owner(principal, _records(options))
    try:
        job = ctl().simulations.start(owner, options)
    except SimulationError as exc:
        raise RegistryError(str(exc), exc.status) from None
    return jsonify(job.to_json()), 202, {"Location": f"/v1/simulate/{job.id}"}


@bp.get("/simulate/<job>")
def get_simulation(job: str):
    account = request.args.get("account")
    principal = authenticate(account)
    try:
        found = ctl().simulations.get(job, principal.account, principal.admin)
    except SimulationError as exc:
        raise RegistryError(str(exc), exc.status) from None
    return jsonify(found.to_json())
