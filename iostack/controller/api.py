"""The controller's REST API (Flask), under ``/v1``.

Every route except ``/v1/health`` and ``/v1/openapi.json`` needs a token
(see ``auth``). Administrators use everything; a tenant may read only its
own effective policies (``GET /v1/tenants/<account>/policies``) and explain
requests to its own account. Errors are JSON ``{"error": message, "status":
code}``, with ``diagnostics`` (line, column, message) for policy text.
Bodies larger than ``max_body_bytes`` (default 1 MiB) get 413. Parameters of
type ``secret`` are shown as ``***`` in every answer but one: the block
bridge's ``GET /v1/volumes/<volume>/stack`` (administrators only, not cached),
since the bridge must load the very key a ``FOR VOLUME v DO SET AES_XTS WITH
key=...`` policy gives.

The OpenAPI document (``openapi.py``) is served at ``/v1/openapi.json``; a
test keeps it and the routes in step.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import redis
from flask import Blueprint, Flask, Response, current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from iostack.controller.auth import Authenticator, AuthError, Principal, request_token
from iostack.controller.control_loop import ControlLoop
from iostack.controller.openapi import openapi_document
from iostack.controller.registry import Registries, RegistryError
from iostack.controller.store import PolicyStore
from iostack.dsl.errors import DSLError
from iostack.policy.keys import KeySpace
from iostack.policy.reader import PolicyStoreUnavailable

LOG = logging.getLogger(__name__)
SECRET = "***"

bp = Blueprint("v1", __name__, url_prefix="/v1")


class Controller:
    """What the routes work with; one per app."""

    def __init__(self, config: dict[str, Any], client: redis.Redis | None = None) -> None:
        self.config = config
        self.redis = client or redis.Redis.from_url(config["redis_url"], decode_responses=True,
                                                    socket_timeout=10)
        self.keys = KeySpace(config.get("key_prefix", "iostack:"))
        self.registries = Registries(self.redis, self.keys, config.get("reseller_prefix", "AUTH_"))
        self.store = PolicyStore(self.redis, self.keys, self.registries)
        self.auth = Authenticator(config)
        self.code_dir = Path(config["state_dir"]) / "filter-code"
        # Set by the server when it runs the metric loop (tests of the API alone have none).
        self.control_loop: ControlLoop | None = None


def create_app(config: dict[str, Any], client: redis.Redis | None = None) -> Flask:
    app = Flask("iostack.controller")
    app.config["MAX_CONTENT_LENGTH"] = int(config.get("max_body_bytes", 1 << 20))
    app.extensions["iostack"] = Controller(config, client)
    app.register_blueprint(bp)
    app.register_error_handler(Exception, _error)
    from iostack.controller import ui  # the console uses this module's helpers

    ui.register(app)
    return app


def _ctl() -> Controller:
    return current_app.extensions["iostack"]


# -- errors and auth ------------------------------------------------------------


def _error(exc: Exception):
    if isinstance(exc, DSLError):
        return _json_error(400, "invalid policy text", diagnostics=[
            d.to_json() for d in exc.diagnostics])
    if isinstance(exc, (RegistryError, AuthError)):
        return _json_error(exc.status, str(exc))
    if isinstance(exc, HTTPException):
        return _json_error(exc.code or 500, exc.description or exc.name)
    if isinstance(exc, redis.RedisError):
        LOG.error("policy store unavailable: %s", exc)
        return _json_error(503, "policy store (Redis) unavailable")
    if isinstance(exc, PolicyStoreUnavailable):
        return _json_error(503, str(exc))
    LOG.exception("unexpected error")
    return _json_error(500, "internal error")


def _json_error(status: int, message: str, **extra):
    response = jsonify({"error": message, "status": status, **extra})
    response.status_code = status
    return response


def _principal(account: str | None = None) -> Principal:
    return _ctl().auth.authenticate(request.headers, account)


def _admin() -> Principal:
    principal = _principal()
    if not principal.admin:
        raise AuthError("administrators only", 403)
    return principal


def _body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise RegistryError("the body must be a JSON object")
    return data


def _field(data: dict[str, Any], name: str, kind: type = str):
    if name not in data:
        raise RegistryError(f"missing field {name!r}")
    if not isinstance(data[name], kind):
        raise RegistryError(f"field {name!r} must be a {kind.__name__}")
    return data[name]


def _redact(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of a policy record with ``secret`` parameter values hidden."""
    record = json.loads(json.dumps(record))
    hidden = _redact_params(record.get("actions", []) + record.get("rules", []))
    for value in hidden:
        # The policy text holds the value as written: mask it there too.
        record["text"] = record["text"].replace(value, SECRET)
    return record


