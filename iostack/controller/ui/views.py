"""The console's pages (see the package docstring for login, scope and headers).

Each page reads through the controller's own objects (store, registries,
control loop) and the REST layer's helpers (redaction, explain), so the
console shows exactly what the API answers.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any
from urllib.parse import quote

from flask import current_app, g, jsonify, redirect, render_template, request
from werkzeug.exceptions import HTTPException

from iostack.controller import api
from iostack.controller.actors import metric_target, target_key
from iostack.controller.auth import AuthError
from iostack.controller.convergence import policy_status
from iostack.controller.registry import RegistryError
from iostack.controller.simulations import SimulationError
from iostack.controller.ui import (
    COOKIE,
    bp,
    check_csrf,
    check_origin,
    current,
    end_session,
    start_session,
)
from iostack.controller.ui.bridge import BlockBridge, BridgeError
from iostack.dsl.errors import DSLError
from iostack.dsl.units import UnitError, parse_size
from iostack.monitoring.aggregator import selector

# (label, metric, scale, unit) of the live charts, in page order.
CHARTS = (("PUTs", "PUTS_SEC", 1, "/s"), ("GETs", "GETS_SEC", 1, "/s"),
          ("Bandwidth in (PUT)", "PUT_BW", 1e-6, " MB/s"),
          ("Bandwidth out (GET)", "GET_BW", 1e-6, " MB/s"),
          ("Active requests", "ACTIVE_REQUESTS", 1, ""),
          ("PUT latency p95", "PUT_LATENCY_P95", 1e3, " ms"),
          ("GET latency p95", "GET_LATENCY_P95", 1e3, " ms"))
NAV = (("policies", "Policies", False), ("explain", "Explain", False),
       ("metrics", "Live metrics", False), ("qos", "QoS", True),
       ("filters", "Filters", True), ("block", "Block", True), ("history", "History", True))
HISTORY_SHOWN = 200
FIRST_LOAD = 60  # intervals a chart starts with; it then grows to app.js's KEEP
PUBLIC = ("ui.login", "ui.static")


def _ctl():
    return api.ctl()


# -- session, scope, errors -----------------------------------------------------


@bp.before_request
def require_login():
    if request.method != "GET":
        check_origin()
    if request.endpoint in PUBLIC:
        return None
    found = current()
    if found is None:
        if request.headers.get("HX-Request"):
            return "", 401, {"HX-Redirect": f"{request.script_root}/ui/login"}
        return redirect(f"{request.script_root}/ui/login")
    g.session, g.principal = found
    if request.method != "GET":
        check_csrf(g.session)
    return None


def _admin_only() -> None:
    if not g.principal.admin:
        raise AuthError("this page is for administrators", 403)


@bp.errorhandler(Exception)
def error_page(exc: Exception):
    if isinstance(exc, HTTPException):
        status, message = exc.code or 500, exc.description or exc.name
    elif isinstance(exc, (RegistryError, AuthError)):
        status, message = exc.status, str(exc)
    else:
        return api.error_response(exc)  # logged there; the same 500/503 as the API
    if request.headers.get("HX-Request"):
        return render_template("ui/error_fragment.html", message=message), status
    return render_template("ui/error.html", message=message, status=status,
                           nav=_nav("")), status


def _nav(active: str) -> list[dict[str, Any]]:
    admin = bool(getattr(g, "principal", None) and g.principal.admin)
    return [{"page": page, "label": label, "active": page == active}
            for page, label, admin_only in NAV if admin or not admin_only]


def _page(template: str, active: str, **context: Any):
    return render_template(template, nav=_nav(active), principal=g.principal,
                           csrf=g.session.csrf, **context)


@bp.route("/login", methods=["GET", "POST"])
def login():
    if request.method == "GET":
        return render_template("ui/login.html", error=None, nav=[])
    token = request.form.get("token", "").strip()
    account = request.form.get("account", "").strip() or None
    try:
        cookie, _ = start_session(token, account)
    except AuthError as exc:
        return render_template("ui/login.html", error=str(exc), nav=[],
                               account=account or ""), exc.status
    response = redirect(f"{request.script_root}/ui/policies", 303)
    response.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict",
                        secure=request.is_secure, path="/ui")
    return response


@bp.post("/logout")
def logout():
    end_session()
    response = redirect(f"{request.script_root}/ui/login", 303)
    response.delete_cookie(COOKIE, path="/ui")
    return response


@bp.get("/")
def home():
    return redirect(f"{request.script_root}/ui/policies")


# -- policies -------------------------------------------------------------------


def _policies() -> list[dict[str, Any]]:
    """Records for the list (actors joined, secrets hidden), without their compiled rules.

    The list does not show rules, and copying them for redaction was half the
    page's server time with 1,000 policies.
    """
    store = _ctl().store
    if g.principal.admin:
        return api.with_actors([{k: v for k, v in r.items() if k != "rules"}
                                 for r in store.list()])
    records = api.with_actors([{k: v for k, v in r.items() if k != "rules"}
                                for r in store.for_tenant(g.principal.account)])
    for record in records:
        if "actor" in record:
            # A policy on several tenants has an actor state (and metric values) per
            # target: a tenant sees the state of its own targets only.
            record["actor"] = {"targets": {
                key: {"state": state["state"]}
                for key, state in record["actor"].get("targets", {}).items()
                if _concerns(key, g.principal.account)}}
    return records


def _concerns(key: str, account: str) -> bool:
    """Whether an actor target (``kind:name``) is the account or in it."""
    _, name = key.split(":", 1)
    return name == account or name.startswith(f"{account}/")


def marked_source(text: str, diagnostics: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The policy text as lines of segments; the character each diagnostic points at is marked.

    A diagnostic past the end of its line (unexpected end of input) marks a blank.
    """
    lines = text.split("\n")
    out = []
    for number, line in enumerate(lines, start=1):
        marks: dict[int, dict[str, Any]] = {}
        for d in diagnostics:
            if d["line"] == number:
                # Two problems at one place share the mark; its title names both.
                marks[d["column"]] = d if d["column"] not in marks else marks[d["column"]] | {
                    "message": f"{marks[d['column']]['message']}; {d['message']}"}
        segments, plain = [], ""
        for column in range(1, max([len(line) + 1, *marks]) + 1):
            char = line[column - 1] if column <= len(line) else " "
            if column in marks:
                if plain:
                    segments.append({"text": plain})
                    plain = ""
                segments.append({"text": char, "mark": marks[column]})
            elif column <= len(line):
                plain += char
        if plain:
            segments.append({"text": plain})
        out.append(segments)
    return out


