"""Shared fixtures.

``aio`` (session scope) gives integration tests a running all-in-one: the one
``make run`` started (``.iostack/`` or ``$IOSTACK_STATE_DIR``) if it answers,
otherwise a private stack started for this test session in
``$IOSTACK_TEST_STATE_DIR`` (default ``.iostack-test/`` in the checkout) on
free ports, and stopped when the session ends. It returns the stack's
``aio.json`` as a dict.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from iostack.aio.services import free_port
from iostack.aio.state import AioNotRunning, load_aio_info

CHECKOUT = Path(__file__).resolve().parents[1]


def _running_stack() -> dict[str, Any] | None:
    try:
        info = load_aio_info()
        with urllib.request.urlopen(f"{info['swift_url']}/healthcheck", timeout=2):  # noqa: S310
            return info
    except (AioNotRunning, OSError, KeyError):
        return None


def _aio_command(verb: str, state_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "aio", verb, "--state-dir", str(state_dir), *extra],
        capture_output=True, text=True, timeout=180, check=False,
    )


@pytest.fixture(scope="session")
def aio() -> Any:
    running = _running_stack()
    if running:
        yield running
        return
    state_dir = Path(os.environ.get("IOSTACK_TEST_STATE_DIR", CHECKOUT / ".iostack-test"))
    names = ("proxy", "account", "container", "object", "controller")
    chosen: set[int] = set()
    while len(chosen) < len(names):
        chosen.add(free_port())
    ports = [arg for name, port in zip(names, sorted(chosen), strict=True)
             for arg in (f"--{name}-port", str(port))]
    started = _aio_command("start", state_dir, "--json", *ports)
    if started.returncode != 0:
        pytest.fail(f"all-in-one did not start:\n{started.stdout}\n{started.stderr}")
    try:
        yield json.loads(started.stdout)
    finally:
        _aio_command("stop", state_dir)
