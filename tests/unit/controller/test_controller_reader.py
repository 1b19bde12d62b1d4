"""The data-path reader: a local, versioned, persisted copy; no request waits for Redis.

Changes reach it within a second; the store down, hung, flushed or rolled back
leaves it enforcing the version it holds; a node that never held one fails
closed naming why; the copy on disk is owner-only, checksummed and survives a
restart with the store down.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from pathlib import Path

import pytest
import redis

from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import Registries, RegistryError
from iostack.policy.reader import RETRY_AFTER, PolicyReader, PolicyStoreUnavailable
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import RequestInfo
from iostack.policy.snapshot import SnapshotFile

UNREACHABLE = "redis://:pw@127.0.0.1:1/0"


def count_commands(reader):
    calls = []
    original = reader.redis.execute_command

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    reader.redis.execute_command = counting
    return calls


def pipeline_of(reader, method="PUT", path="/v1/AUTH_t1/logs/a.csv", **kw):
    return [e.as_tuple() for e in reader.resolve(RequestInfo.from_path(method, path, **kw))
            .pipeline]


def wait_until(predicate, timeout=1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_lookups_are_answered_from_the_local_copy_with_no_round_trip(store, reader, registries):
    registries.put_group("gold", ["t1"])
    store.submit("FOR ALL DO SET noop\nFOR G:gold DO SET compression WITH level=3\n"
                 "FOR CONTAINER t1/logs DO SET compression WITH algorithm=gzip")
    expected = [("noop", {}, "proxy", False),
                ("compression", {"algorithm": "gzip", "frame_size": 262144, "level": 3},
                 "proxy", False)]
    assert wait_until(lambda: pipeline_of(reader) == expected)
    calls = count_commands(reader)
    before = reader.stats()
    for name in ("a.csv", "b.csv", "c.csv"):
        assert pipeline_of(reader, path=f"/v1/AUTH_t1/logs/{name}") == expected
    assert [c for c in calls if c not in ("GET",)] == []  # at most the poller's version GET
    after = reader.stats()
    assert after["lookups"] - before["lookups"] == 3
    assert after["round_trips"] == before["round_trips"]


def test_object_rules_are_read_for_that_object_only(store, reader):
    store.submit("FOR OBJECT t1/logs/special.csv DO SET noop")
    assert wait_until(lambda: pipeline_of(reader, path="/v1/AUTH_t1/logs/special.csv")
                      == [("noop", {}, "proxy", False)])
    assert pipeline_of(reader, path="/v1/AUTH_t1/logs/plain.csv") == []
    assert pipeline_of(reader, "GET", "/v1/AUTH_t1/logs") == []


def test_a_policy_change_reaches_the_reader_within_a_second(store, reader):
    assert pipeline_of(reader) == []
    store.submit("FOR TENANT t1 DO SET noop")
    assert wait_until(lambda: pipeline_of(reader) == [("noop", {}, "proxy", False)], 1.0)
    store.delete(store.list()[0]["id"])
    assert wait_until(lambda: pipeline_of(reader) == [], 1.0)


def test_a_filter_registered_later_is_seen(store, reader, registries):
    assert pipeline_of(reader) == []
    registries.put_filter({"name": "upper", "description": "toy", "methods": ["PUT"],
                           "extra": {"runtime": "storlet"}})
    store.submit("FOR TENANT t1 DO SET upper")
    assert wait_until(lambda: pipeline_of(reader) == [("upper", {}, "proxy", True)])


def test_a_missed_message_is_caught_by_the_version_poll(store, redis_client, keys,
                                                         shared_redis_url):
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, poll_interval=0.1)
    try:
        assert pipeline_of(reader) == []
        reader._subscription.close()  # no message will arrive any more
        store.submit("FOR TENANT t1 DO SET noop")
        assert wait_until(lambda: pipeline_of(reader) == [("noop", {}, "proxy", False)], 3)
    finally:
        reader.close()


def test_a_store_that_lost_its_marker_leaves_the_held_version_enforced(
        store, reader, redis_client, keys):
    store.submit("FOR TENANT t1 DO SET encryption")
    assert wait_until(lambda: [f for f, *_ in pipeline_of(reader)] == ["encryption"])
    held = reader.version
    redis_client.delete(keys.marker)
    redis_client.incr(keys.version)  # even a newer version is not trusted without the marker
    assert reader.refresh() == "unmarked"
    assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
    assert reader.version == held


def test_a_rolled_back_store_is_not_applied(store, reader, redis_client, keys):
    store.submit("FOR TENANT t1 DO SET encryption")
    assert wait_until(lambda: [f for f, *_ in pipeline_of(reader)] == ["encryption"])
    held = reader.version
    # An older backup: the rule gone, the version behind the node's.
    redis_client.delete(keys.rules("tenant", "AUTH_t1"))
    redis_client.set(keys.version, held - 1)
    assert reader.refresh() == "older"
    assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
    assert reader.stats()["version"] == held and reader.stats()["store_version"] == held - 1


def test_a_node_that_never_held_a_version_fails_closed_naming_the_cause(keys, tmp_path):
    reader = PolicyReader(UNREACHABLE, prefix=keys.prefix, snapshot=tmp_path / "p.json")
    try:
        with pytest.raises(PolicyStoreUnavailable,
                           match="holds no policy version yet, and the policy store cannot "
                                 "be read"):
            pipeline_of(reader)
        # Within RETRY_AFTER the next request is refused at once, without asking again.
        start = time.monotonic()
        with pytest.raises(PolicyStoreUnavailable):
            pipeline_of(reader)
        assert time.monotonic() - start < RETRY_AFTER
        assert reader.stats()["round_trips"] == 1
    finally:
        reader.close()


def test_an_unmarked_store_and_no_copy_fails_closed(redis_client, keys, shared_redis_url):
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix)
    try:
        with pytest.raises(PolicyStoreUnavailable, match="no marker"):
            pipeline_of(reader)
    finally:
        reader.close()


def test_a_restarted_node_enforces_its_persisted_copy_with_the_store_down(
        store, keys, shared_redis_url, tmp_path):
    path = tmp_path / "node" / "policy.json"
    first = PolicyReader(shared_redis_url, prefix=keys.prefix, snapshot=path)
    try:
        store.submit("FOR CONTAINER t1/logs DO SET encryption")
        assert wait_until(lambda: [f for f, *_ in pipeline_of(first)] == ["encryption"])
        version = first.version
        assert wait_until(lambda: saved_version(path, keys) == version)
    finally:
        first.close()
    assert os.stat(path).st_mode & 0o777 == 0o600
    restarted = PolicyReader(UNREACHABLE, prefix=keys.prefix, snapshot=path)
    try:
        assert restarted.version == version
        assert [f for f, *_ in pipeline_of(restarted)] == ["encryption"]
        assert pipeline_of(restarted, path="/v1/AUTH_t1/other/a.csv") == []
    finally:
        restarted.close()


def encryption_copy_on_disk(store, keys, redis_url: str, tmp_path) -> Path:
    """A node's copy on disk holding t1's encryption rule, its reader closed."""
    path = tmp_path / "policy.json"
    reader = PolicyReader(redis_url, prefix=keys.prefix, snapshot=path)
    store.submit("FOR TENANT t1 DO SET encryption")
    assert reader.wait_version(int(store.redis.get(keys.version)))
    assert wait_until(lambda: saved_version(path, keys) == reader.version)
    reader.close()
    return path


def test_a_tampered_or_foreign_copy_is_not_used(store, keys, shared_redis_url, tmp_path):
    path = encryption_copy_on_disk(store, keys, shared_redis_url, tmp_path)
    document = json.loads(path.read_text())
    del document["state"]["rules"]["tenant:AUTH_t1"]  # the encryption rule removed, checksum kept
    path.write_text(json.dumps(document))
    assert SnapshotFile(path, keys.prefix).load() is None
    assert SnapshotFile(path, "another:").load() is None
    restarted = PolicyReader(UNREACHABLE, prefix=keys.prefix, snapshot=path)
    try:
        with pytest.raises(PolicyStoreUnavailable, match="holds no policy version yet"):
            pipeline_of(restarted)
    finally:
        restarted.close()


def test_the_copy_on_disk_only_moves_forward(store, keys, shared_redis_url, tmp_path):
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, live=True)
    store.submit("FOR TENANT t1 DO SET noop")
    pipeline_of(reader)
    older = reader._state
    store.submit("FOR TENANT t1 DO SET compression")
    pipeline_of(reader)
    newer = reader._state
    assert newer.version > older.version
    file = SnapshotFile(tmp_path / "p.json", keys.prefix)
    assert file.save(newer)
    assert not file.save(older)
    assert file.load().version == newer.version


def saved_version(path, keys) -> int:
    held = SnapshotFile(path, keys.prefix).load()
    return held.version if held else 0


def hung_store() -> tuple[socket.socket, str]:
    """A server that accepts connections and never answers (a paused or hung Redis)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # the test closes the server when done
            for _ in range(16):
                held.append(server.accept())

    threading.Thread(target=accept, daemon=True).start()
    return server, f"redis://:pw@127.0.0.1:{server.getsockname()[1]}/0"


