"""``/v1/volumes``: a volume's resolved block stack, for the block bridge."""

from __future__ import annotations

from flask import Blueprint, jsonify, request

from iostack.controller.api.base import ctl, require_admin

bp = Blueprint("volumes", __name__, url_prefix="/volumes")


@bp.get("/<volume>/stack")
def volume_stack(volume: str):
    """A volume's resolved stack with secret parameters in clear, for the block
    bridge that builds it (``explain`` masks them, and a masked key cannot
    encrypt). Administrators only; never stored by caches on the way."""
    require_admin()
    group = request.args.get("storage_group") or None
    resolution = ctl().store.block_stack(volume, group).to_json()
    response = jsonify(volume=volume, storage_group=group, **resolution)
    response.headers["Cache-Control"] = "no-store"
    return response
