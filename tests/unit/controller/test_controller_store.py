"""The policy store against a real Redis: atomic submissions, conflicts, precedence, removal."""

from __future__ import annotations

import json
import threading

import pytest

from iostack.controller.registry import RegistryError
from iostack.dsl import DSLError


def explain(store, method, path, size=None, **headers):
    return store.explain(method, path, {k.replace("_", "-"): v for k, v in headers.items()},
                         size)[1]


def rule_keys(redis_client, keys):
    return sorted(redis_client.scan_iter(keys.prefix + "rules:*"))


def test_submit_compiles_rules_per_target_and_lists_policies(store, redis_client, keys):
    result = store.submit("FOR TENANT t1, CONTAINER t1/logs DO SET compression WITH level=6, "
                          "SET encryption")
    (record,) = result["policies"]
    assert record["id"] == "P1" and record["status"] == "active"
    assert rule_keys(redis_client, keys) == [keys.rules("container", "AUTH_t1/logs"),
                                             keys.rules("tenant", "AUTH_t1")]
    stored = json.loads(redis_client.hget(keys.rules("tenant", "AUTH_t1"), "P1.1"))
    assert (stored["filter"], stored["params"], stored["policy"]) == \
        ("compression", {"level": 6}, "P1")
    assert [p["id"] for p in store.list()] == ["P1"]
    assert store.get("P1")["text"].startswith("FOR TENANT t1")


def test_a_failing_submission_writes_nothing(store, redis_client, keys):
    version = redis_client.get(keys.version)
    with pytest.raises(DSLError) as info:
        store.submit("FOR TENANT t1 DO SET compression\nFOR TENANT t1 DO SET COMPRESION")
    assert "line 2, column 22: unknown filter 'COMPRESION'" in str(info.value)
    assert store.list() == [] and rule_keys(redis_client, keys) == []
    assert redis_client.get(keys.version) == version


def test_dry_run_checks_everything_and_writes_nothing(store, redis_client, keys):
    result = store.submit("FOR TENANT t1 DO SET compression", dry_run=True)
    assert result["policies"][0]["id"] == "new-1"
    assert store.list() == [] and rule_keys(redis_client, keys) == []


def test_two_layout_owners_on_one_target_are_rejected(store):
    store.submit("FOR TENANT t1 DO SET compression")
    with pytest.raises(DSLError) as info:
        store.submit("FOR TENANT t1 DO SET noop\nFOR TENANT t1 DO SET xcompress")
    assert ("line 2, column 22: xcompress and compression (policy P1) both define the stored "
            "bytes (compression) on tenant AUTH_t1") in str(info.value)
    assert [p["id"] for p in store.list()] == ["P1"]


def test_layout_owners_kept_apart_by_conditions_only_warn(store):
    result = store.submit("FOR TENANT t1 DO SET compression TO OBJECT_TYPE=LOGS\n"
                          "FOR TENANT t1 DO SET xcompress TO OBJECT_TYPE=CSV")
    assert any("only their TO conditions keep them apart" in w["message"]
               for w in result["warnings"])


def test_deleting_the_owner_first_allows_another(store):
    store.submit("FOR TENANT t1 DO SET compression")
    store.submit("FOR TENANT t1 DO DELETE compression, SET xcompress")


def test_a_filter_set_twice_in_one_submission_warns_as_across_two(store):
    result = store.submit("FOR TENANT t1 DO SET compression\n"
                          "FOR TENANT t1 DO SET compression WITH level=3")
    (warning,) = result["warnings"]
    assert (warning["line"], warning["column"]) == (2, 22)
    assert "compression on tenant AUTH_t1 is already set by policy P1" in warning["message"]
    assert store.get("P2")["warnings"] == [warning]  # stored with the policy
    same = store.submit("FOR CONTAINER t1/c DO SET compression, SET compression WITH level=2")
    assert "already set earlier in this policy" in same["warnings"][0]["message"]
    # A DELETE in between means the later SET overrides nothing.
    assert store.submit("FOR CONTAINER t1/d DO SET compression\n"
                        "FOR CONTAINER t1/d DO DELETE compression\n"
                        "FOR CONTAINER t1/d DO SET compression", dry_run=True)["warnings"] == []


def test_order_and_override_warnings(store):
    result = store.submit("FOR TENANT t1 DO SET encryption, SET compression")
    assert "compression will run before encryption" in result["warnings"][0]["message"]
    result = store.submit("FOR TENANT t1 DO SET compression WITH level=3")
    assert "already set by policy P1" in result["warnings"][0]["message"]
    result = store.submit("FOR CONTAINER t1/c DO SET encryption ORDER 1, SET compression ORDER 2")
    assert "ORDER runs encryption before compression" in result["warnings"][0]["message"]
    assert [e.filter for e in explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline] == \
        ["encryption", "compression"]


