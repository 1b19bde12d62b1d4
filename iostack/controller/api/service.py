"""``/v1/health`` and ``/v1/openapi.json``: the two routes that need no token.

``/v1/health`` also says which IOStack release the controller runs (``version``).
"""

from __future__ import annotations

import redis
from flask import Blueprint, jsonify

from iostack import __version__
from iostack.controller.api.base import ctl, json_error
from iostack.controller.openapi import openapi_document

bp = Blueprint("service", __name__)


@bp.get("/health")
def health():
    try:
        ctl().redis.ping()
    except redis.RedisError:
        return json_error(503, "policy store (Redis) unavailable")
    return jsonify(status="ok", version=__version__)


@bp.get("/openapi.json")
def openapi():
    return jsonify(openapi_document())
