"""The controller's Flask app: the REST API (``api``) and the console (``ui``) on one app.

Assembled here, above both, so that neither package imports the other's
mounting: the console calls the API's helpers, the API knows nothing of the
console. ``create_app`` reads its settings once (``max_body_bytes``, the
token and Redis settings ``api.base.Controller`` takes).
"""

from __future__ import annotations

from typing import Any

import redis
from flask import Flask

from iostack.controller import ui
from iostack.controller.api import v1
from iostack.controller.api.base import Controller, error_response


def create_app(config: dict[str, Any], client: redis.Redis | None = None) -> Flask:
    """The controller's app for ``config`` (``client``: a Redis to use instead of
    ``config["redis_url"]``'s, for tests)."""
    app = Flask("iostack.controller")
    app.config["MAX_CONTENT_LENGTH"] = int(config.get("max_body_bytes", 1 << 20))
    app.extensions["iostack"] = Controller(config, client)
    app.register_blueprint(v1)
    app.register_error_handler(Exception, error_response)
    ui.register(app)
    return app
