"""Helpers of the console's browser tests (a module of its own: test directories are not
packages, so ``conftest`` is not a name tests can import from)."""

from __future__ import annotations


def login(tab, token: str, account: str | None = None) -> None:
    tab.goto("/ui/login")
    tab.get_by_label("Token", exact=True).fill(token)
    if account:
        tab.get_by_label("Account").fill(account)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url("**/ui/policies")


def tenant_token(aio, tenant: str) -> tuple[str, str]:
    """(token, account) of a tenant, from Swift's own auth."""
    import swiftclient

    creds = aio["tenants"][tenant]
    url, token = swiftclient.get_auth(aio["auth_url"], creds["user"], creds["key"])
    return token, url.rstrip("/").rsplit("/", 1)[1]
