"""The all-in-one uses only Redis and RabbitMQ servers it authenticates to.

Each test starts the servers it needs itself (a Redis with no password, a
Redis whose default user needs none, a vhost on the session's private broker
that also lets ``guest`` in), so nothing here depends on, or touches, the
machine's own Redis on 6379 or RabbitMQ on 5672.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pika
import pytest
import redis

from iostack.aio.config import AioConfig
from iostack.aio.processes import ProcessManager
from iostack.aio.services import ServiceError, Services, free_port, wait_until
from iostack.aio.session import aio_command, free_port_args

pytestmark = pytest.mark.integration


@pytest.fixture
def redis_server(tmp_path) -> Iterator:
    """``start(*config_lines)``: a redis-server on a free loopback port; its URL without
    credentials. Stopped after the test."""
    started: list[subprocess.Popen] = []

    def start(*lines: str) -> str:
        port = free_port()
        conf = tmp_path / f"redis-{port}.conf"
        conf.write_text("\n".join([f"port {port}", "bind 127.0.0.1", 'save ""',
                                   f"dir {tmp_path}", *lines, ""]))
        started.append(subprocess.Popen([shutil.which("redis-server"), str(conf)],
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


def stat_mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def services(tmp_path: Path) -> Services:
    state = tmp_path / "state"
    return Services(state, ProcessManager(state), timeout=30)


def test_defaults_name_no_shared_server_and_forget_the_old_defaults(tmp_path, monkeypatch):
    config = AioConfig.load(tmp_path)
    assert (config.redis_url, config.amqp_url, config.memcache_url) == ("", "", "")
    # A state dir from before saved the old defaults (the machine's servers) as settings.
    saved = tmp_path / "etc" / "aio-config.json"
    saved.parent.mkdir(parents=True)
    saved.write_text(json.dumps({"redis_url": "redis://127.0.0.1:6379/0",
                                 "amqp_url": "amqp://guest:guest@127.0.0.1:5672/%2F",
                                 "memcache_url": "127.0.0.1:11211", "proxy_port": 18080}))
    config = AioConfig.load(tmp_path)
    assert (config.redis_url, config.amqp_url, config.memcache_url) == ("", "", "")
    assert config.proxy_port == 18080
    # The permission to use an unauthenticated server holds for one start only.
    AioConfig.load(tmp_path, {"allow_unauthenticated_services": True}).save()
    assert "allow_unauthenticated_services" not in json.loads(saved.read_text())
    assert stat_mode(saved) == 0o600
    assert not AioConfig.load(tmp_path).allow_unauthenticated_services
    monkeypatch.setenv("IOSTACK_ALLOW_UNAUTHENTICATED_SERVICES", "1")
    assert AioConfig.load(tmp_path).allow_unauthenticated_services


def test_redis_without_password_is_refused_unless_allowed(tmp_path, redis_server):
    url = redis_server()
    with pytest.raises(ServiceError) as refused:
        services(tmp_path).ensure("redis", url)
    message = str(refused.value)
    assert f"refusing redis at {url}: the URL has no password" in message
    assert "IOSTACK_REDIS_URL" in message and "--allow-unauthenticated-services" in message

    allowed = services(tmp_path)
    info = allowed.ensure("redis", url, allow_unauthenticated=True)
    assert (info.url, info.private, info.unauthenticated) == (url, False,
                                                              "the URL has no password")
    (warning,) = allowed.warnings()
    assert warning.startswith(f"WARNING: redis at {url} is unauthenticated")
    # Recorded, so that 'aio status' keeps warning about it.
    status = aio_command("status", tmp_path / "state")
    assert warning in status.stdout


def test_a_password_is_not_enough_when_the_server_also_answers_without_one(tmp_path,
                                                                           redis_server):
    # ACLs: the operator's user has a password, but the default user still needs none.
    url = redis_server("user default on nopass ~* &* +@all", "user op on >op-secret ~* &* +@all")
    with_password = url.replace("redis://", "redis://op:op-secret@")
    with pytest.raises(ServiceError, match="the server answers without a password"):
        services(tmp_path).ensure("redis", with_password)


def test_redis_that_enforces_its_password_is_used_as_given(tmp_path, redis_server):
    url = redis_server("requirepass op-secret")
    with_password = url.replace("redis://", "redis://:op-secret@")
    info = services(tmp_path).ensure("redis", with_password)
    assert (info.url, info.private, info.unauthenticated) == (with_password, False, "")
    with pytest.raises(ServiceError, match="does not answer or refuses the URL's credentials"):
        services(tmp_path).ensure("redis", url.replace("redis://", "redis://:wrong@"))


def rabbit_password_hash(password: str) -> str:
    """RabbitMQ's ``rabbit_password_hashing_sha256``: base64(salt + sha256(salt + password))."""
    salt = os.urandom(4)
    return base64.b64encode(salt + hashlib.sha256(salt + password.encode()).digest()).decode()