def _redact_params(items: list[dict[str, Any]]) -> set[str]:
    """Hide, in place, the values of ``secret`` (or no longer declared) parameters.

    Returns the hidden values that were strings.
    """
    if "filters" not in g:  # once per request, however many records are shown
        g.filters = _ctl().registries.vocabulary().filters
    filters = g.filters
    hidden = set()
    for item in items:
        meta = filters.get(item.get("filter"))
        for name, value in item.get("params", {}).items():
            declared = meta.param(name) if meta else None
            if declared is None or declared.type == "secret":
                if isinstance(value, str) and value:
                    hidden.add(value)
                item["params"][name] = SECRET
    return hidden


# -- service --------------------------------------------------------------------


@bp.get("/health")
def health():
    ctl = _ctl()
    try:
        ctl.redis.ping()
    except redis.RedisError:
        return _json_error(503, "policy store (Redis) unavailable")
    return jsonify(status="ok")


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())


# -- policies -------------------------------------------------------------------


def _policy_text() -> str:
    if request.mimetype == "text/plain":
        return request.get_data(as_text=True)
    return _field(_body(), "text")


def _with_actors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Policy records with their actor's state (dynamic policies), secrets hidden."""
    ctl = _ctl()
    dynamic = [r["id"] for r in records if r.get("dynamic")]
    states = ctl.redis.hmget(ctl.keys.actors, dynamic) if dynamic else []
    actors = {pid: json.loads(raw) for pid, raw in zip(dynamic, states, strict=True) if raw}
    return [_redact(r) | ({"actor": actors[r["id"]]} if r["id"] in actors else {})
            for r in records]


@bp.get("/policies")
def list_policies():
    _admin()
    return jsonify(policies=_with_actors(_ctl().store.list()))


def _dry_run() -> bool:
    return request.args.get("dry_run", "").lower() in ("1", "true", "yes")


def _redact_result(result: dict[str, Any]) -> dict[str, Any]:
    for field in ("policies", "removed"):
        result[field] = [_redact(r) for r in result.get(field, [])]
    return result


@bp.post("/policies")
def add_policies():
    principal = _admin()
    dry_run = _dry_run()
    text = _policy_text()
    result = _ctl().store.submit(text, dry_run=dry_run, who=principal.name)
    return jsonify(_redact_result(result)), (200 if dry_run else 201)


@bp.post("/policies/validate")
def validate_policies():
    _admin()
    result = _ctl().store.submit(_policy_text(), dry_run=True)
    return jsonify(_redact_result(result) | {"valid": True})


@bp.get("/policies/<pid>")
def get_policy(pid: str):
    _admin()
    return jsonify(_with_actors([_ctl().store.get(pid)])[0])


@bp.delete("/policies/<pid>")
def delete_policy(pid: str):
    principal = _admin()
    return jsonify(deleted=_redact(_ctl().store.delete(pid, who=principal.name)))


# -- policy history -------------------------------------------------------------


