"""``/v1/explain``: which filters a request (or a volume) gets, and why.

The console's explain page shows the same answer (``explain_json``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from flask import Blueprint, jsonify, request

from iostack.controller.api.base import authenticate, body, ctl, field, redact_params
from iostack.controller.auth import AuthError, Principal, request_token
from iostack.controller.registry import RegistryError
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter

bp = Blueprint("explain", __name__)


@bp.post("/explain")
def explain():
    if not request_token(request.headers):
        raise AuthError("authentication required: send X-Auth-Token")
    return jsonify(explain_json(body(), authenticate))


def explain_json(data: dict[str, Any],
                 principal_for: Callable[[str | None], Principal]) -> dict[str, Any]:
    """What ``POST /v1/explain`` answers for ``data`` (the console shows the same).

    ``principal_for(account)`` is the caller, authenticated for the account
    the request names (a volume needs an administrator).
    """
    if "volume" in data:
        if not principal_for(None).admin:
            raise AuthError("administrators only", 403)
        return explain_volume(data)
    method, path = field(data, "method"), field(data, "path")
    size = data.get("size")
    if size is not None and (not isinstance(size, int) or size < 0):
        raise RegistryError("size must be a non-negative integer")
    headers = data.get("headers") or {}
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        raise RegistryError("headers must be an object of strings")
    store = ctl().store
    try:
        view, resolution = store.explain(method, path, headers, size)
    except ValueError as exc:
        raise RegistryError(str(exc)) from None
    principal = principal_for(view.account)
    if not principal.may_read(view.account):
        raise AuthError("a tenant may explain requests to its own account only", 403)
    answer = resolution.to_json()
    for entry in answer["pipeline"]:
        entry["params"] = _applied(entry["filter"], entry["params"])
    redact_params(answer["pipeline"])
    return {"request": {"method": view.method, "account": view.account,
                        "container": view.container, "object": view.obj, "size": view.size,
                        "policy_paths": [list(p) for p in view.policy_paths]},
            "warnings": _manifest_warnings(store, view, resolution, headers),
            **answer}


def _applied(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters a library filter runs with: defaults it chooses itself filled in
    (compression's level follows its algorithm); others' as resolved."""
    try:
        return get_filter(name).validate(params)
    except FilterError:  # an uploaded filter, or stored values the data path would refuse
        return params


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


def explain_volume(data: dict[str, Any]) -> dict[str, Any]:
    """A volume's (or, with an empty name, a storage group's) stack, secrets hidden."""
    volume = field(data, "volume")
    group = data.get("storage_group")
    if group is not None and not isinstance(group, str):
        raise RegistryError("field 'storage_group' must be a str")
    resolution = ctl().store.block_stack(volume, group).to_json()
    redact_params(resolution["pipeline"])
    return {"request": {"volume": volume, "storage_group": group}, **resolution}
