"""The OpenAPI 3 description of the controller API, served at ``/v1/openapi.json``.

``tests/unit/controller/test_controller_api.py`` compares it with the Flask
routes, so a route added without documentation (or the reverse) fails.
"""

from __future__ import annotations

from typing import Any

REGISTRY_KINDS = ("filters", "metrics", "classes", "groups", "object_types")


def _op(summary: str, ok: str = "200", body: dict | None = None, params: list | None = None,
        auth: bool = True, body_type: str = "application/json") -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {
        ok: {"description": "success", "content": {"application/json": {"schema": {
            "type": "object"}}}},
        "default": {"description": "error", "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/Error"}}}},
    }}
    if body is not None:
        op["requestBody"] = {"required": True, "content": {body_type: {"schema": body}}}
    if params:
        op["parameters"] = params
    if not auth:
        op["security"] = []
    return op


def _path_param(name: str, description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"},
            "description": description}


_TEXT = {"type": "object", "required": ["text"], "properties": {
    "text": {"type": "string", "description": "policies, one per line or ';'-separated"}}}


def openapi_document() -> dict[str, Any]:
    name = _path_param("name")
    paths: dict[str, dict[str, Any]] = {
        "/v1/health": {"get": _op("Liveness and Redis reachability", auth=False)},
        "/v1/openapi.json": {"get": _op("This document", auth=False)},
        "/v1/policies": {
            "get": _op("List policies (admin)"),
            "post": _op("Add policies atomically; ?dry_run=true only checks", "201", _TEXT,
                        [{"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}]),
        },
        "/v1/policies/validate": {"post": _op("Check policy text; changes nothing", body=_TEXT)},
        "/v1/policies/status": {"get": _op(
            "The store's policy version and, per proxy worker, the version it enforces, "
            "since when, and who is behind (admin)")},
        "/v1/policies/revocation": {
            "put": _op("Revoke the store's state: every node refuses writes (503 naming the "
                       "reason) until reinstated (admin)",
                       body={"type": "object", "required": ["reason"],
                             "properties": {"reason": {"type": "string"}}}),
            "delete": _op("Reinstate a revoked store's state (admin)")},
        "/v1/policies/history": {"get": _op(
            "Policy changes, newest first: who, when, op, policies added and removed (admin)",
            params=[{"name": "limit", "in": "query", "schema": {"type": "integer"}}])},
        "/v1/policies/history/diff": {"get": _op(
            "Policies (by text) and compiled rules in one history version and not the other",
            params=[{"name": "from", "in": "query", "required": True,
                     "schema": {"type": "integer"}},
                    {"name": "to", "in": "query", "required": True,
                     "schema": {"type": "integer"}}])},
        "/v1/policies/history/{version}": {"get": _op(
            "One history version: the change, its compiled diff and the policies then",
            params=[_path_param("version", "0 is the baseline")])},
        "/v1/policies/history/{version}/rollback": {"post": _op(
            "Make the policy set what it was at a version, atomically, through the compiler; "
            "?dry_run=true only checks", params=[
                _path_param("version"),
                {"name": "dry_run", "in": "query", "schema": {"type": "boolean"}}])},
        "/v1/policies/{pid}": {
            "get": _op("One policy", params=[_path_param("pid", "e.g. P7")]),
            "delete": _op("Remove a policy and its rules", params=[_path_param("pid")]),
        },
        "/v1/tenants/{account}/policies": {
            "get": _op("Policies that apply to an account (admin or that tenant)",
                       params=[_path_param("account", "Swift account, e.g. AUTH_t1")]),
        },
        "/v1/explain": {"post": _op(
            "Resolved pipeline of a request (method, path...) or of a volume (volume, "
            "storage_group), and why", body={"type": "object", "properties": {
                "method": {"type": "string", "example": "PUT"},
                "path": {"type": "string", "example": "/v1/AUTH_t1/logs/a.csv"},
                "size": {"type": "integer", "minimum": 0},
                "headers": {"type": "object", "additionalProperties": {"type": "string"}},
                "volume": {"type": "string"}, "storage_group": {"type": "string"}}})},
        "/v1/volumes/{volume}/stack": {"get": _op(
            "A volume's resolved filter stack with secret parameters (keys) in clear, for "
            "the block bridge (admin)",
            params=[_path_param("volume"),
                    {"name": "storage_group", "in": "query", "schema": {"type": "string"}}])},
        "/v1/simulate": {"post": _op(
            "Start a simulation job: what a policy (text, or a stored one's id) would do to "
            "the objects its targets hold (admin; a tenant for its own account only)", "202",
            body={"type": "object", "properties": {
                "text": {"type": "string"}, "id": {"type": "string"},
                "account": {"type": "string", "description": "a tenant's Swift account"},
                "limit": {"type": "integer", "minimum": 0},
                "sample": {"type": "integer", "minimum": 0},
                "now": {"type": "number", "description": "judge OBJECT_AGE as of this time"}}})},
        "/v1/simulate/{job}": {"get": _op(
            "A simulation job's state, progress and result (its starter or an admin)",
            params=[_path_param("job"),
                    {"name": "account", "in": "query", "schema": {"type": "string"}}])},
        "/v1/tenants": {"get": _op("Known tenants (accounts)")},
        "/v1/tenants/{name}": {"put": _op("Record a known tenant", "201", params=[name])},
        "/v1/metrics/{metric}/{target}": {"get": _op(
            "Recent values of a metric for a target (admin, or the tenant the target is in)",
            params=[_path_param("metric", "e.g. PUTS_SEC"),
                    _path_param("target", "*, a tenant (t1 or AUTH_t1), a container "
                                "(AUTH_t1/logs, */logs) or group:<name>"),
                    {"name": "stage", "in": "query",
                     "schema": {"enum": ["proxy", "object"]}},
                    {"name": "last", "in": "query", "schema": {"type": "integer"}}])},
        "/v1/monitoring": {"get": _op(
            "The last closed interval: every target's metrics, the sources heard from, "
            "lost and late samples, and the policy actors' state (admin)")},
        "/v1/qos": {"get": _op(
            "Bandwidth SLOs per scope: target, rate assigned over all proxies and achieved, "
            "per direction, for the last interval; the configured capacity (admin)")},
        "/v1/filters/{name}/code": {
            "put": _op("Upload a filter's code (runs sandboxed as a Storlet); it is run once "
                       "on sample data in a sandbox first, and code that fails is refused "
                       "(400 naming the failure) with nothing stored", "201",
                       {"type": "string", "format": "binary"}, [name],
                       body_type="application/octet-stream"),
            "get": _op("Download a filter's code", params=[name]),
        },
    }
    bodies = {
        "filters": {"$ref": "#/components/schemas/FilterMetadata"},
        "metrics": {"type": "object", "properties": {
            "kind": {"enum": ["number", "size", "rate", "ops", "duration"]},
            "description": {"type": "string"}}},
        "classes": {"type": "object", "required": ["actions"], "properties": {
            "actions": {"type": "string", "example": "SET compression, SET caching"},
            "description": {"type": "string"}}},
        "groups": {"type": "object", "required": ["tenants"], "properties": {
            "tenants": {"type": "array", "items": {"type": "string"}}}},
        "object_types": {"type": "object", "required": ["patterns"], "properties": {
            "patterns": {"type": "array", "items": {"type": "string"},
                         "description": "regexes on the object name, or mime:<regex>"}}},
    }
    for kind in REGISTRY_KINDS:
        label = kind.replace("_", " ")
        paths[f"/v1/{kind}"] = {"get": _op(f"List {label}")}
        paths[f"/v1/{kind}/{{name}}"] = {
            "get": _op(f"One of the {label}", params=[name]),
            "put": _op(f"Create or replace one of the {label}", "201", bodies[kind], [name]),
            "delete": _op(f"Remove one of the {label} (refused while policies use it)",
                          params=[name]),
        }
    return {
        "openapi": "3.0.3",
        "info": {"title": "IOStack controller", "version": "1",
                 "description": "Policies, vocabulary registries and explain for IOStack."},
        "paths": paths,
        "components": {
            "securitySchemes": {"token": {"type": "apiKey", "in": "header",
                                          "name": "X-Auth-Token"}},
            "schemas": {
                "Error": {"type": "object", "properties": {
                    "error": {"type": "string"}, "status": {"type": "integer"},
                    "diagnostics": {"type": "array", "items": {"type": "object", "properties": {
                        "line": {"type": "integer"}, "column": {"type": "integer"},
                        "message": {"type": "string"}}}}}},
                "FilterMetadata": {"type": "object", "properties": {
                    "description": {"type": "string"}, "params": {"type": "array"},
                    "methods": {"type": "array", "items": {"type": "string"}},
                    "stages": {"type": "array", "items": {"enum": ["proxy", "object"]}},
                    "default_stage": {"type": "string"}, "changes_size": {"type": "boolean"},
                    "layout_group": {"type": "string", "nullable": True},
                    "runs_before": {"type": "array", "items": {"type": "string"}},
                    "sandboxable": {"type": "boolean"}, "extra": {"type": "object"}}},
            },
        },
        "security": [{"token": []}],
    }
