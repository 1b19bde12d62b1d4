"""Who is calling the controller API.

A request carries a token in ``X-Auth-Token`` (or ``Authorization: Bearer``).

- The admin token of the configuration (the all-in-one generates one) makes
  the caller an administrator; it is compared in constant time.
- With ``keystone`` configured, other tokens are validated with
  python-keystoneclient (the controller logs in with its service
  credentials): a token with one of ``admin_roles`` is an administrator,
  any other valid token is the tenant of its project (account
  ``<reseller_prefix><project_id>``).
- With ``swift_url`` configured, a tenant token may instead be proven for
  one account by Swift itself (``HEAD /v1/<account>`` answering 2xx); this
  covers tempauth, whose tokens the controller cannot read. It is used only
  for the account a request names.

Successful validations are cached for ``cache_seconds`` (default 60) so a
busy CLI does not hammer Keystone; failures are not cached.

Config keys (controller JSON): ``admin_token``, ``keystone`` = {auth_url,
username, password, project_name, user_domain_name, project_domain_name,
admin_roles, interface (``public``)}, ``swift_url``, ``reseller_prefix``.
"""

from __future__ import annotations

import hmac
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote


@dataclass(frozen=True)
class Principal:
    admin: bool
    account: str | None = None  # the tenant's Swift account, for tenants
    name: str = ""

    def may_read(self, account: str) -> bool:
        return self.admin or self.account == account


class AuthError(Exception):
    def __init__(self, message: str, status: int = 401) -> None:
        super().__init__(message)
        self.status = status


def request_token(headers) -> str | None:
    token = headers.get("X-Auth-Token")
    if token:
        return token
    scheme, _, value = headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class _TTLCache:
    def __init__(self, seconds: float, size: int = 1024) -> None:
        self.seconds, self.size = seconds, size
        self._data: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            hit = self._data.get(key)
            return hit[1] if hit and time.monotonic() - hit[0] < self.seconds else None

    def put(self, key, value) -> None:
        with self._lock:
            if len(self._data) >= self.size:
                self._data.clear()
            self._data[key] = (time.monotonic(), value)


class KeystoneValidator:
    """Validate Keystone tokens with the service's own credentials."""

    def __init__(self, conf: dict[str, Any], reseller_prefix: str) -> None:
        from keystoneauth1 import session
        from keystoneauth1.identity import v3
        from keystoneclient.v3 import client

        auth = v3.Password(
            auth_url=conf["auth_url"], username=conf["username"], password=conf["password"],
            project_name=conf.get("project_name"),
            user_domain_name=conf.get("user_domain_name", "Default"),
            project_domain_name=conf.get("project_domain_name", "Default"),
        )
        self.client = client.Client(session=session.Session(auth=auth, timeout=10),
                                    interface=conf.get("interface", "public"))
        self.admin_roles = set(conf.get("admin_roles", ["admin"]))
        self.reseller_prefix = reseller_prefix

    def __call__(self, token: str) -> Principal:
        from keystoneauth1 import exceptions

        try:
            access = self.client.tokens.validate(token, include_catalog=False)
        except exceptions.NotFound:
            raise AuthError("invalid or expired token") from None
        except exceptions.ClientException as exc:
            raise AuthError(f"cannot validate the token with Keystone: {exc}", 503) from None
        if self.admin_roles & set(access.role_names or ()):
            return Principal(True, name=access.username or "")
        if not access.project_id:
            raise AuthError("the token is not scoped to a project", 403)
        return Principal(False, self.reseller_prefix + access.project_id, access.username or "")


class SwiftAccountValidator:
    """Ask Swift whether a token may access one account (works with any Swift auth)."""

    def __init__(self, swift_url: str) -> None:
        self.swift_url = swift_url.rstrip("/")

    def __call__(self, token: str, account: str) -> Principal:
        url = f"{self.swift_url}/v1/{quote(account)}"
        req = urllib.request.Request(url, method="HEAD", headers={"X-Auth-Token": token})
        try:
            with urllib.request.urlopen(req, timeout=10):  # noqa: S310 - configured URL
                return Principal(False, account)
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise AuthError("the token does not give access to this account") from None
            raise AuthError(f"cannot validate the token with Swift: {exc}", 503) from None
        except OSError as exc:
            raise AuthError(f"cannot validate the token with Swift: {exc}", 503) from None


class Authenticator:
    def __init__(self, config: dict[str, Any]) -> None:
        token = config.get("admin_token") or ""
        if len(token) < 16:
            raise ValueError("admin_token must be set (16 characters or more)")
        self.admin_token = token.encode()
        prefix = config.get("reseller_prefix", "AUTH_")
        self.keystone = KeystoneValidator(config["keystone"], prefix) \
            if config.get("keystone") else None
        self.swift = SwiftAccountValidator(config["swift_url"]) if config.get("swift_url") else None
        self.cache = _TTLCache(float(config.get("auth_cache_seconds", 60)))

    def authenticate(self, headers, account: str | None = None) -> Principal:
        """The caller of a request; ``account`` is the tenant account the request is about."""
        token = request_token(headers)
        if not token:
            raise AuthError("authentication required: send X-Auth-Token")
        if hmac.compare_digest(token.encode(), self.admin_token):
            return Principal(True, name="admin")
        key = (token, account)
        cached = self.cache.get(key)
        if cached:
            return cached
        principal = None
        if self.keystone:
            principal = self.keystone(token)
        elif self.swift and account:
            principal = self.swift(token, account)
        if principal is None:
            raise AuthError("invalid token")
        self.cache.put(key, principal)
        return principal
