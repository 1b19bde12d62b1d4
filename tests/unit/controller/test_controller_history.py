"""Policy history: recorded with each change, diffed, rolled back atomically (real Redis)."""

from __future__ import annotations

import json

import pytest

from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import RegistryError
from iostack.dsl.errors import DSLError


def texts(store: PolicyStore) -> list[str]:
    return [r["text"] for r in store.list()]


def test_existing_policies_become_the_baseline_and_each_change_a_version(store):
    store.submit("FOR TENANT t1 DO SET noop")  # history starts with this change
    store.submit("FOR CONTAINER t1/logs DO SET compression WITH level=9", who="alice")
    (pid,) = [r["id"] for r in store.list() if "logs" in r["text"]]
    store.delete(pid, who="bob")
    entries = store.history.entries()
    assert [(e["version"], e["op"], e["who"]) for e in entries] == [
        (3, "delete", "bob"), (2, "add", "alice"), (1, "add", ""), (0, "baseline", "")]
    assert entries[0]["removed"] == [pid] and entries[1]["added"] == [pid]
    assert [r["text"] for r in store.history.policies_at(2)] == [
        "FOR TENANT t1 DO SET noop", "FOR CONTAINER t1/logs DO SET compression WITH level=9"]
    assert [r["text"] for r in store.history.policies_at(3)] == ["FOR TENANT t1 DO SET noop"]


def test_policies_stored_before_history_are_the_baseline(store, redis_client, keys):
    store.submit("FOR TENANT t1 DO SET noop")
    redis_client.delete(keys.history, keys.history_policies)  # as before this feature
    store.submit("FOR ALL DO SET compression")
    baseline, added = store.history.entry(0), store.history.entry(1)
    assert baseline["op"] == "baseline" and len(baseline["added"]) == 1
    assert [r["text"] for r in store.history.records(baseline["added"])] == [
        "FOR TENANT t1 DO SET noop"]
    assert added["op"] == "add"


def test_failed_and_dry_run_submissions_are_not_recorded(store):
    store.submit("FOR TENANT t1 DO SET noop")
    with pytest.raises(DSLError):
        store.submit("FOR TENANT t1 DO SET nope")
    store.submit("FOR TENANT t1 DO SET compression", dry_run=True)
    assert store.history.count() == 2  # baseline + the one real change


def test_diff_names_policies_and_compiled_rules(store):
    store.submit("FOR TENANT t1 DO SET noop")
    store.submit("FOR CONTAINER t1/logs DO SET compression WITH level=9")
    diff = store.history.diff(1, 2)
    assert [r["text"] for r in diff["policies_added"]] == [
        "FOR CONTAINER t1/logs DO SET compression WITH level=9"]
    assert diff["policies_removed"] == []
    (rule,) = diff["rules_added"]
    assert (rule["level"], rule["target"], rule["filter"], rule["params"]) == (
        "container", "AUTH_t1/logs", "compression", {"level": 9})
    back = store.history.diff(2, 1)
    assert back["rules_removed"] == diff["rules_added"] and back["rules_added"] == []


def test_rollback_restores_a_version_atomically_and_is_recorded(store, redis_client, keys):
    store.submit("FOR TENANT t1 DO SET noop")                        # version 1
    store.submit("FOR CONTAINER t1/logs DO SET compression")         # version 2
    old = [r for r in store.list() if "noop" in r["text"]][0]
    store.delete(old["id"])                                          # version 3
    store.submit("FOR OBJECT t1/logs/a.csv DO SET noop")             # version 4
    assert redis_client.hget(keys.objrules, "AUTH_t1/logs") == "1"
    result = store.rollback(2, who="carol")
    assert [r["text"] for r in result["removed"]] == ["FOR OBJECT t1/logs/a.csv DO SET noop"]
    assert [r["text"] for r in result["policies"]] == ["FOR TENANT t1 DO SET noop"]
    assert sorted(texts(store)) == sorted(
        ["FOR TENANT t1 DO SET noop", "FOR CONTAINER t1/logs DO SET compression"])
    assert redis_client.hget(keys.objrules, "AUTH_t1/logs") is None
    assert redis_client.hgetall(keys.rules("object", "AUTH_t1/logs/a.csv")) == {}
    restored = result["policies"][0]
    assert restored["id"] != old["id"]
    assert json.loads(redis_client.hget(keys.rules("tenant", "AUTH_t1"),
                                        restored["rules"][0]["id"]))["filter"] == "noop"
    latest = store.history.entries(1)[0]
    assert (latest["version"], latest["op"], latest["who"]) == (5, "rollback", "carol")
    assert latest["note"] == "rollback to version 2"
    assert store.history.diff(2, 5)["rules_added"] == []
    assert store.history.diff(2, 5)["rules_removed"] == []


