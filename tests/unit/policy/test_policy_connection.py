"""One URL form for the store: redis://, rediss:// and redis+sentinel://, bounded timeouts."""

from __future__ import annotations

import socket
import time

import pytest
import redis
from redis.sentinel import SentinelConnectionPool

from iostack.policy.connection import CONNECT_TIMEOUT, STORE_TIMEOUT, connect, sentinel_target


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


def test_a_hung_store_fails_a_command_within_the_documented_bound():
    """A server that accepts and never answers (a hung Redis) costs one command timeout:
    no retry with backoff stretches it (redis-py's ``retry`` is not applied to it)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        client = connect(f"redis://:pw@127.0.0.1:{listener.getsockname()[1]}/0",
                         socket_timeout=0.3)
        start = time.monotonic()
        with pytest.raises(redis.TimeoutError):
            client.ping()
        elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 0.3 + 0.5, elapsed