def test_explain_shows_precedence_merge_and_sources(store):
    store.submit("FOR TENANT t1 DO SET compression WITH level=6, algorithm=gzip\n"
                 "FOR CONTAINER t1/logs DO SET compression WITH level=9\n"
                 "FOR OBJECT t1/logs/keep.txt DO DELETE compression")
    (entry,) = explain(store, "PUT", "/v1/AUTH_t1/logs/a.csv").pipeline
    assert entry.params["level"] == 9 and entry.params["algorithm"] == "gzip"
    assert [s["policy"] for s in entry.sources] == ["P1", "P2"]
    assert explain(store, "PUT", "/v1/AUTH_t1/logs/keep.txt").pipeline == []
    assert explain(store, "PUT", "/v1/AUTH_t2/logs/a.csv").pipeline == []


def test_groups_and_global_apply_below_the_tenant(store, registries):
    registries.put_group("gold", ["t1", "t2"])
    store.submit("FOR ALL DO SET noop\nFOR G:gold DO SET compression WITH level=2\n"
                 "FOR TENANT t1 DO SET compression WITH level=7")
    t1 = explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline
    t2 = explain(store, "PUT", "/v1/AUTH_t2/c/o").pipeline
    assert [(e.filter, e.params.get("level")) for e in t1] == [("noop", None), ("compression", 7)]
    assert [(e.filter, e.params.get("level")) for e in t2] == [("noop", None), ("compression", 2)]
    assert [p["id"] for p in store.for_tenant("AUTH_t2")] == ["P1", "P2"]
    with pytest.raises(RegistryError, match="used by policies P2"):
        registries.delete("groups", "gold")


def test_dynamic_policies_are_stored_not_enforced(store, redis_client, keys):
    (record,) = store.submit("FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression TRANSIENT")[
        "policies"]
    assert record["status"] == "stored" and record["dynamic"]
    assert record["condition"] == {"metric": "PUTS_SEC", "op": ">", "value": 3}
    assert record["rules"][0]["transient"] is True
    assert rule_keys(redis_client, keys) == []


def test_delete_removes_rules_and_object_index(store, redis_client, keys):
    store.submit("FOR OBJECT t1/c/a DO SET noop\nFOR OBJECT t1/c/b DO SET noop")
    assert redis_client.hget(keys.objrules, "AUTH_t1/c") == "2"
    store.delete("P1")
    assert redis_client.hget(keys.objrules, "AUTH_t1/c") == "1"
    store.delete("P2")
    assert redis_client.hget(keys.objrules, "AUTH_t1/c") is None
    assert rule_keys(redis_client, keys) == [] and store.list() == []
    with pytest.raises(RegistryError, match="no policy 'P2'"):
        store.delete("P2")


def test_classes_defined_in_a_submission_are_stored_atomically(store, registries):
    store.submit("DEFINE CLASS FAST AS SET caching WITH head=64M\nFOR TENANT t1 DO SET FAST")
    assert registries.get("classes", "fast")["actions"] == "SET caching WITH head=64M"
    with pytest.raises(DSLError):
        store.submit("DEFINE CLASS SLOW AS SET noop\nFOR TENANT t1 DO SET nope")
    with pytest.raises(RegistryError):
        registries.get("classes", "SLOW")


def test_concurrent_submissions_all_land_with_distinct_ids(store):
    errors = []

    def submit(i):
        try:
            store.submit(f"FOR CONTAINER t1/c{i} DO SET noop")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=submit, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    records = store.list()
    # Ids are unique; a retried transaction may leave gaps in the numbering.
    assert len({p["id"] for p in records}) == 8
    assert sorted(p["targets"][0]["name"] for p in records) == \
        sorted(f"AUTH_t1/c{i}" for i in range(8))


def test_the_library_cross_parameter_checks_run_at_compile_time(store):
    with pytest.raises(DSLError) as info:
        store.submit("FOR TENANT t1 DO SET compression WITH algorithm=gzip, level=12")
    assert "line 1, column 22:" in str(info.value) and "gzip accepts 1-9, got 12" in \
        str(info.value)
    store.submit("FOR TENANT t1 DO SET compression WITH algorithm=zstd, level=12")


def test_warnings_go_to_the_policy_they_concern(store):
    result = store.submit("FOR TENANT t1 DO SET noop; FOR TENANT t7 DO SET noop")
    first, second = result["policies"]
    assert first["warnings"] == []
    assert [w["message"] for w in second["warnings"]] == [
        "tenant 'AUTH_t7' is not known yet (the policy applies once it exists)"]