@pytest.fixture(scope="module")
def open_broker(shared_services) -> dict[str, str]:
    """Two vhosts of the session's private broker: on ``open`` the well-known guest/guest
    also gets in, on ``closed`` only our generated user."""
    suffix = uuid.uuid4().hex[:8]
    closed = shared_services.stack_args(f"closed-{suffix}")[-1]
    opened = shared_services.services.add_amqp_vhost(f"open-{suffix}")
    shared_services.services.import_amqp_definitions({
        "users": [{"name": "guest", "password_hash": rabbit_password_hash("guest"),
                   "hashing_algorithm": "rabbit_password_hashing_sha256", "tags": ""}],
        "permissions": [{"user": "guest", "vhost": f"open-{suffix}", "configure": ".*",
                         "write": ".*", "read": ".*"}],
    })
    guest = opened.replace(opened.split("@")[0], "amqp://guest:guest")
    pika.BlockingConnection(pika.URLParameters(guest)).close()  # guest really gets in there
    return {"open": opened, "closed": closed, "guest": guest}


def test_rabbitmq_guest_and_passwordless_urls_are_refused(tmp_path, open_broker):
    with pytest.raises(ServiceError, match="logs in with RabbitMQ's well-known guest account"):
        services(tmp_path).ensure("rabbitmq", open_broker["guest"])
    # Where guest gets in, our own credentials do not make the broker safe to use.
    with pytest.raises(ServiceError, match="the server takes RabbitMQ's well-known guest/guest"):
        services(tmp_path).ensure("rabbitmq", open_broker["open"])
    # pika logs in as guest when the URL has no credentials.
    bare = "amqp://" + open_broker["open"].split("@", 1)[1]
    with pytest.raises(ServiceError, match="the URL has no password"):
        services(tmp_path).ensure("rabbitmq", bare)
    info = services(tmp_path).ensure("rabbitmq", open_broker["closed"])
    assert (info.private, info.unauthenticated) == (False, "")


def test_aio_start_refuses_an_unauthenticated_redis_unless_told_and_then_warns(
        tmp_path, redis_server, shared_services):
    url = redis_server()
    state_dir = tmp_path / "aio"
    args = shared_services.stack_args(f"refused-{uuid.uuid4().hex[:8]}")
    args[args.index("--redis-url") + 1] = url
    args += free_port_args()
    result = aio_command("start", state_dir, *args)
    assert result.returncode == 1
    assert f"refusing redis at {url}: the URL has no password" in result.stderr
    manager = ProcessManager(state_dir)
    assert [name for name in manager.names() if manager.find(name)] == []
    assert not (state_dir / "aio.json").exists()

    allowed = aio_command("start", state_dir, "--json", "--allow-unauthenticated-services",
                          *args)
    try:
        assert allowed.returncode == 0, allowed.stderr
        warning = f"WARNING: redis at {url} is unauthenticated (the URL has no password)"
        assert warning in allowed.stderr and "!" * 78 in allowed.stderr
        info = json.loads(allowed.stdout)
        assert info["redis_url"] == url and len(info["warnings"]) == 1
        assert warning in aio_command("status", state_dir).stdout
        # The permission was for that start: starting again without it is refused.
        again = aio_command("start", state_dir)
        assert again.returncode == 1 and "refusing redis" in again.stderr
    finally:
        assert aio_command("stop", state_dir, "--purge").returncode == 0
