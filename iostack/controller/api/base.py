"""What every resource of the API shares: the per-app ``Controller``, JSON errors,
authentication, request bodies, and hiding ``secret`` parameter values."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import redis
from flask import current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from iostack.controller.auth import Authenticator, AuthError, Principal
from iostack.controller.code_check import CodeCheck
from iostack.controller.control_loop import ControlLoop
from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import Registries, RegistryError
from iostack.controller.simulations import Simulations
from iostack.dsl.errors import DSLError
from iostack.filters.metadata import is_public, public_params
from iostack.policy.connection import connect
from iostack.policy.reader import PolicyStoreUnavailable
from iostack.policy.redis_keys import KeySpace

LOG = logging.getLogger(__package__)
# The control plane waits longer than the data path: a big change or journal read is
# worth finishing; a hung store still answers 503 within this bound.
CONTROL_TIMEOUT = 5.0
SECRET = "***"  # noqa: S105 - the mask shown for secret parameters, not a password


class Controller:
    """What the routes work with; one per app."""

    def __init__(self, config: dict[str, Any], client: redis.Redis | None = None) -> None:
        self.config = config
        self.redis = client or connect(config["redis_url"], decode_responses=True,
                                       socket_timeout=CONTROL_TIMEOUT)
        self.keys = KeySpace(config.get("key_prefix", "iostack:"))
        self.registries = Registries(self.redis, self.keys, config.get("reseller_prefix", "AUTH_"))
        self.store = PolicyStore(self.redis, self.keys, self.registries)
        self.auth = Authenticator(config)
        self.code_dir = Path(config["state_dir"]) / "filter-code"
        self.code_check = CodeCheck(config)
        self.simulations = Simulations(config)
        # Set by the server when it runs the metric loop (tests of the API alone have none).
        self.control_loop: ControlLoop | None = None


def ctl() -> Controller:
    return current_app.extensions["iostack"]


def control_loop() -> ControlLoop:
    loop = ctl().control_loop
    if loop is None:
        raise RegistryError("this controller does not collect metrics", 503)
    return loop


# -- errors and auth ------------------------------------------------------------


def store_error_cause(exc: redis.RedisError) -> str:
    """Why the store refused or did not answer, in an administrator's words."""
    if isinstance(exc, redis.ReadOnlyError):
        return "no writable master (the server reached is a read-only replica; a failover " \
               "may be under way)"
    if isinstance(exc, redis.TimeoutError):
        return f"no answer within the store timeout ({exc})"
    if isinstance(exc, redis.ConnectionError):
        return f"cannot connect to the master ({exc})"
    return str(exc)


def error_response(exc: Exception):
    """The JSON answer for any exception a route raises (the app's error handler)."""
    if isinstance(exc, DSLError):
        return json_error(400, "invalid policy text", diagnostics=[
            d.to_json() for d in exc.diagnostics])
    if isinstance(exc, (RegistryError, AuthError)):
        return json_error(exc.status, str(exc))
    if isinstance(exc, HTTPException):
        return json_error(exc.code or 500, exc.description or exc.name)
    if isinstance(exc, redis.RedisError):
        LOG.error("policy store unavailable: %s", exc)
        return json_error(503, f"policy store (Redis) unavailable: {store_error_cause(exc)}; "
                               "nothing was changed, try again")
    if isinstance(exc, PolicyStoreUnavailable):
        return json_error(503, str(exc))
    LOG.exception("unexpected error")
    return json_error(500, "internal error")


def json_error(status: int, message: str, **extra):
    response = jsonify({"error": message, "status": status, **extra})
    response.status_code = status
    return response


def authenticate(account: str | None = None) -> Principal:
    """The caller, authenticated for ``account`` (the one the request names, if any)."""
    return ctl().auth.authenticate(request.headers, account)


def require_admin() -> Principal:
    principal = authenticate()
    if not principal.admin:
        raise AuthError("administrators only", 403)
    return principal


def body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise RegistryError("the body must be a JSON object")
    return data


def field(data: dict[str, Any], name: str, kind: type = str):
    if name not in data:
        raise RegistryError(f"missing field {name!r}")
    if not isinstance(data[name], kind):
        raise RegistryError(f"field {name!r} must be a {kind.__name__}")
    return data[name]


def dry_run() -> bool:
    return request.args.get("dry_run", "").lower() in ("1", "true", "yes")


# -- secrets --------------------------------------------------------------------


def redact(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of a policy record with ``secret`` parameter values hidden."""
    record = json.loads(json.dumps(record))
    hidden = redact_params(record.get("actions", []) + record.get("rules", []))
    for value in hidden:
        # The policy text holds the value as written: mask it there too.
        record["text"] = record["text"].replace(value, SECRET)
    return record


def redact_params(items: list[dict[str, Any]]) -> set[str]:
    """Hide, in place, the values of parameters ``public_params`` would not show
    (``secret`` ones, and those no longer declared).

    Returns the hidden values that were strings.
    """
    if "filters" not in g:  # once per request, however many records are shown
        g.filters = ctl().registries.vocabulary().filters
    filters = g.filters
    hidden = set()
    for item in items:
        meta = filters.get(item.get("filter"))
        params = item.get("params", {})
        hidden |= {value for name, value in params.items()
                   if isinstance(value, str) and value and not is_public(meta, name)}
        params.update(public_params(meta, params, mask=SECRET))  # in place, as documented
    return hidden