def history_entries(limit: int | None) -> list[dict[str, Any]]:
    """History entries, newest first, with the (redacted) text of the policies they name."""
    history = _ctl().store.history
    entries = history.entries(limit)
    ids = {pid for e in entries for pid in e["added"] + e["removed"]}
    texts = {r["id"]: _redact(r)["text"] for r in history.records(ids)}
    for entry in entries:
        for field in ("added", "removed"):
            entry[f"{field}_policies"] = [{"id": pid, "text": texts.get(pid, "")}
                                          for pid in entry[field]]
    return entries


def history_diff(old: int, new: int) -> dict[str, Any]:
    diff = _ctl().store.history.diff(old, new)
    for field in ("policies_added", "policies_removed"):
        diff[field] = [_redact(r) for r in diff[field]]
    for field in ("rules_added", "rules_removed"):
        _redact_params(diff[field])
    return diff


def _version(text: str | None, name: str) -> int:
    try:
        return int(text or "")
    except ValueError:
        raise RegistryError(f"{name} must be a history version number") from None


@bp.get("/policies/history")
def policy_history():
    _admin()
    limit = request.args.get("limit", type=int)
    return jsonify(history=history_entries(limit), count=_ctl().store.history.count())


@bp.get("/policies/history/diff")
def policy_history_diff():
    _admin()
    return jsonify(history_diff(_version(request.args.get("from"), "from"),
                                _version(request.args.get("to"), "to")))


@bp.get("/policies/history/<version>")
def policy_history_version(version: str):
    _admin()
    history = _ctl().store.history
    number = _version(version, "version")
    entry = history.entry(number)
    change = history_diff(number - 1, number) if number > 0 else history_diff(0, 0)
    return jsonify(entry | {"policies": [_redact(r) for r in history.policies_at(number)],
                            "rules_added": change["rules_added"],
                            "rules_removed": change["rules_removed"]})


@bp.post("/policies/history/<version>/rollback")
def policy_rollback(version: str):
    principal = _admin()
    result = _ctl().store.rollback(_version(version, "version"), who=principal.name,
                                   dry_run=_dry_run())
    return jsonify(_redact_result(result))


@bp.get("/tenants/<account>/policies")
def tenant_policies(account: str):
    principal = _principal(account)
    if not principal.may_read(account):
        raise AuthError("a tenant may read its own policies only", 403)
    return jsonify(account=account,
                   policies=[_redact(r) for r in _ctl().store.for_tenant(account)])


@bp.post("/explain")
def explain():
    if not request_token(request.headers):
        raise AuthError("authentication required: send X-Auth-Token")
    return jsonify(explain_json(_body(), _principal))


def explain_json(data: dict[str, Any],
                 principal_for: Callable[[str | None], Principal]) -> dict[str, Any]:
    """What ``POST /v1/explain`` answers for ``data`` (the console shows the same).

    ``principal_for(account)`` is the caller, authenticated for the account
    the request names (a volume needs an administrator).
    """
    if "volume" in data:
        if not principal_for(None).admin:
            raise AuthError("administrators only", 403)
        return _explain_volume(data)
    method, path = _field(data, "method"), _field(data, "path")
    size = data.get("size")
    if size is not None and (not isinstance(size, int) or size < 0):
        raise RegistryError("size must be a non-negative integer")
    headers = data.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise RegistryError("headers must be an object of strings")
    store = _ctl().store
    try:
        view, resolution = store.explain(method, path, headers, size)
    except ValueError as exc:
        raise RegistryError(str(exc)) from None
    principal = principal_for(view.account)
    if not principal.may_read(view.account):
        raise AuthError("a tenant may explain requests to its own account only", 403)
    answer = resolution.to_json()
    _redact_params(answer["pipeline"])
    return {"request": {"method": view.method, "account": view.account,
                        "container": view.container, "object": view.obj, "size": view.size,
                        "policy_paths": [list(p) for p in view.policy_paths]},
            "warnings": _manifest_warnings(store, view, resolution, headers),
            **answer}