def _check(text: str) -> dict[str, Any]:
    """Dry-run ``text`` through the store: errors, warnings and the compiled result."""
    if not text.strip():
        return {"text": text, "errors": [], "warnings": [], "policies": [], "empty": True}
    try:
        result = api.redact_result(_ctl().store.submit(text, dry_run=True))
    except DSLError as exc:
        errors = [d.to_json() | {"kind": "error"} for d in exc.diagnostics]
        return {"text": text, "errors": errors, "warnings": [], "policies": [],
                "lines": marked_source(text, errors)}
    warnings = [w | {"kind": "warning"} for w in result["warnings"]]
    return {"text": text, "errors": [], "warnings": warnings, "policies": result["policies"],
            "classes": result["classes"], "lines": marked_source(text, warnings)}


def _enforcement() -> dict[str, Any] | None:
    """Which version each proxy worker enforces (administrators only)."""
    if not g.principal.admin:
        return None
    return policy_status(_ctl().redis, _ctl().keys)


def _reconcile_passes() -> list[dict[str, Any]] | None:
    """The ``iostack reconcile`` passes' progress, as their daemons publish it (admins)."""
    if not g.principal.admin:
        return None
    now = time.time()
    passes = []
    for target, raw in sorted(_ctl().redis.hgetall(_ctl().keys.reconcile_progress).items()):
        try:
            data = json.loads(raw)
        except ValueError:
            continue
        if isinstance(data, dict):
            age = max(0.0, now - float(data.get("updated") or now))
            passes.append(data | {"target": target, "age": age})
    return passes


@bp.get("/policies")
def policies():
    return _page("ui/policies.html", "policies", policies=_policies(), check=None,
                 added=request.args.get("added", ""), removed=request.args.get("removed", ""),
                 enforcement=_enforcement(), reconcile=_reconcile_passes())


@bp.post("/policies/check")
def policies_check():
    _admin_only()
    return render_template("ui/check.html", check=_check(request.form.get("text", "")))


@bp.post("/policies")
def policies_add():
    _admin_only()
    text = request.form.get("text", "")
    try:
        result = _ctl().store.submit(text, who=g.principal.name)
    except DSLError:
        return _page("ui/policies.html", "policies", policies=_policies(), check=_check(text),
                     added="", removed="", enforcement=_enforcement(),
                     reconcile=_reconcile_passes()), 400
    ids = ",".join(r["id"] for r in result["policies"])
    return redirect(f"{request.script_root}/ui/policies?added={quote(ids)}", 303)


