"""``iostack object inspect`` and ``iostack usage`` against the real stack."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.integration

TEXT = b"timestamp,user,action\n" + b"2026-11-26T10:00:00,alice,login\n" * 2000


def test_inspect_an_object_stored_before_its_policy_and_one_stored_after(
        t1, container, policies, iostack, iostack_json):
    t1.put_object(container, "before.csv", TEXT, content_type="text/csv",
                  headers={"X-Object-Meta-Owner": "alice"})
    path = f"/v1/AUTH_t1/{container}/before.csv"
    plain = iostack_json("object", "inspect", path)
    assert plain["filtered"] is False
    assert plain["logical_bytes"] == plain["stored_bytes"] == len(TEXT)
    assert plain["today"]["differs"] is False

    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION WITH algorithm=gzip")
    version = policies.client.history()["history"][0]["version"]
    old = iostack_json("object", "inspect", path)
    assert old["today"]["differs"] is True
    assert "stored with no filter, today compression(" in old["today"]["reasons"][0]
    # None when it was written before the store's history began (a fresh stack).
    assert old["written_under_version"] is None or old["written_under_version"] < version

    t1.put_object(container, "after.csv", TEXT, content_type="text/csv")
    new = iostack_json("object", "inspect", f"/v1/AUTH_t1/{container}/after.csv")
    assert new["filtered"] is True
    assert [f["filter"] for f in new["layers"]["proxy"]] == ["compression"]
    assert new["layers"]["proxy"][0]["params"]["algorithm"] == "gzip"
    assert new["logical_bytes"] == len(TEXT) > 10 * new["stored_bytes"]
    assert new["etag"] == t1.head_object(container, "after.csv")["etag"]
    assert new["written_under_version"] >= version
    assert new["today"] == new["today"] | {"differs": False, "reasons": []}

    text = iostack("object", "inspect", f"/v1/AUTH_t1/{container}/after.csv")
    assert text.returncode == 0, text.stderr
    assert "1. compression algorithm=gzip" in text.stdout
    assert "today: would be stored the same way" in text.stdout

    # A policy change with other parameters: the object would be stored differently.
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION WITH algorithm=zstd")
    changed = iostack_json("object", "inspect", f"/v1/AUTH_t1/{container}/after.csv")
    assert changed["today"]["differs"] is True
    assert "algorithm=gzip" in changed["today"]["reasons"][0]


def test_inspect_says_a_manifest_is_stored_as_written(t1, container, policies, iostack_json):
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    t1.put_object(container, "seg/1", b"a" * 1000)
    t1.put_object(container, "dlo", b"", headers={"X-Object-Manifest": f"{container}/seg/"})
    found = iostack_json("object", "inspect", f"/v1/AUTH_t1/{container}/dlo")
    assert found["kind"] == "dlo-manifest"
    assert found["today"]["differs"] is False


def test_inspect_of_a_missing_object_is_refused(container, iostack):
    done = iostack("object", "inspect", f"/v1/AUTH_t1/{container}/nothing")
    assert done.returncode == 1
    assert "no such object" in done.stderr


def test_usage_counts_logical_and_stored_bytes_per_container(
        t1, container, policies, iostack_json):
    t1.put_object(container, "plain.bin", os.urandom(5000))
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    for n in range(3):
        t1.put_object(container, f"log-{n}.csv", TEXT)
    result = iostack_json("usage", f"AUTH_t1/{container}")
    [row] = result["containers"]
    assert row["account"] == "AUTH_t1" and row["container"] == container
    assert row["objects"] == 4 and row["filtered_objects"] == 3
    assert row["logical_bytes"] == 5000 + 3 * len(TEXT)
    assert 5000 < row["stored_bytes"] < 5000 + len(TEXT)
    assert result["tenants"] == [row | {"container": None}]
    assert result["age_seconds"] == 0

    cached = iostack_json("usage", "--cached")
    assert cached["containers"] == result["containers"]
    assert cached["age_seconds"] >= 0 and cached["scanned_at"] == result["scanned_at"]
