"""No single point of failure: writes go on, filtered, while the policy store is gone.

A private stack runs on a Redis this module starts itself (password, no
persistence), so the test can stop it, start it again empty and flush it.
Through all of it every PUT into a container under an encryption policy
succeeds and is stored encrypted (the proxy enforces its local copy, even
after a restart during the outage), and the controller's guardian refills
the store from its journal. Only a proxy that never held a version (its
copy deleted, the store down) refuses writes: 503 naming the cause, nothing
stored.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import swiftclient
from swift.common import utils
from swift.common.ring import Ring
from swiftclient.exceptions import ClientException

from iostack.aio.processes import ProcessManager
from iostack.aio.session import aio_command, start_on_free_ports
from iostack.controller.client import ControllerClient
from iostack.policy.snapshot import SnapshotFile
from iostack.ports import free_port, wait_until
from iostack.stored_object import PIPELINE_HEADER
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
    started = start_on_free_ports(state_dir, *services)
    if started.returncode != 0:
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


class Proxy:
    """The stack's proxy process: restarted as it was started (same argv, environment)."""

    def __init__(self, info) -> None:
        self.info = info
        self.processes = ProcessManager(Path(info["state_dir"]))
        pid = self.processes.find("proxy").pid
        self.argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]
        self.env = dict(item.split("=", 1) for item in
                        Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0") if item)
        self.cwd = os.readlink(f"/proc/{pid}/cwd")
        self.snapshot = Path(info["state_dir"]) / "policy" / "proxy.json"

    def restart(self) -> None:
        assert self.processes.stop("proxy")
        self.processes.start("proxy", self.argv, env=self.env, cwd=Path(self.cwd))
        conn = _tenant(self.info)
        assert wait_until(lambda: _answers(conn), 60), "the proxy did not come back"

    def version(self) -> int:
        held = SnapshotFile(self.snapshot, self.info["key_prefix"]).load()
        return held.version if held else 0


def _answers(conn) -> bool:
    try:
        conn.head_account()
        return True
    except (ClientException, OSError):
        conn.close()
        conn.url = conn.token = None
        return False


def _writes(conn, container: str, prefix: str, body: bytes, seconds: float,
            until=lambda: False) -> Iterator[tuple[str, int, str]]:
    """PUT objects for ``seconds`` (or until ``until()``, after one write at least: the
    guardian may restore the store before the first): (name, status, message) of each."""
    deadline = time.monotonic() + seconds
    n = 0
    while n == 0 or (time.monotonic() < deadline and not until()):
        n += 1
        name = f"{prefix}-{n}"
        yield (name, *_put_status(conn, container, name, body))
        time.sleep(0.1)


def test_writes_go_on_encrypted_while_the_store_is_gone_empty_or_flushed(stack):
    info, store = stack
    admin = ControllerClient(info["controller_url"], info["admin_token"])
    proxy = Proxy(info)
    conn = _tenant(info)
    container = f"fc-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    admin.add_policies(f"FOR CONTAINER AUTH_t1/{container} DO SET ENCRYPTION")
    version = int(store.client().get(f"{info['key_prefix']}version"))
    assert wait_until(lambda: proxy.version() >= version, 10), "the proxy's copy did not follow"
    body = b"secret " * 1000
    assert _put_status(conn, container, "before", body)[0] == 201
    journal = Path(info["state_dir"]) / "policy-store.json"
    assert wait_until(journal.exists, 5), "the controller wrote no journal"
    written = ["before"]

    def all_accepted(prefix: str, seconds: float, until=lambda: False) -> None:
        results = list(_writes(conn, container, prefix, body, seconds, until))
        assert results and [r for r in results if r[1] != 201] == [], results
        written.extend(name for name, _status, _message in results)

    # 1. The store is unreachable: writes go on under the version held; reads too.
    store.stop()
    all_accepted("while-down", 3)
    assert conn.get_object(container, "before")[1] == body
    # 2. The proxy restarted during the outage enforces the copy it persisted.
    proxy.restart()
    all_accepted("restarted-while-down", 2)
    # 3. The store comes back empty (no persistence): writes never stop, and the
    #    controller's guardian refills it from its journal.
    marker = f"{info['key_prefix']}marker"
    store.start()
    all_accepted("after-restart", 20, until=lambda: store.client().exists(marker))
    assert store.client().exists(marker), "the guardian did not restore the store"
    # 4. Flushed under a running stack: the same.
    store.client().flushall()
    all_accepted("after-flush", 20, until=lambda: store.client().exists(marker))
    assert store.client().exists(marker), "the guardian did not restore the flushed store"
    all_accepted("restored", 1)

    previous = utils.SWIFT_CONF_FILE
    utils.set_swift_dir(info["swift_dir"])  # this stack's hash prefix, for its ring
    try:
        ring = Ring(info["swift_dir"], ring_name="object")
        for name in written:
            assert _stored_encrypted(ring, container, name, body), name
    finally:
        if os.path.exists(previous):  # the session's stack, if one was read before
            utils.set_swift_dir(os.path.dirname(previous))


def test_a_proxy_that_never_held_a_version_refuses_writes_naming_the_cause(stack):
    info, store = stack
    proxy = Proxy(info)
    conn = _tenant(info)
    container = f"fc-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    store.stop()
    try:
        proxy.snapshot.unlink()
        proxy.restart()
        status, message = _put_status(conn, container, "no-copy", b"body")
        assert status == 503, (status, message)
        assert "holds no policy version yet" in message and "cannot be read" in message
        assert not _exists(conn, container, "no-copy")
    finally:
        store.start()
    # The store back (refilled by the guardian): the proxy takes its version and serves.
    assert wait_until(lambda: _put_status(conn, container, "copy-back", b"body")[0] == 201, 30)


def test_a_revoked_store_makes_every_write_fail_closed_naming_the_reason(stack):
    info, _store = stack
    admin = ControllerClient(info["controller_url"], info["admin_token"])
    conn = _tenant(info)
    container = f"fc-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    conn.put_object(container, "kept", b"body")
    admin.revoke("store written by an unknown client")
    try:
        assert wait_until(lambda: _put_status(conn, container, "probe", b"x")[0] == 503, 10)
        status, message = _put_status(conn, container, "refused", b"body")
        assert status == 503 and "revoked by an operator: store written by an unknown" \
            in message, (status, message)
        assert not _exists(conn, container, "refused")
        assert conn.get_object(container, "kept")[1] == b"body"  # reads go on
        assert admin.policy_status()["revoked"]["reason"] == "store written by an unknown client"
    finally:
        admin.reinstate()
    assert wait_until(lambda: _put_status(conn, container, "after", b"body")[0] == 201, 10)
