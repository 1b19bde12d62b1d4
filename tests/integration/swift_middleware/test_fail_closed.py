"""Fail closed: a proxy that cannot read the policy store, or finds it emptied, stores nothing.

A private stack runs on a Redis this module starts itself (password, no
persistence), so the test can stop it, start it again empty and flush it:
PUTs answer 503 naming the cause and store nothing, GETs of filtered objects
keep decoding from sysmeta, and once the controller's guardian has refilled
the store from its journal the same PUT succeeds, filtered, with no proxy
restart.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import redis
import swiftclient
from swift.common import utils
from swift.common.ring import Ring
from swiftclient.exceptions import ClientException

from iostack.aio.services import free_port, wait_until
from iostack.aio.session import aio_command, free_port_args
from iostack.controller.client import ControllerClient
from iostack.swift_middleware.enforce.record import PIPELINE_HEADER
from tests.conftest import read_stored

pytestmark = pytest.mark.integration
REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"


class PrivateRedis:
    """A redis-server of this test's own, on a fixed port so it can come back empty."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = free_port()
        self.password = secrets.token_urlsafe(16)
        self.url = f"redis://:{self.password}@127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(  # fixed argv
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
             "--requirepass", self.password, "--save", "", "--appendonly", "no",
             "--dir", str(self.root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = self.client()
        assert wait_until(lambda: _pings(client), 10), "the private Redis did not start"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_timeout=2)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


@pytest.fixture(scope="module")
def stack(tmp_path_factory, shared_services):
    root = tmp_path_factory.mktemp("failclosed")
    store = PrivateRedis(root)
    store.start()
    state_dir = root / "aio"
    namespace = f"test-{uuid.uuid4().hex[:8]}"
    # The session's broker (a vhost of its own); a Redis of this module's own.
    services = shared_services.stack_args(namespace)
    services[services.index("--redis-url") + 1] = store.url
    started = aio_command("start", state_dir, "--json", *services, *free_port_args())
    if started.returncode != 0:
        aio_command("stop", state_dir)
        store.stop()
        pytest.fail(f"the private stack did not start: {started.stderr}")
    yield json.loads(started.stdout), store
    aio_command("stop", state_dir, "--purge")
    store.stop()


def _tenant(info) -> swiftclient.Connection:
    creds = info["tenants"]["t1"]
    return swiftclient.Connection(authurl=info["auth_url"], user=creds["user"],
                                  key=creds["key"], retries=0)


def _put_status(conn, container: str, name: str, body: bytes) -> tuple[int, str]:
    try:
        conn.put_object(container, name, body)
        return 201, ""
    except ClientException as exc:
        return exc.http_status, exc.http_response_content.decode(errors="replace")


def _exists(conn, container: str, name: str) -> bool:
    try:
        conn.head_object(container, name)
        return True
    except ClientException as exc:
        assert exc.http_status == 404
        return False


def _stored_encrypted(ring: Ring, container: str, name: str, body: bytes) -> bool:
    headers, raw = read_stored(ring, "AUTH_t1", container, name)
    return "encryption" in headers.get(PIPELINE_HEADER.lower(), "") and body[:20] not in raw


def test_writes_fail_closed_while_the_store_is_gone_or_empty(stack):
    info, store = stack
    admin = ControllerClient(info["controller_url"], info["admin_token"])
    conn = _tenant(info)
    container = f"fc-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    admin.add_policies(f"FOR CONTAINER AUTH_t1/{container} DO SET ENCRYPTION")
    time.sleep(0.5)
    body = b"secret " * 1000
    assert _put_status(conn, container, "before", body)[0] == 201
    journal = Path(info["state_dir"]) / "policy-store.json"
    assert wait_until(journal.exists, 5), "the controller wrote no journal"

    # 1. The store is unreachable: writes are refused (once the proxy's cached
    #    rules are dropped with the lost subscription; until then they are still
    #    enforced), and reads of filtered objects go on.
    store.stop()
    accepted = []
    for attempt in range(50):
        name = f"while-down-{attempt}"
        status, message = _put_status(conn, container, name, body)
        if status == 503:
            break
        assert status == 201, (status, message)
        accepted.append(name)
        time.sleep(0.2)
    assert status == 503 and "policy store" in message, (status, message)
    assert not _exists(conn, container, name)
    assert conn.get_object(container, "before")[1] == body

    # 2. It comes back empty (no persistence): still refused until the
    #    controller has refilled it, then accepted and filtered.
    store.start()
    statuses = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, message = _put_status(conn, container, "after-restart", body)
        statuses.append(status)
        if status == 201:
            break
        assert status == 503, (status, message)
        time.sleep(0.2)
    assert statuses[-1] == 201, statuses
    assert store.client().exists(f"{info['key_prefix']}marker")
    assert conn.get_object(container, "after-restart")[1] == body

    # 3. Flushed under a running stack: every write is either refused or filtered.
    store.client().flushall()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        status, message = _put_status(conn, container, "after-flush", body)
        if status == 201:
            break
        assert status == 503, (status, message)
        time.sleep(0.2)
    assert status == 201
    previous = utils.SWIFT_CONF_FILE
    utils.set_swift_dir(info["swift_dir"])  # this stack's hash prefix, for its ring
    try:
        ring = Ring(info["swift_dir"], ring_name="object")
        for name in ("before", "after-restart", "after-flush", *accepted):
            assert _stored_encrypted(ring, container, name, body), name
    finally:
        if os.path.exists(previous):  # the session's stack, if one was read before
            utils.set_swift_dir(os.path.dirname(previous))
