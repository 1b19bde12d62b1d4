"""Fixtures for Storlets through the all-in-one: a storlet-enabled tenant with storlets deployed.

The sandbox suite (``test_storlet_isolation``) runs against both runtimes:
``sandbox_aio`` is the session's stack (bubblewrap) or ``docker_aio``, one
stack per test session started with ``--sandbox docker`` (Storlets' docker
gateway against the Podman service that stack owns); ``sandbox_tenant_for``
and ``sandbox_of`` give its storlet-enabled tenants and a scope's sandbox.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from swiftclient.client import Connection

from iostack.aio.session import StackStartError, started_stack
from iostack.storlet_runtime.host import deploy
from iostack.storlet_runtime.host.container import ContainerScope
from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.host.sandbox import ScopeSandbox
from iostack.storlet_runtime.storlets import upper
from tests.conftest import TEST_STATE_DIR

HERE = Path(__file__).resolve().parent
PROBE = HERE / "isolation_probe.py"


class StorletTenant:
    """A tenant with Storlets enabled, its token, and a container of test objects."""

    def __init__(self, info: dict[str, Any], tenant: str) -> None:
        creds = info["tenants"][tenant]
        self.info = info
        self.conn = Connection(info["auth_url"], creds["user"], creds["key"])
        self.url, self.token = self.conn.get_auth()
        self.container = "storlet-tests"

    def object_url(self, name: str) -> str:
        return f"{self.url}/{self.container}/{name}"

    def get(self, name: str, headers: dict[str, str] | None = None,
            params: dict[str, str] | None = None, timeout: float = 60) -> requests.Response:
        return requests.get(self.object_url(name), params=params, timeout=timeout,
                            headers={"X-Auth-Token": self.token, **(headers or {})})

    def put(self, name: str, body: bytes, headers: dict[str, str] | None = None,
            params: dict[str, str] | None = None) -> requests.Response:
        return requests.put(self.object_url(name), data=body, params=params, timeout=60,
                            headers={"X-Auth-Token": self.token, **(headers or {})})


def storlet_enabled(info: dict[str, Any], name: str) -> StorletTenant:
    """``name`` of the stack ``info`` with Storlets enabled, upper.py and the probe uploaded."""
    tenant = StorletTenant(info, name)
    deploy.enable_account(tenant.conn)
    for path in (Path(upper.__file__), PROBE):
        deploy.upload_storlet(tenant.conn, deploy.check_python_storlet(path.name,
                                                                       path.read_bytes()))
    tenant.conn.put_container(tenant.container)
    return tenant


@pytest.fixture(scope="session")
def storlet_tenant(aio: dict[str, Any]) -> StorletTenant:
    return storlet_enabled(aio, "t1")


@pytest.fixture(scope="session")
def docker_aio(shared_services) -> Iterator[dict[str, Any]]:
    """A stack whose Storlets sandbox is the container runtime, shared by the session."""
    # Under the tests' state dir, as the session's stack (pytest's tmp dirs are 0700).
    state_dir = TEST_STATE_DIR / f"docker-{os.getpid()}"
    args = ["--sandbox", "docker", *shared_services.stack_args(f"test-dk-{uuid.uuid4().hex[:8]}")]
    try:
        with started_stack(state_dir, *args) as info:
            yield info
    except StackStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module", params=["bubblewrap", "docker"])
def sandbox_aio(request) -> dict[str, Any]:
    """A stack running the sandbox runtime of the parameter (the module's tests group by it)."""
    if request.param == "docker":
        return request.getfixturevalue("docker_aio")
    info = request.getfixturevalue("aio")
    if info.get("sandbox", "bubblewrap") == request.param:
        return info
    pytest.skip("the running 'make run' stack has the docker sandbox; stop it (make stop) "
                "for a bubblewrap stack of the test session")


@pytest.fixture(scope="module")
def sandbox_tenant_for(sandbox_aio):
    """``sandbox_tenant_for("t1")``: that tenant of ``sandbox_aio``, ``storlet_enabled``."""
    return lambda name: storlet_enabled(sandbox_aio, name)


@pytest.fixture(scope="module")
def sandbox_of(sandbox_aio):
    """``sandbox_of("AUTH_t1")``: the pid record (and channels) of that account's sandbox."""
    scope_class = ContainerScope if sandbox_aio.get("sandbox") == "docker" else ScopeSandbox

    def find(account: str) -> ScopeSandbox:
        return scope_class(Path(sandbox_aio["state_dir"]) / "storlets" / "sandboxes",
                           sandbox_scope(account))

    return find


@pytest.fixture(scope="session")
def plain_tenant(aio: dict[str, Any]) -> StorletTenant:
    """A tenant that never enabled Storlets (t3)."""
    tenant = StorletTenant(aio, "t3")
    tenant.conn.put_container(tenant.container)
    return tenant


@pytest.fixture(scope="session")
def tenant_for(aio: dict[str, Any]):
    """``tenant_for("t2")``: another tenant's client (Storlets not enabled by this fixture)."""
    return lambda name: StorletTenant(aio, name)


@pytest.fixture(scope="session")
def iostack(aio: dict[str, Any]):
    """``iostack("storlet", "upload", ...)``: the CLI against this test session's stack."""

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(  # fixed argv
            [sys.executable, "-m", "iostack.cli", *args], capture_output=True, text=True,
            timeout=120, env={**os.environ, "IOSTACK_STATE_DIR": aio["state_dir"]}, check=False)

    return run


@pytest.fixture
def noop_sandboxed_container(swift_for, policies, iostack):
    """``noop_sandboxed_container(actions)``: t1's client and a new container under ``actions``,
    with the library's noop deployed as t1's storlet (for ``SET NOOP SANDBOXED``)."""
    deployed = iostack("storlet", "deploy", "noop", "--tenant", "t1")
    assert deployed.returncode == 0, deployed.stderr
    conn = swift_for("t1")

    def make(actions: str):
        container = f"sbx-{uuid.uuid4().hex[:8]}"
        conn.put_container(container)
        policies.add(f"FOR CONTAINER AUTH_t1/{container} DO {actions}")
        return conn, container

    return make


@pytest.fixture(scope="session")
def upload_t1_filter(iostack):
    """``upload_t1_filter("zlib_filter.ZlibFilter", "tzlib", *options)``: ``<module>.py`` of this
    folder uploaded as t1's filter through the CLI; returns the filter's (unique) name."""

    def upload(main: str, prefix: str, *options: str) -> str:
        name = f"{prefix}{uuid.uuid4().hex[:6]}"
        module = main.split(".")[0]
        done = iostack("filter", "upload", str(HERE / f"{module}.py"), "--name", name,
                       "--main", main, "--tenant", "t1", *options)
        assert done.returncode == 0, done.stderr
        return name

    return upload



@pytest.fixture(scope="session")
def storlet_of(aio):
    """``storlet_of("tzlib1a2b3c")``: the pinned storlet (``iostack_pin_<hash>.py``) that runs
    an uploaded filter's current version."""

    def find(name: str) -> str:
        meta = requests.get(f"{aio['controller_url']}/v1/filters/{name}", timeout=30,
                            headers={"X-Auth-Token": aio["admin_token"]}).json()
        return meta["extra"]["storlet"]

    return find
