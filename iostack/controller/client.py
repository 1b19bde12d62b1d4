"""A small HTTP client for the controller API (used by the CLI; stdlib only).

``ControllerClient.from_env(url, token)`` takes explicit values first, then
``$IOSTACK_URL``/``$IOSTACK_TOKEN``, then the running all-in-one's
``aio.json`` (``controller_url``, ``admin_token``).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import quote, urlencode

from iostack.endpoints import load_aio_info


class ControllerError(Exception):
    """The API answered with an error (``status`` >= 400) or could not be reached (0)."""

    def __init__(self, status: int, message: str,
                 diagnostics: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.diagnostics = diagnostics or []

    def __str__(self) -> str:
        if self.diagnostics:
            return "\n".join(f"line {d['line']}, column {d['column']}: {d['message']}"
                             for d in self.diagnostics)
        return super().__str__()


class ControllerClient:
    def __init__(self, url: str, token: str | None, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    @classmethod
    def from_env(cls, url: str | None = None, token: str | None = None) -> ControllerClient:
        url = url or os.environ.get("IOSTACK_URL")
        token = token or os.environ.get("IOSTACK_TOKEN")
        if not url or not token:
            info = load_aio_info()  # AioNotRunning says how to start one
            url = url or info["controller_url"]
            token = token or info["admin_token"]
        return cls(url, token)

    def request(self, method: str, path: str, body: Any = None, query: dict | None = None,
                raw: bytes | None = None, content_type: str = "application/json") -> Any:
        url = f"{self.url}/v1{path}" + (f"?{urlencode(query)}" if query else "")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None
                                            else None)
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        if self.token:
            headers["X-Auth-Token"] = self.token
        req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310 - the controller URL given
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 - the URL given
                payload = resp.read()
                kind = resp.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            try:
                error = json.loads(exc.read())
            except ValueError:
                error = {"error": exc.reason}
            raise ControllerError(exc.code, error.get("error", str(exc.reason)),
                                  error.get("diagnostics")) from None
        except OSError as exc:
            raise ControllerError(0, f"cannot reach the controller at {self.url}: {exc}") \
                from None
        return json.loads(payload) if kind == "application/json" else payload

    # The verbs the CLI uses; each maps to one route (see openapi.py).

    def add_policies(self, text: str, dry_run: bool = False) -> dict[str, Any]:
        return self.request("POST", "/policies", {"text": text},
                            {"dry_run": "true"} if dry_run else None)

    def validate(self, text: str) -> dict[str, Any]:
        return self.request("POST", "/policies/validate", {"text": text})

    def policies(self) -> list[dict[str, Any]]:
        return self.request("GET", "/policies")["policies"]

    def policy(self, pid: str) -> dict[str, Any]:
        return self.request("GET", f"/policies/{quote(pid, safe='')}")

    def delete_policy(self, pid: str) -> dict[str, Any]:
        return self.request("DELETE", f"/policies/{quote(pid, safe='')}")

    def policy_status(self) -> dict[str, Any]:
        return self.request("GET", "/policies/status")

    def revoke(self, reason: str) -> dict[str, Any]:
        return self.request("PUT", "/policies/revocation", {"reason": reason})

    def reinstate(self) -> dict[str, Any]:
        return self.request("DELETE", "/policies/revocation")

    def history(self, limit: int | None = None) -> dict[str, Any]:
        return self.request("GET", "/policies/history", query={"limit": limit} if limit else None)

    def history_version(self, version: int) -> dict[str, Any]:
        return self.request("GET", f"/policies/history/{int(version)}")

    def history_diff(self, old: int, new: int) -> dict[str, Any]:
        return self.request("GET", "/policies/history/diff", query={"from": old, "to": new})

    def rollback(self, version: int, dry_run: bool = False) -> dict[str, Any]:
        return self.request("POST", f"/policies/history/{int(version)}/rollback",
                            query={"dry_run": "true"} if dry_run else None)

    def tenant_policies(self, account: str) -> dict[str, Any]:
        return self.request("GET", f"/tenants/{quote(account, safe='')}/policies")

    def explain(self, method: str, path: str, size: int | None = None,
                headers: dict[str, str] | None = None) -> dict[str, Any]:
        return self.request("POST", "/explain", {"method": method, "path": path, "size": size,
                                                 "headers": headers or {}})

    def explain_volume(self, volume: str, storage_group: str | None = None) -> dict[str, Any]:
        return self.request("POST", "/explain", {"volume": volume,
                                                 "storage_group": storage_group})

    def volume_stack(self, volume: str, storage_group: str | None = None) -> dict[str, Any]:
        """Like ``explain_volume`` but with secret parameters in clear (admin only)."""
        return self.request("GET", f"/volumes/{quote(volume, safe='')}/stack",
                            query={"storage_group": storage_group} if storage_group else None)

    def metric_series(self, metric: str, target: str, stage: str = "proxy",
                      last: int | None = None) -> dict[str, Any]:
        query = {"stage": stage} | ({"last": last} if last else {})
        return self.request("GET", f"/metrics/{quote(metric, safe='')}/{quote(target, safe='/*')}",
                            query=query)

    def monitoring(self) -> dict[str, Any]:
        return self.request("GET", "/monitoring")

    def qos(self) -> dict[str, Any]:
        return self.request("GET", "/qos")

    def registry(self, kind: str) -> dict[str, Any]:
        return self.request("GET", f"/{kind}")[kind]

    def item(self, kind: str, name: str) -> dict[str, Any]:
        return self.request("GET", f"/{kind}/{quote(name, safe='')}")

    def tenants(self) -> list[str]:
        return self.request("GET", "/tenants")["tenants"]

    def add_tenant(self, name: str) -> dict[str, Any]:
        return self.request("PUT", f"/tenants/{quote(name, safe='')}")

    def put(self, kind: str, name: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("PUT", f"/{kind}/{quote(name, safe='')}", body)

    def delete(self, kind: str, name: str) -> dict[str, Any]:
        return self.request("DELETE", f"/{kind}/{quote(name, safe='')}")

    def upload_code(self, name: str, code: bytes) -> dict[str, Any]:
        return self.request("PUT", f"/filters/{quote(name, safe='')}/code", raw=code,
                            content_type="application/octet-stream")
