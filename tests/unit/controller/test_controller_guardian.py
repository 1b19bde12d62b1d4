"""The guardian journals the policy store and restores it when it lost its marker or
went back to an older version."""

from __future__ import annotations

import json
import logging
import stat

from iostack.controller.guardian import StoreGuardian
from iostack.controller.server import prepare_store


def test_journal_then_restore_after_a_flush(store, registries, redis_client, keys, tmp_path):
    store.submit("FOR CONTAINER t1/secure DO SET encryption")
    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    assert guardian.tick() == "journaled"
    assert guardian.tick() == "unchanged"
    journal = tmp_path / "journal.json"
    assert stat.S_IMODE(journal.stat().st_mode) == 0o600
    assert keys.marker in json.loads(journal.read_text())["keys"]
    before = store.explain("PUT", "/v1/AUTH_t1/secure/o")[1].pipeline
    for key in redis_client.scan_iter(keys.prefix + "*"):  # a FLUSHALL of this namespace
        redis_client.delete(key)
    assert guardian.tick() == "restored"
    assert redis_client.exists(keys.marker)
    after = store.explain("PUT", "/v1/AUTH_t1/secure/o")[1].pipeline
    assert [e.filter for e in after] == [e.filter for e in before] == ["encryption"]
    assert len(store.list()) == 1


def test_no_journal_leaves_the_store_unmarked(redis_client, keys, tmp_path):
    guardian = StoreGuardian(redis_client, keys, tmp_path / "missing.json")
    assert guardian.tick() == "unmarked"
    assert not redis_client.exists(keys.marker)


def test_seeding_marks_a_new_namespace_only_once(registries, redis_client, keys):
    epoch = redis_client.get(keys.marker)
    assert epoch
    registries.seed()
    assert redis_client.get(keys.marker) == epoch


def _flush(redis_client, keys) -> None:
    for key in redis_client.scan_iter(keys.prefix + "*"):
        redis_client.delete(key)


def test_a_first_start_marks_the_store_and_journals_it(registries, redis_client, keys, tmp_path,
                                                      caplog):
    _flush(redis_client, keys)
    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    with caplog.at_level(logging.WARNING, logger="iostack.controller.guardian"):
        added = prepare_store(guardian, registries, ["t1"])
    assert caplog.records == []  # a new store lost nothing: no alarm in the operator's log
    assert added and redis_client.exists(keys.marker)
    journal = json.loads((tmp_path / "journal.json").read_text())["keys"]
    assert keys.marker in journal and keys.tenants in journal


def test_a_start_with_an_unusable_journal_leaves_an_emptied_store_unmarked(
        store, registries, redis_client, keys, tmp_path):
    store.submit("FOR CONTAINER t1/secure DO SET encryption")
    journal = tmp_path / "journal.json"
    StoreGuardian(redis_client, keys, journal).tick()
    document = json.loads(journal.read_text())
    journal.write_text(json.dumps(document | {"prefix": "another:"}))
    _flush(redis_client, keys)  # Redis restarted empty; the journal is not this store's
    prepare_store(StoreGuardian(redis_client, keys, journal), registries, ["t1"])
    # Seeding refilled the vocabulary but did not vouch for the store: writes stay refused.
    assert redis_client.hlen(keys.filters) > 0
    assert not redis_client.exists(keys.marker)


def test_seeding_without_mark_leaves_a_new_namespace_unmarked(registries, redis_client, keys):
    _flush(redis_client, keys)
    registries.seed(mark=False)
    assert not redis_client.exists(keys.marker)


def test_a_rolled_back_store_is_restored_never_accepted(store, redis_client, keys, tmp_path):
    journal = tmp_path / "journal.json"
    guardian = StoreGuardian(redis_client, keys, journal)
    store.submit("FOR CONTAINER t1/old DO SET compression")
    guardian.tick()
    backup = {k: redis_client.dump(k) for k in redis_client.scan_iter(keys.prefix + "*")}
    old_version = int(redis_client.get(keys.version))
    store.submit("FOR CONTAINER t1/secure DO SET encryption")
    store.delete(next(p["id"] for p in store.list() if "t1/old" in p["text"]))
    assert guardian.tick() == "journaled"
    newest = int(redis_client.get(keys.version))
    # The old backup is restored over the store: the newest policy gone, the removed one back.
    _flush(redis_client, keys)
    for key, value in backup.items():
        redis_client.restore(key, 0, value)
    assert int(redis_client.get(keys.version)) == old_version < newest
    # A controller restarted meanwhile knows the highest version from its journal.
    restarted = StoreGuardian(redis_client, keys, journal)
    assert restarted.highest == newest
    assert restarted.tick() == "restored"
    assert int(redis_client.get(keys.version)) > newest  # every node applies it
    assert [p["text"] for p in store.list()] == ["FOR CONTAINER t1/secure DO SET encryption"]
    assert [e.filter for e in store.explain("PUT", "/v1/AUTH_t1/secure/o")[1].pipeline] == \
        ["encryption"]
    assert store.explain("PUT", "/v1/AUTH_t1/old/o")[1].pipeline == []
    assert restarted.tick() == "journaled"
    assert restarted.tick() == "unchanged"


def test_a_restored_store_is_above_every_version_a_node_may_hold(
        store, redis_client, keys, tmp_path, shared_redis_url):
    from iostack.policy.reader import PolicyReader

    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    store.submit("FOR CONTAINER t1/secure DO SET encryption")
    guardian.tick()
    reader = PolicyReader(shared_redis_url, prefix=keys.prefix)
    try:
        reader.refresh()
        held = reader.version
        _flush(redis_client, keys)
        assert reader.refresh() == "unmarked"
        assert reader.version == held
        assert guardian.tick() == "restored"
        assert reader.wait_version(held + 1, 3)
    finally:
        reader.close()


def test_a_change_is_journaled_when_committed_so_a_store_lost_at_once_keeps_it(
        store, redis_client, keys, tmp_path):
    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    store.submit("FOR CONTAINER t1/other DO SET noop")
    assert guardian.tick() == "journaled"
    store.after_commit = guardian.journal_committed  # as the controller wires it
    store.submit("FOR CONTAINER t1/secure DO SET encryption")
    for key in redis_client.scan_iter(keys.prefix + "*"):  # lost before the next tick
        redis_client.delete(key)
    assert guardian.tick() == "restored"
    after = store.explain("PUT", "/v1/AUTH_t1/secure/o")[1].pipeline
    assert [e.filter for e in after] == ["encryption"]


def test_a_registry_change_is_journaled_when_committed(registries, redis_client, keys, tmp_path):
    guardian = StoreGuardian(redis_client, keys, tmp_path / "journal.json")
    assert guardian.tick() == "journaled"
    registries.after_commit = guardian.journal_committed  # as the controller wires it
    registries.put_object_type("LEDGER", [r".*\.ledger$"])
    registries.put_group("gold", ["t1"])
    journaled = json.loads((tmp_path / "journal.json").read_text())["keys"]
    assert "LEDGER" in journaled[keys.object_types]["value"]
    assert json.loads(journaled[keys.groups]["value"]["gold"]) == ["AUTH_t1"]
    for key in redis_client.scan_iter(keys.prefix + "*"):  # lost before the next tick
        redis_client.delete(key)
    assert guardian.tick() == "restored"
    assert "LEDGER" in registries.list("object_types")
    registries.delete("object_types", "LEDGER")
    journaled = json.loads((tmp_path / "journal.json").read_text())["keys"]
    assert "LEDGER" not in journaled[keys.object_types]["value"]
