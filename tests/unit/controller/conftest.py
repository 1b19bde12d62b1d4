"""Fixtures for controller tests: filter metadata, and a real Redis under a private key prefix.

Redis: the test session's private one (``shared_redis_url``), never the machine's. Every
test gets its own prefix and its keys are deleted afterwards.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import Registries
from iostack.filters.library import builtin_metadata
from iostack.filters.metadata import FilterMetadata, Param
from iostack.policy.redis_keys import KeySpace

# A second compressor: same layout group as the library's compression.
XCOMPRESS = FilterMetadata("xcompress", "another compressor", params=(Param("level", "int"),),
                           layout_group="compression", changes_size=True,
                           runs_before=("encryption",))
CSV_SELECT = FilterMetadata("csv_select", "CSV projection", params=(Param("columns", "str"),),
                            methods=frozenset({"GET"}), stages=frozenset({"proxy", "object"}),
                            default_stage="object")


@pytest.fixture
def filters() -> dict[str, FilterMetadata]:
    return {m.name: m for m in (*builtin_metadata(), XCOMPRESS, CSV_SELECT)}


@pytest.fixture
def redis_client(shared_redis_url):
    client = redis.Redis.from_url(shared_redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def keys(redis_client):
    space = KeySpace(f"iostack-test-{uuid.uuid4().hex[:8]}:")
    yield space
    for key in redis_client.scan_iter(space.prefix + "*"):
        redis_client.delete(key)


@pytest.fixture
def registries(redis_client, keys) -> Registries:
    reg = Registries(redis_client, keys)
    reg.seed()
    reg.put_filter(XCOMPRESS.to_json())
    reg.put_filter(CSV_SELECT.to_json())
    reg.add_tenant("t1")
    return reg


@pytest.fixture
def store(redis_client, keys, registries) -> PolicyStore:
    return PolicyStore(redis_client, keys, registries)


@pytest.fixture
def reader(redis_client, keys, shared_redis_url):
    from iostack.policy.reader import PolicyReader

    instance = PolicyReader(shared_redis_url, prefix=keys.prefix)
    assert instance.wait_subscribed(5), "the reader did not subscribe to invalidations"
    yield instance
    instance.close()


ADMIN_TOKEN = "admin-token-for-tests-0123456789"


@pytest.fixture
def app_config(keys, tmp_path, shared_redis_url):
    return {"host": "127.0.0.1", "port": 0, "redis_url": shared_redis_url, "amqp_url": "amqp://unused",
            "admin_token": ADMIN_TOKEN, "state_dir": str(tmp_path), "key_prefix": keys.prefix,
            "max_body_bytes": 4096, "code_check": ["true"]}  # the real one: integration


@pytest.fixture
def client(app_config, redis_client):
    from iostack.controller.app import create_app

    app = create_app(app_config)
    app.extensions["iostack"].registries.seed()
    app.extensions["iostack"].registries.add_tenant("t1")
    return app.test_client()


@pytest.fixture
def admin():
    return {"X-Auth-Token": ADMIN_TOKEN}
