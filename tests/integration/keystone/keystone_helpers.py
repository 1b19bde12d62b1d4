"""Clients of the Keystone stack's identities (``aio.json``'s ``os_*`` settings)."""

from __future__ import annotations

from typing import Any

import swiftclient
from keystoneauth1 import session
from keystoneauth1.identity import v3

TOKEN_CACHE_SECONDS = 5  # the test stack's token_cache_seconds


def keystone_session(settings: dict[str, Any], **scope: str) -> session.Session:
    """A keystoneauth session for ``os_*`` settings (``aio.json``), project-scoped unless
    ``scope`` names another project."""
    auth = v3.Password(auth_url=settings["os_auth_url"], username=settings["os_username"],
                       password=settings["os_password"],
                       user_domain_name=settings["os_user_domain_name"],
                       **(scope or {"project_name": settings["os_project_name"],
                                    "project_domain_name": settings["os_project_domain_name"]}))
    return session.Session(auth=auth, timeout=30)


def swift_v3(settings: dict[str, Any]) -> swiftclient.Connection:
    """swiftclient with Keystone v3 password auth, as ``swift --os-auth-url ...`` does."""
    return swiftclient.Connection(
        authurl=settings["os_auth_url"], user=settings["os_username"],
        key=settings["os_password"], auth_version="3", retries=0,
        os_options={"project_name": settings["os_project_name"],
                    "user_domain_name": settings["os_user_domain_name"],
                    "project_domain_name": settings["os_project_domain_name"]})
