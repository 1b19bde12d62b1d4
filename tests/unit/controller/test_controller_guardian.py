"""The guardian journals the policy store and refills it when it lost its marker."""

from __future__ import annotations

import json
import stat

from iostack.controller.guardian import StoreGuardian


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
