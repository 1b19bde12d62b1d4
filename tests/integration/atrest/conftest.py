"""Data-at-rest fixtures: a tenant, a fresh container, and the ``iostack`` command on the stack."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import swiftclient


@pytest.fixture
def t1(swift_for) -> swiftclient.Connection:
    return swift_for("t1")


@pytest.fixture
def container(t1) -> Iterator[str]:
    """A fresh container of tenant t1's, emptied and removed after the test (scans stay short)."""
    name = f"ar-{uuid.uuid4().hex[:10]}"
    t1.put_container(name)
    yield name
    for entry in t1.get_container(name, full_listing=True)[1]:
        t1.delete_object(name, entry["name"])
    try:
        t1.delete_container(name)
    except swiftclient.ClientException as exc:
        if exc.http_status != 409:  # a versioned container keeps its old versions: left as is
            raise


@pytest.fixture
def iostack(aio) -> Callable[..., subprocess.CompletedProcess]:
    """``iostack(*argv)``: the command against the test stack (its controller and Swift)."""

    def run(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        target = ["--url", aio["controller_url"], "--token", aio["admin_token"],
                  "--swift-dir", aio["swift_dir"], "--state-dir", aio["state_dir"]]
        return subprocess.run([sys.executable, "-m", "iostack.cli", *argv, *target],  # noqa: S603
                              capture_output=True, text=True, timeout=timeout, check=False)

    return run


@pytest.fixture
def iostack_json(iostack) -> Callable[..., Any]:
    def run(*argv: str, timeout: float = 600) -> Any:
        done = iostack(*argv, "--json", timeout=timeout)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return run
