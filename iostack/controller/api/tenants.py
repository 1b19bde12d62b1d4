"""``/v1/tenants``: the known tenants, and a tenant's own effective policies (the one
listing a tenant may read)."""

from __future__ import annotations

from flask import Blueprint, jsonify

from iostack.controller.api.base import authenticate, ctl, redact, require_admin
from iostack.controller.auth import AuthError

bp = Blueprint("tenants", __name__, url_prefix="/tenants")


@bp.get("/<account>/policies")
def tenant_policies(account: str):
    principal = authenticate(account)
    if not principal.may_read(account):
        raise AuthError("a tenant may read its own policies only", 403)
    return jsonify(account=account,
                   policies=[redact(r) for r in ctl().store.for_tenant(account)])


@bp.get("")
def list_tenants():
    require_admin()
    return jsonify(tenants=ctl().registries.tenants())


@bp.put("/<name>")
def put_tenant(name: str):
    require_admin()
    return jsonify(account=ctl().registries.add_tenant(name)), 201
