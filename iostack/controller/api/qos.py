"""``/v1/qos``: the bandwidth SLOs per scope: target, assigned and achieved rates."""

from __future__ import annotations

from flask import Blueprint, jsonify

from iostack.controller.api.base import control_loop, require_admin

bp = Blueprint("qos", __name__)


@bp.get("/qos")
def qos_status():
    require_admin()
    loop = control_loop()
    return jsonify(capacity=loop.qos.capacity, scopes=loop.qos.status())