def test_a_hung_store_never_stalls_a_lookup(store, keys, shared_redis_url, tmp_path):
    path = encryption_copy_on_disk(store, keys, shared_redis_url, tmp_path)
    server, url = hung_store()
    reader = PolicyReader(url, prefix=keys.prefix, snapshot=path, poll_interval=0.05)
    try:
        time.sleep(0.2)  # the poller and the subscription are waiting on the hung store
        start = time.monotonic()
        for _ in range(50):
            assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
        assert time.monotonic() - start < 0.5
    finally:
        reader.close()
        server.close()


@pytest.fixture
def private_redis(redis_server):
    password = secrets.token_hex(16)
    url = redis_server(f"requirepass {password}").replace("redis://", f"redis://:{password}@")
    return url


def test_paused_and_flushed_store_writes_go_on_under_the_last_version(private_redis,
                                                                       tmp_path):
    keys = KeySpace("iostack:")
    client = redis.Redis.from_url(private_redis, decode_responses=True)
    registries = Registries(client, keys)
    registries.seed()
    registries.add_tenant("t1")
    PolicyStore(client, keys, registries).submit("FOR TENANT t1 DO SET encryption")
    reader = PolicyReader(private_redis, prefix=keys.prefix, snapshot=tmp_path / "p.json",
                          poll_interval=0.1)
    try:
        assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
        client.execute_command("CLIENT", "PAUSE", "1500", "ALL")
        start = time.monotonic()
        assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
        assert time.monotonic() - start < 0.5
        time.sleep(1.6)
        client.flushall()
        assert reader.refresh() == "unmarked"
        assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
    finally:
        reader.close()
        client.close()


