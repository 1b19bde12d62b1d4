"""Data-path test fixtures: a tenant and a fresh container."""

from __future__ import annotations

import uuid

import pytest
import swiftclient


@pytest.fixture
def t1(swift_for) -> swiftclient.Connection:
    return swift_for("t1")


@pytest.fixture
def container(t1) -> str:
    name = f"dp-{uuid.uuid4().hex[:10]}"
    t1.put_container(name)
    return name
