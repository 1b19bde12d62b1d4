"""Shared fixtures.

``aio`` (session scope) gives integration tests a running all-in-one: the one
``make run`` started (``.iostack/`` or ``$IOSTACK_STATE_DIR``) if it answers,
otherwise a private stack started for this test session under
``$IOSTACK_TEST_STATE_DIR`` (default ``.iostack-test/<pid>`` in the checkout)
on free ports, and stopped when the session ends. Private stacks share one
private Redis and one private RabbitMQ per test session (``shared_services``:
each stack its own vhost and key namespace), never the machine's own
servers; ``shared_redis_url`` is that Redis for tests that need only Redis
(each keeps its keys under a prefix of its own). It returns the stack's
``aio.json`` as a dict; ``swift_for(tenant)`` and ``s3_for(tenant)`` connect to it as a
tenant (swiftclient, boto3);
``policies`` adds policies through its controller and removes them after the test;
``stored`` and ``overwrite_stored`` read and replace bytes as the object servers hold them;
``no_chmod`` checks that files are private from their creation;
``redis_server`` starts a Redis configured by the test (say, without a password).
``private_stack`` starts a second stack for one test module (with the module's
``PRIVATE_STACK_ARGS``; ``--redis-url``/``--amqp-url`` there replace the
shared ones, an empty one gives the stack a private server of its own) and
``private_admin`` is its controller.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import swiftclient
from swift.common import direct_client, utils
from swift.common.ring import Ring

from iostack.aio.session import (
    SharedServices,
    StackStartError,
    aio_command,
    free_port_args,
    running_stack,
)
from iostack.controller.client import ControllerClient
from iostack.ports import free_port, wait_until

CHECKOUT = Path(__file__).resolve().parents[1]
TEST_STATE_DIR = Path(os.environ.get("IOSTACK_TEST_STATE_DIR", CHECKOUT / ".iostack-test"))


@pytest.fixture
def no_chmod(monkeypatch) -> Iterator[None]:
    """Modes stay as created: the umask is 0 and a chmod fails the test, so a private mode
    seen afterwards was there from the moment the file or directory existed.

    A chmod of a file in a directory only its owner can enter is let through: no one
    else could have opened the file before it (e.g. storlet_runtime's support files in
    the 0700 Swift config dir)."""
    real_chmod = os.chmod

    def chmod(path, mode, *args, **kwargs) -> None:
        if os.stat(Path(path).parent).st_mode & 0o077:
            raise AssertionError(f"chmod after creation in a shared directory: {path}")
        real_chmod(path, mode, *args, **kwargs)

    def fchmod(*args: object) -> None:
        raise AssertionError(f"fchmod after creation: {args}")

    monkeypatch.setattr(os, "chmod", chmod)
    monkeypatch.setattr(os, "fchmod", fchmod)
    old = os.umask(0)
    yield
    os.umask(old)


@pytest.fixture
def redis_server(tmp_path) -> Iterator[Callable[..., str]]:
    """``start(*config_lines)``: a redis-server on a free loopback port; its URL without
    credentials. Stopped after the test."""
    started: list[subprocess.Popen] = []

    def start(*lines: str) -> str:
        port = free_port()
        conf = tmp_path / f"redis-{port}.conf"
        conf.write_text("\n".join([f"port {port}", "bind 127.0.0.1", 'save ""',
                                   f"dir {tmp_path}", *lines, ""]))
        started.append(subprocess.Popen([shutil.which("redis-server"), str(conf)],  # noqa: S603
                                        stdout=subprocess.DEVNULL))
        url = f"redis://127.0.0.1:{port}/0"
        assert wait_until(lambda: _pingable(url), 10), "redis-server did not start"
        return url

    yield start
    for proc in started:
        proc.terminate()
        proc.wait(10)


def _pingable(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=1).ping())
    except redis.AuthenticationError:
        return True  # up, and asking for credentials
    except (redis.RedisError, OSError):
        return False


@pytest.fixture(scope="session")
def shared_services() -> Iterator[SharedServices]:
    """This session's private Redis and RabbitMQ, started on first use, stopped at the end."""
    services = SharedServices(TEST_STATE_DIR / f"services-{os.getpid()}")
    yield services
    services.stop()


@pytest.fixture(scope="session")
def shared_redis_url(shared_services) -> str:
    """The session's private Redis (password-protected), for tests that need only Redis."""
    return shared_services.services.ensure("redis", "").url


@pytest.fixture(scope="session")
def aio(shared_services) -> Any:
    try:
        with running_stack(TEST_STATE_DIR, shared_services) as info:
            yield info
    except StackStartError as exc:
        pytest.fail(str(exc))


@pytest.fixture(scope="module")
def private_stack(request, tmp_path_factory, shared_services) -> Iterator[dict[str, Any]]:
    """A second all-in-one for one module: its own namespace, vhost and free ports, plus the
    module's ``PRIVATE_STACK_ARGS`` (e.g. two proxies, a private broker); stopped after it."""
    state_dir = tmp_path_factory.mktemp("stack") / "aio"
    args = list(getattr(request.module, "PRIVATE_STACK_ARGS", ()))
    services = shared_services.stack_args(f"test-{uuid.uuid4().hex[:8]}")
    for option in ("--redis-url", "--amqp-url"):  # the module's own choice wins
        if option in args:
            at = services.index(option)
            del services[at:at + 2]
    started = aio_command("start", state_dir, "--json", *services, *args, *free_port_args())
    if started.returncode != 0:
        aio_command("stop", state_dir)
        pytest.fail(f"the private stack did not start: {started.stderr}")
    yield json.loads(started.stdout)
    aio_command("stop", state_dir, "--purge")
    shutil.rmtree(state_dir, ignore_errors=True)


