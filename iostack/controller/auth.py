"""Who is calling the controller API.

A request carries a token in ``X-Auth-Token`` (or ``Authorization: Bearer``).

- The admin token of the configuration (the all-in-one generates one) makes
  the caller an administrator; it is compared in constant time.
- With ``keystone`` configured, other tokens are validated with
  python-keystoneclient (the controller logs in with its service
  credentials). A token is an IOStack administrator only if it carries one
  of ``admin_roles`` (default ``["admin"]``) *and* is scoped to the admin
  project (``admin_project_id``, or ``admin_project_name`` in
  ``admin_project_domain_name``, default ``Default``; one of them must be
  configured). Keystone's ``admin`` role is per project: a user who is
  ``admin`` of their own project is that project's tenant here, nothing
  more. Any other valid project-scoped token is the tenant of its project
  (account ``<reseller_prefix><project_id>``); domain- and system-scoped
  tokens get nothing.
- With ``swift_url`` configured, a tenant token may instead be proven for
  one account by Swift itself (``HEAD /v1/<account>`` answering 2xx); this
  covers tempauth, whose tokens the controller cannot read. It is used only
  for the account a request names.

Successful validations are cached for ``auth_cache_seconds`` (default 60),
and never past the token's own expiry, so a busy CLI does not hammer
Keystone; failures are not cached. The window this opens: a token revoked,
or a role removed, in Keystone keeps its access here for up to
``auth_cache_seconds`` (set 0 to validate every request).

Config keys (controller JSON): ``admin_token``, ``keystone`` = {auth_url,
username, password, project_name, user_domain_name, project_domain_name,
admin_roles, admin_project_id | admin_project_name (+ admin_project_domain_name),
interface (``public``)}, ``swift_url``, ``reseller_prefix``,
``auth_cache_seconds``.
"""

from __future__ import annotations

import hmac
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
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
            return hit[1] if hit and time.monotonic() < hit[0] else None

    def put(self, key, value, at_most: float | None = None) -> None:
        """Keep ``value`` for the cache's seconds, or ``at_most`` seconds if that is less."""
        seconds = self.seconds if at_most is None else min(self.seconds, at_most)
        if seconds <= 0:
            return
        with self._lock:
            if len(self._data) >= self.size:
                self._data.clear()
            self._data[key] = (time.monotonic() + seconds, value)


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
        self.admin_project_id = conf.get("admin_project_id")
        self.admin_project = (conf.get("admin_project_name"),
                              conf.get("admin_project_domain_name", "Default"))
        if not (self.admin_roles and (self.admin_project_id or self.admin_project[0])):
            raise ValueError("keystone: set admin_roles and admin_project_id or "
                             "admin_project_name (an admin role is per project in Keystone)")
        self.reseller_prefix = reseller_prefix

    def __call__(self, token: str) -> tuple[Principal, float | None]:
        """The token's principal, and for how many more seconds the token is valid."""
        from keystoneauth1 import exceptions

        try:
            access = self.client.tokens.validate(token, include_catalog=False)
        except exceptions.NotFound:
            raise AuthError("invalid or expired token") from None
        except exceptions.ClientException as exc:
            raise AuthError(f"cannot validate the token with Keystone: {exc}", 503) from None
        remaining = ((access.expires - datetime.now(timezone.utc)).total_seconds()
                     if access.expires else None)
        if not access.project_id:
            raise AuthError("the token is not scoped to a project", 403)
        name = access.username or ""
        if self._admin(access):
            return Principal(True, name=name), remaining
        return Principal(False, self.reseller_prefix + access.project_id, name), remaining

    def _admin(self, access) -> bool:
        if not self.admin_roles & set(access.role_names or ()):
            return False
        if self.admin_project_id:
            return access.project_id == self.admin_project_id
        return (access.project_name, access.project_domain_name) == self.admin_project


class SwiftAccountValidator:
    """Ask Swift whether a token may access one account (works with any Swift auth)."""

    def __init__(self, swift_url: str) -> None:
        self.swift_url = swift_url.rstrip("/")

    def __call__(self, token: str, account: str) -> Principal:
        url = f"{self.swift_url}/v1/{quote(account)}"
        req = urllib.request.Request(url, method="HEAD", headers={"X-Auth-Token": token})  # noqa: S310 - configured Swift URL
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
        principal, remaining = None, None
        if self.keystone:
            principal, remaining = self.keystone(token)
        elif self.swift and account:
            principal = self.swift(token, account)
        if principal is None:
            raise AuthError("invalid token")
        self.cache.put(key, principal, remaining)
        return principal
