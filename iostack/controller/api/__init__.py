"""The controller's REST API (Flask), under ``/v1``: one blueprint per resource.

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

The modules: ``base`` (the per-app ``Controller``, errors, auth, bodies,
secret redaction), ``service`` (health, OpenAPI), ``policies``, ``history``
(``/policies/history``), ``tenants``, ``explain``, ``volumes``, ``filters``,
``metrics``, ``monitoring``, ``qos``, ``simulate`` (jobs of ``policy
simulate``), and ``registries`` (the routes every
registry has; classes, groups, object types). The console (``ui``) uses the
helpers this package exports; ``iostack.controller.app`` mounts both.

The OpenAPI document (``iostack.controller.openapi``) is served at
``/v1/openapi.json``; a test keeps it and the routes in step.
"""

from __future__ import annotations

from flask import Blueprint

from iostack.controller.api import (
    explain,
    filters,
    history,
    metrics,
    monitoring,
    policies,
    qos,
    registries,
    service,
    simulate,
    tenants,
    volumes,
)
from iostack.controller.api.base import Controller, control_loop, ctl, error_response, redact
from iostack.controller.api.explain import explain_json, explain_volume
from iostack.controller.api.history import history_diff, history_entries, version_number
from iostack.controller.api.policies import redact_result, with_actors

__all__ = ["Controller", "control_loop", "ctl", "error_response", "explain_json",
           "explain_volume", "history_diff", "history_entries", "redact", "redact_result",
           "v1", "version_number", "with_actors"]

v1 = Blueprint("v1", __name__, url_prefix="/v1")
for resource in (service.bp, policies.bp, history.bp, tenants.bp, explain.bp, volumes.bp,
                 metrics.bp, monitoring.bp, qos.bp, filters.bp, simulate.bp, registries.classes,
                 registries.groups, registries.object_types):
    v1.register_blueprint(resource)