def admin_of(stack: dict[str, Any]) -> Iterator[ControllerClient]:
    """A stack's controller as admin (for a fixture); every policy is removed after."""
    client = ControllerClient(stack["controller_url"], stack["admin_token"])
    yield client
    for record in client.policies():
        client.delete_policy(record["id"])


@pytest.fixture
def private_admin(private_stack) -> Iterator[ControllerClient]:
    """The private stack's controller as admin; the test's policies are removed after it."""
    yield from admin_of(private_stack)


@pytest.fixture(scope="session")
def swift_for(aio: dict[str, Any]) -> Callable[[str], swiftclient.Connection]:
    """``swift_for("t1")``: a swiftclient connection authenticated as that tenant's user."""

    def connect(tenant: str) -> swiftclient.Connection:
        creds = aio["tenants"][tenant]
        return swiftclient.Connection(
            authurl=aio["auth_url"], user=creds["user"], key=creds["key"], retries=0
        )

    return connect


@pytest.fixture(scope="session")
def s3_for(aio: dict[str, Any]) -> Callable[[str], Any]:
    """``s3_for("t1")``: a boto3 S3 client of that tenant (path-style, no retries)."""

    def connect(tenant: str) -> Any:
        import boto3
        from botocore.config import Config

        creds = aio["tenants"][tenant]
        return boto3.client(
            "s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
            aws_access_key_id=creds["user"], aws_secret_access_key=creds["key"],
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))

    return connect


class Policies:
    """Policies added through the controller's REST API during one test."""

    def __init__(self, aio: dict[str, Any]) -> None:
        self.client = ControllerClient(aio["controller_url"], aio["admin_token"])
        self.ids: list[str] = []

    def add(self, text: str) -> list[str]:
        ids = [p["id"] for p in self.client.add_policies(text)["policies"]]
        self.ids += ids
        self.wait_enforced()
        return ids

    def remove(self, pid: str) -> None:
        self.client.delete_policy(pid)
        self.ids.remove(pid)
        self.wait_enforced()

    def wait_enforced(self, timeout: float = 10) -> None:
        """Until every proxy worker that reports a version enforces the store's (a change
        reaches workers asynchronously, within a second)."""
        status = self.client.policy_status()
        target = status["version"]

        def behind() -> list[str]:
            # Every test proxy runs on this machine: a worker whose process is gone (a
            # stack another test stopped) is not behind, whatever it last reported.
            return [f"{w['proxy']}/{w['pid']}" for w in status["workers"]
                    if not w["silent"] and (w["version"] or 0) < target
                    and Path(f"/proc/{w['pid']}").exists()]

        deadline = time.monotonic() + timeout
        while behind():
            assert time.monotonic() < deadline, f"workers behind version {target}: {behind()}"
            time.sleep(0.02)
            status = self.client.policy_status()

    def cleanup(self) -> None:
        for pid in list(self.ids):
            self.remove(pid)


@pytest.fixture
def policies(aio: dict[str, Any]) -> Iterator[Policies]:
    added = Policies(aio)
    yield added
    added.cleanup()


@pytest.fixture(scope="session")
def object_ring(aio) -> Ring:
    utils.set_swift_dir(aio["swift_dir"])
    return Ring(aio["swift_dir"], ring_name="object")


def read_stored(ring: Ring, account: str, container: str, obj: str
                ) -> tuple[dict[str, str], bytes]:
    """Headers and bytes of an object as its first object server holds them."""
    part, nodes = ring.get_nodes(account, container, obj)
    headers, body = direct_client.direct_get_object(
        nodes[0], part, account, container, obj, headers={"X-Backend-Iostack-Raw": "true"})
    return {k.lower(): v for k, v in headers.items()}, body


@pytest.fixture(scope="session")
def stored(object_ring) -> Callable[[str, str, str], tuple[dict[str, str], bytes]]:
    """``stored(account, container, obj)``: headers and bytes as an object server holds them."""
    return lambda account, container, obj: read_stored(object_ring, account, container, obj)


@pytest.fixture(scope="session")
def overwrite_stored(object_ring) -> Callable[[str, str, str, dict[str, str], bytes], None]:
    """Replace an object's stored bytes on every node, keeping the given metadata (tampering)."""

    def write(account: str, container: str, obj: str, headers: dict[str, str],
              body: bytes) -> None:
        part, nodes = object_ring.get_nodes(account, container, obj)
        keep = {k: v for k, v in headers.items()
                if k.startswith(("x-object-sysmeta-", "x-object-meta-")) or k == "content-type"}
        keep["X-Timestamp"] = utils.Timestamp.now().internal
        for node in nodes:
            direct_client.direct_put_object(node, part, account, container, obj, body,
                                             headers=keep)

    return write