def test_rollback_rechecks_through_the_compiler(store, registries):
    store.submit("FOR TENANT t1 DO SET xcompress WITH level=1")     # version 1
    first = store.list()[0]["id"]
    store.delete(first)                                              # version 2
    store.submit("FOR TENANT t1 DO SET compression")                 # version 3
    # Going back to 1 removes compression and re-adds xcompress in one change: the
    # layout conflict between them must not count the rule that goes away.
    store.rollback(1)
    assert texts(store) == ["FOR TENANT t1 DO SET xcompress WITH level=1"]
    # A filter removed from the registry since makes the rollback fail, changing nothing.
    store.rollback(3)
    registries.delete("filters", "xcompress")
    before = store.history.count()
    with pytest.raises(DSLError):
        store.rollback(1)
    assert store.history.count() == before
    assert texts(store) == ["FOR TENANT t1 DO SET compression"]


def test_rollback_to_an_unknown_version_is_404(store):
    store.submit("FOR TENANT t1 DO SET noop")
    with pytest.raises(RegistryError) as info:
        store.rollback(7)
    assert info.value.status == 404


def test_actor_switches_are_events_not_history(store):
    (record,) = store.submit("FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET noop TRANSIENT")[
        "policies"]
    store.enforce(record["id"])
    store.revert(record["id"])
    events = store.history.events()
    assert [(e["policy"], e["target"], e["state"]) for e in events] == [
        (record["id"], "AUTH_t1", "reverted"), (record["id"], "AUTH_t1", "enforced")]
    assert store.history.count() == 2


# -- REST -----------------------------------------------------------------------


def test_history_rest_records_who_diffs_and_rolls_back(client, admin):
    client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET noop"}, headers=admin)
    client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET compression"},
                headers=admin)
    listing = client.get("/v1/policies/history", headers=admin).json
    assert listing["count"] == 3
    newest = listing["history"][0]
    assert (newest["version"], newest["op"], newest["who"]) == (2, "add", "admin")
    assert newest["added_policies"][0]["text"] == "FOR TENANT t1 DO SET compression"
    one = client.get("/v1/policies/history/2", headers=admin).json
    assert [r["filter"] for r in one["rules_added"]] == ["compression"]
    assert len(one["policies"]) == 2
    diff = client.get("/v1/policies/history/diff?from=2&to=1", headers=admin).json
    assert [r["text"] for r in diff["policies_removed"]] == ["FOR TENANT t1 DO SET compression"]
    dry = client.post("/v1/policies/history/1/rollback?dry_run=true", headers=admin).json
    assert len(client.get("/v1/policies", headers=admin).json["policies"]) == 2
    assert [r["text"] for r in dry["removed"]] == ["FOR TENANT t1 DO SET compression"]
    done = client.post("/v1/policies/history/1/rollback", headers=admin)
    assert done.status_code == 200
    assert [r["text"] for r in client.get("/v1/policies", headers=admin).json["policies"]] == [
        "FOR TENANT t1 DO SET noop"]
    assert client.get("/v1/policies/history/9", headers=admin).status_code == 404
    assert client.get("/v1/policies/history/diff?from=x&to=1",
                      headers=admin).status_code == 400


def test_history_hides_secrets_and_is_for_administrators(client, admin):
    meta = {"description": "x", "params": [{"name": "key", "type": "secret"}]}
    client.put("/v1/filters/vault", json=meta, headers=admin)
    client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET vault WITH key=s3cr3t"},
                headers=admin)
    for path in ("/v1/policies/history", "/v1/policies/history/1",
                 "/v1/policies/history/diff?from=0&to=1"):
        body = client.get(path, headers=admin).get_data(as_text=True)
        assert "s3cr3t" not in body and "***" in body, path
        assert client.get(path, headers={"X-Auth-Token": "t" * 20}).status_code == 401
    assert client.post("/v1/policies/history/0/rollback").status_code == 401
