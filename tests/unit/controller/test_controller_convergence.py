"""Which version each proxy worker enforces: reported by the readers, shown by the
controller (REST, CLI), and taken into account by the guardian."""

from __future__ import annotations

import json
import os
import time

from iostack.controller.convergence import FORGET_AFTER, SILENT_AFTER, policy_status
from iostack.controller.formatting import policy_status_view
from iostack.controller.guardian import StoreGuardian
from iostack.policy.reader import PolicyReader


def test_workers_report_the_version_they_enforce_and_who_is_behind(
        store, redis_client, keys, shared_redis_url):
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix, node="10.0.0.1:8080")
    try:
        store.submit("FOR TENANT t1 DO SET noop")
        version = int(redis_client.get(keys.version))
        assert reader.wait_version(version, 3)
        now = time.time()
        redis_client.hset(keys.policy_nodes, "10.0.0.2:8080/77", json.dumps(
            {"version": version - 1, "applied": now - 60, "reported": now}))
        redis_client.hset(keys.policy_nodes, "10.0.0.3:8080/78", json.dumps(
            {"version": version - 5, "applied": now - 900, "reported": now - SILENT_AFTER - 1}))
        status = policy_status(redis_client, keys)
        me = f"10.0.0.1:8080/{os.getpid()}"
        assert status["version"] == version
        assert {f"{w['proxy']}/{w['pid']}": w["version"] for w in status["workers"]} == {
            me: version, "10.0.0.2:8080/77": version - 1, "10.0.0.3:8080/78": version - 5}
        assert status["behind"] == ["10.0.0.2:8080/77"]
        assert status["silent"] == ["10.0.0.3:8080/78"]
        assert not status["converged"]
        view = policy_status_view(status)
        assert f"store version {version}: 1 worker(s) behind" in view
        assert "behind" in view and "silent" in view
        redis_client.hdel(keys.policy_nodes, "10.0.0.2:8080/77")
        assert policy_status(redis_client, keys)["converged"]
    finally:
        reader.close()
    assert not redis_client.hexists(keys.policy_nodes, me)  # gone with the reader


def test_the_status_route_is_for_administrators(client, admin, redis_client, keys):
    redis_client.hset(keys.policy_nodes, "10.0.0.2:8080/77", json.dumps(
        {"version": 1, "applied": time.time(), "reported": time.time()}))
    assert client.get("/v1/policies/status").status_code == 401
    status = client.get("/v1/policies/status", headers=admin).json
    assert [w["proxy"] for w in status["workers"]] == ["10.0.0.2:8080"]
    assert status["behind"] == ["10.0.0.2:8080/77"]


def test_a_store_behind_a_version_a_worker_enforces_is_restored(
        store, redis_client, keys, tmp_path):
    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    store.submit("FOR TENANT t1 DO SET noop")
    assert guardian.tick() == "journaled"
    version = int(redis_client.get(keys.version))
    # A worker applied a change the guardian never saw (lost with the store since).
    redis_client.hset(keys.policy_nodes, "10.0.0.2:8080/77", json.dumps(
        {"version": version + 3, "applied": time.time(), "reported": time.time()}))
    assert guardian.tick() == "restored"
    assert int(redis_client.get(keys.version)) > version + 3


def test_the_guardian_forgets_workers_silent_for_long(store, redis_client, keys, tmp_path):
    now = time.time()
    for name, ago in (("gone/1", FORGET_AFTER + 1), ("quiet/2", SILENT_AFTER + 1)):
        redis_client.hset(keys.policy_nodes, name, json.dumps(
            {"version": 1, "applied": now - ago, "reported": now - ago}))
    StoreGuardian(redis_client, keys, tmp_path / "journal.json").tick()
    assert list(redis_client.hkeys(keys.policy_nodes)) == ["quiet/2"]


def test_an_administrator_revokes_and_reinstates_the_store_through_the_api(
        client, admin, redis_client, keys):
    before = int(redis_client.get(keys.version) or 0)
    assert client.put("/v1/policies/revocation", json={"reason": "x"}).status_code == 401
    revoked = client.put("/v1/policies/revocation", json={"reason": "store compromised"},
                         headers=admin)
    assert revoked.status_code == 200 and revoked.json["revoked"]["reason"] == "store compromised"
    assert int(redis_client.get(keys.version)) == before + 1  # a version the nodes apply
    status = client.get("/v1/policies/status", headers=admin).json
    assert status["revoked"]["reason"] == "store compromised"
    assert "REVOKED" in policy_status_view(status) and "store compromised" in \
        policy_status_view(status)
    assert client.delete("/v1/policies/revocation", headers=admin).json == {"reinstated": True}
    assert client.get("/v1/policies/status", headers=admin).json["revoked"] is None
    assert not redis_client.exists(keys.revoked)