def test_volume_stacks_merge_storage_group_then_volume(store, registries):
    for name, params in [("xor", [{"name": "key", "type": "int", "minimum": 0, "maximum": 255}]),
                         ("iops", [{"name": "read", "type": "rate", "unit": "ops"},
                                   {"name": "write", "type": "rate", "unit": "ops"}])]:
        registries.put_filter({"name": name, "description": "block", "params": params,
                               "extra": {"domain": "block"}})
    store.submit("FOR STORAGE_GROUP gold DO SET iops WITH read=1000ops, write=500, SET xor "
                 "WITH key=1\nFOR VOLUME vol7 DO SET xor WITH key=0x5a, SET iops WITH read=200")
    stack = store.block_stack("vol7", "gold").pipeline
    assert [(e.filter, e.params) for e in stack] == [
        ("iops", {"read": 200, "write": 500}), ("xor", {"key": 0x5A})]
    assert [e.filter for e in store.block_stack("vol8").pipeline] == []
    with pytest.raises(DSLError, match="xor is a block filter"):
        store.submit("FOR TENANT t1 DO SET xor")


def test_actors_enforce_and_revert_dynamic_policies(store, redis_client, keys):
    (record,) = store.submit("FOR OBJECT t1/c/o WHEN PUTS_SEC > 3 DO SET noop TRANSIENT")[
        "policies"]
    pid = record["id"]
    assert explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline == []
    assert store.enforce(pid) is True and store.enforce(pid) is False
    assert store.get(pid)["status"] == "enforced"
    assert [e.filter for e in explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline] == ["noop"]
    assert store.revert(pid) is True and store.revert(pid) is False
    assert explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline == []
    assert redis_client.hget(keys.objrules, "AUTH_t1/c") is None
    store.enforce(pid)
    store.delete(pid)
    assert rule_keys(redis_client, keys) == []
    (static,) = store.submit("FOR TENANT t1 DO SET noop")["policies"]
    with pytest.raises(RegistryError, match="static"):
        store.enforce(static["id"])


def test_enforce_and_revert_per_target_and_only_transient_rules(store, registries):
    registries.add_tenant("t2")
    (record,) = store.submit("FOR TENANT t1, TENANT t2 WHEN PUTS_SEC > 3 "
                             "DO SET noop TRANSIENT, SET compression")["policies"]
    pid = record["id"]
    assert store.enforce(pid, ("tenant", "AUTH_t1")) is True
    assert {e.filter for e in explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline} == {
        "noop", "compression"}
    assert explain(store, "PUT", "/v1/AUTH_t2/c/o").pipeline == []
    assert store.revert(pid, ("tenant", "AUTH_t1"), transient_only=True) is True
    assert [e.filter for e in explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline] == [
        "compression"]
    assert store.get(pid)["status"] == "enforced"
    assert store.revert(pid, ("tenant", "AUTH_t1"), transient_only=True) is False
    store.delete(pid)
    assert explain(store, "PUT", "/v1/AUTH_t1/c/o").pipeline == []


def test_a_tenant_named_by_its_keystone_project(store, registries):
    """Keystone accounts are AUTH_<project id>: a recorded name stands for its account, and
    a project id (32 hex digits, here starting with a digit) is a tenant name too."""
    project = "0123abcd" * 4
    account = f"AUTH_{project}"
    assert registries.add_tenant("proj", account) == account
    result = store.submit(f"FOR CONTAINER proj/logs DO SET noop; FOR TENANT {project} DO SET noop")
    assert [t["name"] for p in result["policies"] for t in p["targets"]] == [
        f"{account}/logs", account]
    assert result["warnings"] == [], "both name a known tenant"
    assert [e.filter for e in explain(store, "PUT", f"/v1/{account}/logs/o").pipeline] == [
        "noop"]
    assert registries.put_group("g", ["proj"]) == [account]


def test_a_rule_enforced_again_gives_the_proxy_cache_a_new_version(store, redis_client, keys):
    """Regression: enforce wrote the very rule JSON it wrote before a revert, so
    the proxy cache's entry version (a digest of the caching rules) repeated and
    entries filled before the revert (objects overwritten or deleted while no
    caching rule was there to invalidate them) were served again."""
    from iostack.swift_middleware.cache.admission import entry_version

    (record,) = store.submit("FOR CONTAINER t1/c WHEN PUTS_SEC > 3 DO SET caching")[
        "policies"]
    versions = []
    for _ in range(3):
        assert store.enforce(record["id"]) is True
        stored = redis_client.hgetall(keys.rules("container", "AUTH_t1/c"))
        versions.append(entry_version([json.loads(v) for v in stored.values()]))
        assert store.revert(record["id"]) is True
    assert len(set(versions)) == 3
    store.delete(record["id"])
