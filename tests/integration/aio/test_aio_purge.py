"""``iostack aio stop --purge``: a throw-away stack's Redis keys go with it."""

from __future__ import annotations

import uuid

import pytest
import redis

from iostack.aio.stack import purge_namespace

pytestmark = pytest.mark.integration


def test_purge_deletes_the_namespace_and_nothing_else(aio):
    client = redis.Redis.from_url(aio["redis_url"])
    name = f"purge-{uuid.uuid4().hex[:8]}"
    mine = [f"{name}:policies", f"{name}:actor:P1", *(f"{name}:k{i}" for i in range(1200))]
    others = [f"{name}x:policies", f"other-{name}:k"]  # a longer namespace, another one
    for key in mine + others:
        client.set(key, "1")
    try:
        assert purge_namespace(aio["redis_url"], f"{name}:") == len(mine)
        assert not any(client.exists(key) for key in mine)
        assert all(client.exists(key) for key in others)
    finally:
        client.delete(*mine, *others)


def test_purge_without_redis_says_so_and_goes_on(capsys):
    assert purge_namespace("redis://127.0.0.1:1/0", "gone:") == 0
    assert "could not purge gone:*" in capsys.readouterr().err
