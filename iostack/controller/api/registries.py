"""The registries' routes: list, show and remove in every registry
(``registry_blueprint``), and the QoS classes, tenant groups and object types,
whose blueprints are no more than that and a ``PUT``. Filters and metrics
have their own modules."""

from __future__ import annotations

from flask import Blueprint, jsonify

from iostack.controller.api.base import body, ctl, field, require_admin


def registry_blueprint(kind: str) -> Blueprint:
    """``/v1/<kind>``: ``GET`` lists, ``GET``/``DELETE /v1/<kind>/<name>`` show and remove."""
    bp = Blueprint(kind, __name__, url_prefix=f"/{kind}")

    @bp.get("")
    def list_registry():
        require_admin()
        return jsonify({kind: ctl().registries.list(kind)})

    @bp.get("/<name>")
    def get_registry(name: str):
        require_admin()
        return jsonify(ctl().registries.get(kind, name))

    @bp.delete("/<name>")
    def delete_registry(name: str):
        require_admin()
        ctl().registries.delete(kind, name)
        return jsonify(deleted=name)

    return bp


classes = registry_blueprint("classes")
groups = registry_blueprint("groups")
object_types = registry_blueprint("object_types")


@classes.put("/<name>")
def put_class(name: str):
    require_admin()
    data = body() | {"name": name}
    field(data, "actions")
    return jsonify(ctl().registries.put_class(data).to_json()), 201


@groups.put("/<name>")
def put_group(name: str):
    require_admin()
    tenants = field(body(), "tenants", list)
    return jsonify(name=name, tenants=ctl().registries.put_group(name, tenants)), 201


@object_types.put("/<name>")
def put_object_type(name: str):
    require_admin()
    patterns = field(body(), "patterns", list)
    return jsonify(name=name.upper(),
                   patterns=ctl().registries.put_object_type(name, patterns)), 201
