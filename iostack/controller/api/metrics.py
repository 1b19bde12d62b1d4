"""``/v1/metrics``: the metric registry, and a metric's recent values for a target
(a tenant may read its own account's)."""

from __future__ import annotations

from flask import jsonify, request

from iostack.controller.api.base import authenticate, body, control_loop, ctl, require_admin
from iostack.controller.api.registries import registry_blueprint
from iostack.controller.auth import AuthError
from iostack.controller.registry import RegistryError

bp = registry_blueprint("metrics")


@bp.put("/<name>")
def put_metric(name: str):
    require_admin()
    data = body() | {"name": name}
    return jsonify(ctl().registries.put_metric(data).to_json()), 201


def _metric_target(target: str) -> tuple[str | list[str], str]:
    """A metric target as written -> (what the aggregator selects, the account it is in)."""
    registries = ctl().registries
    if target.lower().startswith(("group:", "g:")):
        name = target.split(":", 1)[1]
        return registries.vocabulary().groups.get(name, []), ""
    if target == "*":
        return "*", ""
    account, _, container = target.partition("/")
    if account != "*":
        account = registries.vocabulary().account(account)
    return (f"{account}/{container}" if container else account), account


@bp.get("/<metric>/<path:target>")
def metric_series(metric: str, target: str):
    metric = metric.upper()
    ctl().registries.get("metrics", metric)  # 404 for an unknown metric
    selected, account = _metric_target(target)
    principal = authenticate(account or None)
    if not principal.admin and not (account and account != "*" and principal.may_read(account)):
        raise AuthError("a tenant may read its own account's metrics only", 403)
    stage = request.args.get("stage", "proxy")
    if stage not in ("proxy", "object"):
        raise RegistryError("stage must be proxy or object")
    last = request.args.get("last", type=int)
    series = control_loop().aggregator.series(metric, selected, stage, last)
    return jsonify(metric=metric, target=target, stage=stage,
                   values=[{"start": start, "value": value} for start, value in series])
