"""The console's browser tests: a page of Debian's Chromium (``browser``, tests/integration).

``page`` is a fresh context (its own cookies) of the session's ``browser``
(``tests/conftest.py``) on the aio's controller;
``shot(page,
name)`` saves a screenshot under ``<test state dir>/artifacts/console/``
(``$IOSTACK_TEST_STATE_DIR``, default ``.iostack-test``: it outlives the
session's private stack, whose own state dir is removed when it stops).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture
def page(browser, aio) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 800},
                                  base_url=aio["controller_url"])
    context.set_default_timeout(15000)
    errors: list[str] = []
    tab = context.new_page()
    # A CSP violation or a script error shows in the console: the test fails on it.
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.errors = errors
    yield tab
    context.close()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    checkout = Path(__file__).resolve().parents[3]
    root = Path(os.environ.get("IOSTACK_TEST_STATE_DIR", checkout / ".iostack-test"))
    folder = root / "artifacts" / "console"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def shot(artifacts):
    def save(tab, name: str, full_page: bool = True) -> Path:
        path = artifacts / f"{name}.png"
        tab.screenshot(path=str(path), full_page=full_page)
        return path
    return save