def _manifest_warnings(store, view, resolution, headers: dict[str, str]) -> list[str]:
    """Large objects whose segments live under weaker policies than their manifest."""
    headers = {k.lower(): v for k, v in headers.items()}
    if view.method != "PUT" or not view.obj:
        return []
    if headers.get("x-static-large-object", "").lower() == "true":
        return ["SLO manifest: the manifest is stored as written; each segment is filtered "
                "by the policies of the container it is stored in"]
    manifest = headers.get("x-object-manifest")
    if not manifest or "/" not in manifest.lstrip("/"):
        return []
    segments_path = f"/v1/{quote(view.account)}/{manifest.lstrip('/')}"
    try:
        _, segment = store.explain("PUT", segments_path, headers={}, size=view.size)
    except ValueError:
        return [f"X-Object-Manifest {manifest!r} does not name <container>/<prefix>"]
    missing = [e.filter for e in resolution.pipeline
               if e.filter not in {s.filter for s in segment.pipeline}]
    if not missing:
        return []
    return [f"DLO segments in {manifest.split('/', 1)[0]!r} are not filtered by "
            f"{', '.join(missing)}, which applies to this manifest"]


def _explain_volume(data: dict[str, Any]) -> dict[str, Any]:
    volume = _field(data, "volume")
    group = data.get("storage_group")
    if group is not None and not isinstance(group, str):
        raise RegistryError("field 'storage_group' must be a str")
    resolution = _ctl().store.block_stack(volume, group).to_json()
    _redact_params(resolution["pipeline"])
    return {"request": {"volume": volume, "storage_group": group}, **resolution}


# -- block bridge ---------------------------------------------------------------


@bp.get("/volumes/<volume>/stack")
def volume_stack(volume: str):
    """A volume's resolved stack with secret parameters in clear, for the block
    bridge that builds it (``explain`` masks them, and a masked key cannot
    encrypt). Administrators only; never stored by caches on the way."""
    _admin()
    group = request.args.get("storage_group") or None
    resolution = _ctl().store.block_stack(volume, group).to_json()
    response = jsonify(volume=volume, storage_group=group, **resolution)
    response.headers["Cache-Control"] = "no-store"
    return response


# -- metrics --------------------------------------------------------------------


def _control_loop() -> ControlLoop:
    loop = _ctl().control_loop
    if loop is None:
        raise RegistryError("this controller does not collect metrics", 503)
    return loop


def _metric_target(target: str) -> tuple[str | list[str], str]:
    """A metric target as written -> (what the aggregator selects, the account it is in)."""
    registries = _ctl().registries
    if target.lower().startswith(("group:", "g:")):
        name = target.split(":", 1)[1]
        return registries.vocabulary().groups.get(name, []), ""
    if target == "*":
        return "*", ""
    account, _, container = target.partition("/")
    if account != "*":
        account = registries.vocabulary().account(account)
    return (f"{account}/{container}" if container else account), account


@bp.get("/metrics/<metric>/<path:target>")
def metric_series(metric: str, target: str):
    metric = metric.upper()
    _ctl().registries.get("metrics", metric)  # 404 for an unknown metric
    selected, account = _metric_target(target)
    principal = _principal(account or None)
    if not principal.admin and not (account and account != "*" and principal.may_read(account)):
        raise AuthError("a tenant may read its own account's metrics only", 403)
    stage = request.args.get("stage", "proxy")
    if stage not in ("proxy", "object"):
        raise RegistryError("stage must be proxy or object")
    last = request.args.get("last", type=int)
    series = _control_loop().aggregator.series(metric, selected, stage, last)
    return jsonify(metric=metric, target=target, stage=stage,
                   values=[{"start": start, "value": value} for start, value in series])


