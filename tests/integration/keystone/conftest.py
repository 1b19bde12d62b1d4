"""A stack with ``--auth keystone``, started once for the Keystone tests.

Its Keystone runs from the virtualenv ``make test`` installs
(``iostack aio install-keystone``: ``.iostack/openstack/keystone-venv``; the
stack installs it there first if it is missing). Validated tokens are cached
for ``keystone_helpers.TOKEN_CACHE_SECONDS`` by authtoken and by the
controller, so the revocation test waits seconds, not the default five minutes.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from keystone_helpers import TOKEN_CACHE_SECONDS

from iostack.aio.keystone import default_venv
from iostack.aio.session import StackStartError, started_stack
from iostack.controller.client import ControllerClient
from iostack.endpoints import default_state_dir
from tests.conftest import TEST_STATE_DIR, admin_of


@pytest.fixture(scope="session")
def keystone_stack(shared_services) -> Iterator[dict[str, Any]]:
    # Under the tests' state dir, as the session's stack: the sandbox user must be able to
    # enter the storlet directories (pytest's tmp dirs are 0700).
    state_dir = TEST_STATE_DIR / f"keystone-{os.getpid()}" / "aio"
    args = ["--auth", "keystone", "--keystone-venv", str(default_venv(default_state_dir())),
            "--token-cache-seconds", str(TOKEN_CACHE_SECONDS),
            *shared_services.stack_args(f"test-ks-{uuid.uuid4().hex[:8]}")]
    try:
        with started_stack(state_dir, *args) as info:
            yield info
    except StackStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def ks_admin(keystone_stack) -> Iterator[ControllerClient]:
    """The Keystone stack's controller with its admin token; policies removed after."""
    yield from admin_of(keystone_stack)
