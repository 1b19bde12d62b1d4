"""Clients for the all-in-one's tenants."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import swiftclient


@pytest.fixture(scope="session")
def swift_for(aio: dict[str, Any]) -> Callable[[str], swiftclient.Connection]:
    """``swift_for("t1")``: a swiftclient connection authenticated as that tenant's user."""

    def connect(tenant: str) -> swiftclient.Connection:
        creds = aio["tenants"][tenant]
        return swiftclient.Connection(
            authurl=aio["auth_url"], user=creds["user"], key=creds["key"], retries=0
        )

    return connect