@bp.get("/monitoring")
def monitoring():
    _admin()
    loop = _control_loop()
    aggregator = loop.aggregator
    latest = aggregator.latest()
    metrics = sorted(_ctl().registries.list("metrics"))
    targets = {}
    if latest is not None:
        targets = {name: {m: totals.value(m, latest.seconds) for m in metrics}
                   for name, totals in sorted(latest.targets().items())}
    return jsonify(
        interval=latest.start if latest else None, seconds=latest.seconds if latest else None,
        sources=aggregator.sources(), received=aggregator.received, late=aggregator.late,
        lost=aggregator.lost, connected=loop.consumer.connected.is_set(), targets=targets,
        actors=loop.actors.states())


@bp.get("/qos")
def qos_status():
    _admin()
    loop = _control_loop()
    return jsonify(capacity=loop.qos.capacity, scopes=loop.qos.status())


# -- registries -----------------------------------------------------------------

@bp.get("/<any(filters, metrics, classes, groups, object_types):kind>")
def list_registry(kind: str):
    _admin()
    return jsonify({kind: _ctl().registries.list(kind)})


@bp.get("/<any(filters, metrics, classes, groups, object_types):kind>/<name>")
def get_registry(kind: str, name: str):
    _admin()
    return jsonify(_ctl().registries.get(kind, name))


@bp.delete("/<any(filters, metrics, classes, groups, object_types):kind>/<name>")
def delete_registry(kind: str, name: str):
    _admin()
    _ctl().registries.delete(kind, name)
    return jsonify(deleted=name)


@bp.put("/filters/<name>")
def put_filter(name: str):
    _admin()
    data = _body() | {"name": name}
    return jsonify(_ctl().registries.put_filter(data).to_json()), 201


@bp.put("/filters/<name>/code")
def put_filter_code(name: str):
    """Store a filter's code (run sandboxed as a Storlet) and point its metadata at it."""
    _admin()
    ctl = _ctl()
    meta = ctl.registries.get("filters", name)
    code = request.get_data()
    if not code:
        raise RegistryError("empty body: send the filter's code")
    digest = hashlib.sha256(code).hexdigest()
    folder = ctl.code_dir / meta["name"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / digest).write_bytes(code)
    meta["extra"] = meta.get("extra", {}) | {"runtime": "storlet", "code_sha256": digest,
                                            "code_size": len(code)}
    return jsonify(ctl.registries.put_filter(meta).to_json()), 201


@bp.get("/filters/<name>/code")
def get_filter_code(name: str):
    _admin()
    ctl = _ctl()
    meta = ctl.registries.get("filters", name)
    digest = meta.get("extra", {}).get("code_sha256")
    if not digest:
        raise RegistryError(f"filter {meta['name']!r} has no uploaded code", 404)
    code = (ctl.code_dir / meta["name"] / digest).read_bytes()
    return Response(code, mimetype="application/octet-stream",
                    headers={"X-Code-Sha256": digest})


@bp.put("/metrics/<name>")
def put_metric(name: str):
    _admin()
    data = _body() | {"name": name}
    return jsonify(_ctl().registries.put_metric(data).to_json()), 201


@bp.put("/classes/<name>")
def put_class(name: str):
    _admin()
    data = _body() | {"name": name}
    _field(data, "actions")
    return jsonify(_ctl().registries.put_class(data).to_json()), 201


@bp.put("/groups/<name>")
def put_group(name: str):
    _admin()
    tenants = _field(_body(), "tenants", list)
    return jsonify(name=name, tenants=_ctl().registries.put_group(name, tenants)), 201


@bp.put("/object_types/<name>")
def put_object_type(name: str):
    _admin()
    patterns = _field(_body(), "patterns", list)
    return jsonify(name=name.upper(),
                   patterns=_ctl().registries.put_object_type(name, patterns)), 201


@bp.get("/tenants")
def list_tenants():
    _admin()
    return jsonify(tenants=_ctl().registries.tenants())


@bp.put("/tenants/<name>")
def put_tenant(name: str):
    _admin()
    return jsonify(account=_ctl().registries.add_tenant(name)), 201
