"""``TO OBJECT_AGE`` over stored objects, with the clock given to simulate and reconcile."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.integration

DAY = 86400
TEXT = b"2026-11-26,alice,login\n" * 3000


def test_cold_objects_are_compressed_by_a_reconcile_pass_new_writes_are_not(
        t1, container, policies, iostack_json):
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION TO OBJECT_AGE > 30d")
    for n in range(4):
        t1.put_object(container, f"log-{n}", TEXT)
    # A tenant cannot claim an age: the proxies drop X-Backend-* headers from clients.
    t1.put_object(container, "log-3", TEXT, headers={"X-Backend-Iostack-Object-Age": "1e9"})
    path = f"/v1/AUTH_t1/{container}/log-0"
    for name in ("log-0", "log-3"):
        inspected = iostack_json("object", "inspect", f"/v1/AUTH_t1/{container}/{name}")
        assert inspected["filtered"] is False  # a write is a new object
    text = f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION TO OBJECT_AGE > 30d"
    today = iostack_json("policy", "simulate", text)
    assert (today["listed"], today["objects"], today["changed_objects"]) == (4, 0, 0)
    later = str(time.time() + 31 * DAY)
    cold = iostack_json("policy", "simulate", text, "--now", later)
    assert (cold["objects"], cold["changed_objects"]) == (4, 4)
    assert cold["projected_stored_bytes"] < len(TEXT)

    now = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait")
    assert (now["reencoded"], now["skipped"]) == (0, 4)
    done = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait",
                        "--now", later, "--duty", "1")
    assert (done["reencoded"], done["failed"]) == (4, 0)
    inspected = iostack_json("object", "inspect", path, "--now", later)
    assert inspected["filtered"] is True and inspected["today"]["differs"] is False
    assert inspected["stored_bytes"] * 10 < inspected["logical_bytes"]
    assert t1.get_object(container, "log-0")[1] == TEXT
