"""Fixtures of more than one integration directory.

``browser``: Debian's Chromium driven by Playwright (never a browser of its
own), one per session, started with ``executable_path`` and flags that keep
it off the network: Playwright must never download a browser here. The
console's tests (``console/``) and the Keystone console login
(``keystone/``) open their pages in it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("IOSTACK_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-default-apps",
        "--no-first-run", "--disable-dev-shm-usage"]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: 'make setup' installs Debian's chromium")
    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield instance
        instance.close()
