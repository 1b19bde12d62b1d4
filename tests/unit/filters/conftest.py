"""Fixtures for the filter library's unit tests."""

from __future__ import annotations

import pytest

from iostack.filters.base import FilterContext
from iostack.filters.tenant_keys import KeyFileProvider, create_key_file


@pytest.fixture
def key_provider(tmp_path) -> KeyFileProvider:
    path = tmp_path / "root.key"
    create_key_file(path)
    return KeyFileProvider(path)


@pytest.fixture
def context(key_provider) -> FilterContext:
    return FilterContext("AUTH_t1", "logs", "day1.log", keys=key_provider)