def test_a_revoked_state_fails_closed_naming_the_reason_and_survives_a_restart(
        store, keys, shared_redis_url, tmp_path):
    path = encryption_copy_on_disk(store, keys, shared_redis_url, tmp_path)
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, snapshot=path)
    try:
        assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
        store.revoke("backup restored from an untrusted host", who="admin")
        assert reader.wait_version(int(store.redis.get(keys.version)))
        with pytest.raises(PolicyStoreUnavailable,
                           match="revoked by an operator: backup restored from an untrusted"):
            pipeline_of(reader)
        assert wait_until(lambda: saved_version(path, keys) == reader.version)
    finally:
        reader.close()
    # A node restarted while the store is down does not fall back to the older copy.
    restarted = PolicyReader(UNREACHABLE, prefix=keys.prefix, snapshot=path)
    try:
        with pytest.raises(PolicyStoreUnavailable, match="revoked by an operator"):
            pipeline_of(restarted)
    finally:
        restarted.close()
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, snapshot=path)
    try:
        assert store.reinstate() and not store.reinstate()
        assert reader.wait_version(int(store.redis.get(keys.version)))
        assert [f for f, *_ in pipeline_of(reader)] == ["encryption"]
    finally:
        reader.close()
    with pytest.raises(RegistryError, match="needs a reason"):
        store.revoke("  ")


def test_the_copy_is_written_through_offload(store, keys, shared_redis_url, tmp_path):
    """A proxy worker passes eventlet's thread pool: the fsyncs never stop its hub."""
    calls = []

    def offload(function, *args):
        calls.append(function.__name__)
        return function(*args)

    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, snapshot=tmp_path / "p.json",
                          offload=offload)
    try:
        store.submit("FOR TENANT t1 DO SET noop")
        assert reader.wait_version(int(store.redis.get(keys.version)))
        assert wait_until(lambda: saved_version(tmp_path / "p.json", keys) == reader.version)
        assert calls and calls == ["save"] * len(calls)
    finally:
        reader.close()
