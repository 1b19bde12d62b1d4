"""``/v1/filters``: the filter registry, and code uploaded for a filter (run sandboxed
as a Storlet)."""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from flask import Response, jsonify, request

from iostack.controller.api.base import body, ctl, require_admin
from iostack.controller.api.registries import registry_blueprint
from iostack.controller.registry import RegistryError

bp = registry_blueprint("filters")


@bp.put("/<name>")
def put_filter(name: str):
    require_admin()
    data = body() | {"name": name}
    return jsonify(ctl().registries.put_filter(data).to_json()), 201


@bp.put("/<name>/code")
def put_filter_code(name: str):
    """Store a filter's code (run sandboxed as a Storlet) and point its metadata at it.

    The code is run once on sample data first (``code_check``); code that
    fails is refused (400, naming the failure) and nothing is stored.
    """
    require_admin()
    controller = ctl()
    meta = controller.registries.get("filters", name)
    code = request.get_data()
    if not code:
        raise RegistryError("empty body: send the filter's code")
    failure = controller.code_check.failure(meta, code)
    if failure is not None:
        raise RegistryError(f"filter {meta['name']!r}: its code failed its check in a "
                            f"sandbox: {failure}. Nothing was stored or registered.")
    digest = hashlib.sha256(code).hexdigest()
    folder = controller.code_dir / meta["name"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / digest).write_bytes(code)
    meta["extra"] = meta.get("extra", {}) | {"runtime": "storlet", "code_sha256": digest,
                                            "code_size": len(code),
                                            "versions": _versions(folder)}
    return jsonify(controller.registries.put_filter(meta).to_json()), 201


def _versions(folder: Path) -> list[dict[str, Any]]:
    """Every code uploaded for a filter, oldest first: each is a version objects may use.

    They are all kept (objects decode with the version that encoded them; the
    storlet runtime pins each one in Swift under a name of its content).
    """
    files = sorted(folder.iterdir(), key=lambda path: (path.stat().st_mtime, path.name))
    return [{"sha256": path.name, "size": path.stat().st_size,
             "uploaded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(path.stat().st_mtime))}
            for path in files]


@bp.get("/<name>/code")
def get_filter_code(name: str):
    require_admin()
    controller = ctl()
    meta = controller.registries.get("filters", name)
    digest = meta.get("extra", {}).get("code_sha256")
    if not digest:
        raise RegistryError(f"filter {meta['name']!r} has no uploaded code", 404)
    code = (controller.code_dir / meta["name"] / digest).read_bytes()
    return Response(code, mimetype="application/octet-stream",
                    headers={"X-Code-Sha256": digest})
