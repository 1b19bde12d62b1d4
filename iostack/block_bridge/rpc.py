"""JSON-RPC 2.0 dispatch for the block bridge API (Konnector/targetd style).

Methods take the request's ``params`` object and return the ``result``.
Method names are accepted with underscores (targetd) or hyphens
(Konnector's ``create-filtered-volume``). Errors carry targetd's codes where
it has one: -32602 invalid params (bad filters included), -50 name
conflict, -103 volume not found; -32000 for a failure while acting.
Bodies nested deeper than ``bounded_json.MAX_DEPTH`` levels are a parse
error (-32700), never a ``RecursionError`` that drops the connection.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from iostack import bounded_json

from .initiator import InitiatorError
from .volumes import VolumeError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
FAILED = -32000
NAME_CONFLICT = -50
NOT_FOUND = -103

KIND_CODES = {"invalid": INVALID_PARAMS, "conflict": NAME_CONFLICT, "not_found": NOT_FOUND,
              "failed": FAILED}

log = logging.getLogger(__name__)

Method = Callable[[dict], Any]


def _error(rid: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


class Dispatcher:
    def __init__(self, methods: dict[str, Method]) -> None:
        self.methods = methods

    def handle(self, body: bytes) -> dict | list | None:
        """One HTTP body in, the response document out (None: nothing to send)."""
        try:
            request = bounded_json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(None, PARSE_ERROR, f"parse error: {exc}")
        if isinstance(request, list):
            if not request:
                return _error(None, INVALID_REQUEST, "empty batch")
            replies = [r for r in (self._one(item) for item in request) if r is not None]
            return replies or None
        return self._one(request)

    def _one(self, request: Any) -> dict | None:
        if not isinstance(request, dict) or request.get("jsonrpc") != "2.0" \
                or not isinstance(request.get("method"), str):
            return _error(None, INVALID_REQUEST,
                          "invalid request: need jsonrpc '2.0' and a method name")
        rid = request.get("id")
        is_notification = "id" not in request
        name = request["method"].replace("-", "_")
        params = request.get("params", {})
        method = self.methods.get(name)
        if method is None:
            reply = _error(rid, METHOD_NOT_FOUND, f"method {request['method']!r} not found; "
                                                  f"known: {', '.join(sorted(self.methods))}")
        elif not isinstance(params, dict):
            reply = _error(rid, INVALID_PARAMS, "params must be an object")
        else:
            reply = self._call(rid, name, method, params)
        return None if is_notification else reply

    @staticmethod
    def _call(rid: Any, name: str, method: Method, params: dict) -> dict:
        try:
            return {"jsonrpc": "2.0", "id": rid, "result": method(params)}
        except (VolumeError, InitiatorError) as exc:
            return _error(rid, KIND_CODES[exc.kind], str(exc))
        except Exception:
            log.exception("%s failed", name)
            return _error(rid, INTERNAL_ERROR, f"{name}: internal error (see service log)")