@bp.post("/policies/simulate")
def policies_simulate():
    """Start ``/v1/simulate``'s job for the editor's text; the fragment polls it."""
    _admin_only()
    text = request.form.get("text", "")
    if not text.strip():
        return render_template("ui/simulation.html", error="type a policy first")
    try:
        _ctl().store.submit(text, dry_run=True)
        job = _ctl().simulations.start(None, {"text": text})
    except DSLError:
        return render_template("ui/simulation.html",
                               error="the text has errors (see the check above)")
    except SimulationError as exc:
        return render_template("ui/simulation.html", error=str(exc))
    return render_template("ui/simulation.html", job=job.to_json())


@bp.get("/simulate/<job>")
def simulation(job: str):
    _admin_only()
    try:
        found = _ctl().simulations.get(job, None, True)
    except SimulationError as exc:
        return render_template("ui/simulation.html", error=str(exc))
    return render_template("ui/simulation.html", job=found.to_json())


@bp.post("/policies/<pid>/delete")
def policies_delete(pid: str):
    _admin_only()
    _ctl().store.delete(pid, who=g.principal.name)
    return redirect(f"{request.script_root}/ui/policies?removed={quote(pid)}", 303)


# -- explain --------------------------------------------------------------------


def _headers(text: str) -> dict[str, str]:
    headers = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            raise RegistryError(f"a header line is 'Name: value', got {line.strip()!r}")
        headers[key.strip()] = value.strip()
    return headers


ENTRY_SHOWN = ("filter", "params", "stage", "sandboxed", "order", "sources", "methods")


