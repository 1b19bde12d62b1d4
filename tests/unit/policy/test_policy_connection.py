"""One URL form for the store: redis://, rediss:// and redis+sentinel://, bounded timeouts."""

from __future__ import annotations

import secrets
import shutil
import subprocess
import time

import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from iostack.policy.connection import (
    ATTEMPTS,
    CONNECT_TIMEOUT,
    STORE_TIMEOUT,
    connect,
    sentinel_target,
)
from iostack.ports import free_port, wait_until


def test_a_sentinel_url_names_hosts_service_db_and_passwords():
    target = sentinel_target("redis+sentinel://:s%40cret@10.0.0.1:26379,[::1]:26380/iostack/2")
    assert target == {"hosts": [("10.0.0.1", 26379), ("::1", 26380)], "service": "iostack",
                      "db": 2, "username": None, "password": "s@cret",
                      "sentinel_password": "s@cret"}
    other = sentinel_target("redis+sentinel://app:pw@h:1/svc?sentinel_password=other")
    assert (other["username"], other["password"], other["sentinel_password"], other["db"]) == \
        ("app", "pw", "other", 0)


@pytest.mark.parametrize("url", ["redis+sentinel://h:1", "redis+sentinel://h:1/svc/x",
                                 "redis+sentinel://h/svc", "redis://h:1/0"])
def test_a_malformed_sentinel_url_is_refused_with_the_form_it_expects(url):
    with pytest.raises(ValueError):
        sentinel_target(url)


def test_every_client_has_bounded_timeouts():
    plain = connect("redis://:pw@127.0.0.1:1/0")
    kwargs = plain.connection_pool.connection_kwargs
    assert (kwargs["socket_timeout"], kwargs["socket_connect_timeout"]) == \
        (STORE_TIMEOUT, CONNECT_TIMEOUT)
    tls = connect("rediss://127.0.0.1:1/0", socket_timeout=0.5)
    assert tls.connection_pool.connection_kwargs["socket_timeout"] == 0.5
    sentinel = connect("redis+sentinel://:pw@127.0.0.1:1,127.0.0.1:2/iostack/3")
    pool = sentinel.connection_pool
    assert isinstance(pool, SentinelConnectionPool)
    assert pool.connection_kwargs["password"] == "pw"
    assert pool.connection_kwargs["db"] == 3
    assert pool.connection_kwargs["socket_timeout"] == STORE_TIMEOUT
    asked = pool.sentinel_manager.sentinels[0].connection_pool.connection_kwargs
    assert (asked["password"], asked["socket_timeout"]) == ("pw", STORE_TIMEOUT)


def test_no_sentinel_answering_fails_within_the_timeout_instead_of_hanging():
    client = connect("redis+sentinel://:pw@127.0.0.1:1,127.0.0.1:2/iostack")
    start = time.monotonic()
    with pytest.raises(redis.ConnectionError):
        client.ping()
    assert time.monotonic() - start < 10


def test_a_hung_store_fails_a_command_within_the_documented_bound(tmp_path):
    """A Redis hung with CLIENT PAUSE under an open connection: ATTEMPTS x the command
    timeout, not redis-py's default of 3 retries with backoff (15 s and more)."""
    port, password = free_port(), secrets.token_hex(8)
    server = subprocess.Popen(  # noqa: S603 - fixed argv
        [shutil.which("redis-server") or "/usr/bin/redis-server", "--port", str(port),
         "--bind", "127.0.0.1", "--requirepass", password, "--save", "", "--dir",
         str(tmp_path)], stdout=subprocess.DEVNULL)
    try:
        client = connect(f"redis://:{password}@127.0.0.1:{port}/0", socket_timeout=0.5)
        assert wait_until(lambda: _pings(client), 10)
        client.execute_command("CLIENT", "PAUSE", "5000", "ALL")
        start = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            client.get("k")
        elapsed = time.monotonic() - start
        assert 0.5 * ATTEMPTS <= elapsed < 0.5 * ATTEMPTS + 0.5, elapsed
    finally:
        server.terminate()
        server.wait(10)


def _pings(client: redis.Redis) -> bool:
    try:
        return bool(client.ping())
    except redis.RedisError:
        return False