def _why(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Pipeline entries, each with the notes that concern its filter (why it applies).

    Whatever else explain says about an entry (fields this page does not
    know yet) is listed under ``more``, so a richer explain shows up here as is.
    """
    rows = []
    for entry in result["pipeline"]:
        notes = [n for n in result["notes"]
                 if n["filter"] == entry["filter"] and n["outcome"] == "applied"]
        more = {k: v for k, v in entry.items() if k not in ENTRY_SHOWN and v}
        rows.append(entry | {"why": notes, "more": more})
    return rows


@bp.route("/explain", methods=["GET", "POST"])
def explain():
    form = {"method": "PUT", "path": "", "size": "", "headers": "", "volume": "",
            "storage_group": ""}
    if request.method == "GET":
        if not g.principal.admin:
            form["path"] = f"/v1/{g.principal.account}/"
        return _page("ui/explain.html", "explain", form=form, result=None)
    form |= {k: request.form.get(k, "").strip() for k in form}
    if form["volume"]:
        data: dict[str, Any] = {"volume": form["volume"],
                                "storage_group": form["storage_group"] or None}
    else:
        try:
            size = parse_size(form["size"]) if form["size"] else None
        except UnitError as exc:
            raise RegistryError(str(exc)) from None
        data = {"method": form["method"], "path": form["path"], "size": size,
                "headers": _headers(form["headers"])}
    result = api.explain_json(data, lambda account: g.principal)
    return render_template("ui/explain_result.html", result=result, rows=_why(result),
                           others=[n for n in result["notes"] if n["outcome"] != "applied"],
                           unknown_volume=bool(form["volume"]) and not _volume_known(
                               form["volume"]))


def _volume_known(name: str) -> bool:
    """Whether a policy names the volume or the block bridge has it (explain of a typo)."""
    if any(t["kind"] == "volume" and t["name"] == name
           for record in _ctl().store.list() for t in record["targets"]):
        return True
    conf = _ctl().config.get("block_bridge")
    if not conf:
        return False
    try:
        volumes, _ = BlockBridge(conf).inventory()
    except BridgeError:
        return True  # cannot tell: do not call it unknown
    return any(volume["name"] == name for volume in volumes)


# -- live metrics ---------------------------------------------------------------


def _visible(target: str) -> bool:
    account = g.principal.account
    return g.principal.admin or target == account or target.startswith(f"{account}/")


def _latest_table() -> tuple[list[dict[str, Any]], float | None]:
    latest = api.control_loop().aggregator.latest()
    if latest is None:
        return [], None
    rows = []
    for name, totals in sorted(latest.targets().items()):
        if _visible(name):
            rows.append({"target": name, "cells": [
                _scaled(totals.value(metric, latest.seconds), scale)
                for _, metric, scale, _ in CHARTS]})
    return rows, latest.start


def _scaled(value: float | int | None, scale: float) -> float | int | None:
    """Three significant digits (12.3 ms, 0.0123 MB/s, not 12.345 ms), whole numbers kept."""
    if value is None:
        return None
    scaled = value * scale
    if not scaled:
        return 0
    digits = 2 - math.floor(math.log10(abs(scaled)))
    return round(scaled, digits) if digits > 0 else round(scaled)


def _comparisons(condition: dict[str, Any]) -> list[dict[str, Any]]:
    if "metric" in condition:
        return [condition]
    return _comparisons(condition["left"]) + _comparisons(condition["right"])


def _dynamic_for(target: str) -> list[tuple[dict[str, Any], str]]:
    """(dynamic policy record, its actor target key) whose metric target is ``target``."""
    ctl = _ctl()
    version = ctl.redis.get(ctl.keys.version)
    cache = current_app.extensions.setdefault("iostack_ui", {})
    cached = cache.get("dynamic")
    if cached is None or cached[0] != version:
        # Policies change rarely and pages poll every interval: parse them once per version.
        cached = cache["dynamic"] = (version, [r for r in ctl.store.list() if r["dynamic"]])
    groups = ctl.registries.vocabulary().groups
    found = []
    for record in cached[1]:
        for t in record["targets"]:
            if metric_target(t["kind"], t["name"], groups) == target:
                found.append((record, target_key(t["kind"], t["name"])))
    return found


@bp.get("/metrics")
def metrics():
    default = "*" if g.principal.admin else g.principal.account
    target = request.args.get("target") or default
    if not _visible(target):
        raise AuthError("a tenant may watch its own account's metrics only", 403)
    rows, _ = _latest_table()
    charts = [{"label": label, "metric": metric, "unit": unit.strip(), "scale": scale}
              for label, metric, scale, unit in CHARTS]
    return _page("ui/metrics.html", "metrics", rows=rows, target=target,
                 charts=charts)


@bp.get("/metrics/table")
def metrics_table():
    rows, start = _latest_table()
    return render_template("ui/metrics_table.html", rows=rows, start=start,
                           target=request.args.get("target", ""))


@bp.get("/metrics/data")
def metrics_data():
    """New intervals of one target's metrics, thresholds, actor states and events (JSON)."""
    target = request.args.get("target", "*")
    if not _visible(target):
        raise AuthError("a tenant may watch its own account's metrics only", 403)
    since = request.args.get("since", type=float)
    loop = api.control_loop()
    intervals = loop.aggregator.intervals(since=since, last=None if since else FIRST_LOAD)
    select = selector(target)
    points = []
    for interval in intervals:
        totals = interval.totals(select)
        points.append([interval.start] + [_scaled(totals.value(m, interval.seconds), s)
                                          for _, m, s, _ in CHARTS])
    policies = _dynamic_for(target)
    thresholds: dict[str, list[dict[str, Any]]] = {}
    for record, _ in policies:
        for comparison in _comparisons(record["condition"]):
            scale = next((s for _, m, s, _ in CHARTS if m == comparison["metric"]), 1)
            thresholds.setdefault(comparison["metric"], []).append(
                {"policy": record["id"], "op": comparison["op"],
                 "value": comparison["value"] * scale})
    states = _ctl().redis.hmget(_ctl().keys.actors, [r["id"] for r, _ in policies]) \
        if policies else []
    actors = []
    for (record, key), raw in zip(policies, states, strict=True):
        state = (json.loads(raw)["targets"].get(key, {}) if raw else {})
        text = api.redact({"text": record["text"], "actions": record["actions"]})["text"]
        actors.append({"policy": record["id"], "target": key, "text": text,
                       "state": state.get("state", "waiting for metrics")})
    # Only this target's switches: a policy on several targets has events for each.
    shown = {(r["id"], key) for r, key in policies}
    events = [e for e in _ctl().store.history.events(since=time.time() - 600)
              if (e["policy"], target_key(e["level"], e["target"])) in shown]
    return jsonify(target=target, seconds=intervals[-1].seconds if intervals else None,
                   metrics=[m for _, m, _, _ in CHARTS], points=points,
                   thresholds=thresholds, actors=actors, events=events)


# -- QoS, filters, block ----------------------------------------------------------


@bp.get("/qos")
def qos():
    _admin_only()
    loop = api.control_loop()
    scopes = []
    for scope, row in sorted(loop.qos.status().items()):
        slo = row.get("slo") or {}
        for direction in ("get", "put", "ops"):
            now = row.get(direction) or {}
            if not slo.get(direction) and not now.get("achieved"):
                continue
            scopes.append({"scope": scope, "direction": direction, "slo": slo.get(direction),
                           "mode": "cap" if direction == "ops" or slo.get("mode") == "max"
                           else "min", "assigned": now.get("assigned"),
                           "achieved": now.get("achieved")})
    proxies = [{"proxy": source, "scope": scope, "direction": direction, "rate": rate}
               for source, by_scope in sorted(loop.qos.assigned.items())
               for scope, by_dir in sorted(by_scope.items())
               for direction, rate in sorted(by_dir.items())]
    return _page("ui/qos.html", "qos", capacity=loop.qos.capacity, scopes=scopes,
                 proxies=proxies)


@bp.get("/filters")
def filters():
    _admin_only()
    used: dict[str, list[str]] = {}
    for record in _ctl().store.list():
        for action in record["actions"]:
            used.setdefault(action["filter"], []).append(record["id"])
    items = [meta | {"used_by": sorted(set(used.get(name, [])))}
             for name, meta in sorted(_ctl().registries.list("filters").items())]
    return _page("ui/filters.html", "filters", filters=items)


@bp.get("/block")
def block():
    _admin_only()
    volumes: dict[str, dict[str, Any]] = {}
    groups: dict[str, dict[str, Any]] = {}
    for record in _ctl().store.list():
        for target in record["targets"]:
            if target["kind"] == "volume":
                volumes.setdefault(target["name"], {"name": target["name"]})
            elif target["kind"] == "storage_group":
                groups.setdefault(target["name"], {"name": target["name"]})
    bridge_error = None
    conf = _ctl().config.get("block_bridge")
    if conf:
        try:
            found_volumes, found_groups = BlockBridge(conf).inventory()
        except BridgeError as exc:
            bridge_error = str(exc)
        else:
            for volume in found_volumes:
                volumes.setdefault(volume["name"], {}).update(volume, attached=True)
            for group in found_groups:
                groups.setdefault(group["name"], {}).update(group, attached=True)
    for name, group in groups.items():
        group["pipeline"] = _group_stack(name)
    for name, volume in volumes.items():
        volume["pipeline"] = api.explain_volume({"volume": name})["pipeline"]
    return _page("ui/block.html", "block", volumes=sorted(volumes.values(), key=_name),
                 groups=sorted(groups.values(), key=_name), bridge=bool(conf),
                 bridge_error=bridge_error)


def _name(item: dict[str, Any]) -> str:
    return item["name"]


def _group_stack(group: str) -> list[dict[str, Any]]:
    """A storage group's own stack: what a volume in it with no rules of its own gets."""
    return api.explain_volume({"volume": "", "storage_group": group})["pipeline"]


# -- history --------------------------------------------------------------------


@bp.get("/history")
def history():
    _admin_only()
    entries = api.history_entries(HISTORY_SHOWN)
    return _page("ui/history.html", "history", entries=entries,
                 rolled=request.args.get("rolled", ""))


@bp.get("/history/diff")
def history_diff():
    _admin_only()
    old = api.version_number(request.args.get("from"), "from")
    new = api.version_number(request.args.get("to"), "to")
    return render_template("ui/diff.html", diff=api.history_diff(old, new))


@bp.get("/history/<int:version>/rollback")
def history_rollback_preview(version: int):
    """What rolling back to ``version`` would change, and who changed things since."""
    _admin_only()
    return _rollback_preview(version)


@bp.post("/history/<int:version>/rollback")
def history_rollback(version: int):
    _admin_only()
    # The operator confirmed a preview of one version: anything newer was not reviewed.
    if request.form.get("expect") != str(_ctl().store.history.count() - 1):
        return _rollback_preview(version, stale=True), 409
    _ctl().store.rollback(version, who=g.principal.name)
    return redirect(f"{request.script_root}/ui/history?rolled={version}", 303)


def _rollback_preview(version: int, stale: bool = False):
    store = _ctl().store
    plan = store.rollback(version, who=g.principal.name, dry_run=True)  # 404 if no such version
    current = store.history.count() - 1
    later = api.history_entries(current - version) if current > version else []
    others = sorted({e["who"] or "unknown" for e in later if e["who"] != g.principal.name})
    return _page("ui/rollback.html", "history", version=version, current=current,
                 diff=api.history_diff(current, version), later=later, others=others,
                 warnings=plan["warnings"], stale=stale,
                 unchanged=not (plan["policies"] or plan["removed"]))
