"""``SET EXPIRY WITH after=...``: new writes get X-Delete-At, Swift's object-expirer deletes them.

The clock here is the real one, with short durations: the all-in-one's
expirer passes every ``EXPIRER_INTERVAL`` seconds.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import swiftclient
from swift.common import direct_client
from swift.common.exceptions import ClientException as DirectClientException

from iostack.aio.swift import EXPIRER_INTERVAL

pytestmark = pytest.mark.integration


def _delete_at(conn: swiftclient.Connection, container: str, name: str) -> int | None:
    value = conn.head_object(container, name).get("x-delete-at")
    return int(value) if value else None


def _cli(aio, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "iostack.cli", *argv],  # noqa: S603
                          capture_output=True, text=True, timeout=60, check=False)


def _on_disk(object_ring, container: str, name: str) -> bool:
    part, nodes = object_ring.get_nodes("AUTH_t1", container, name)
    try:
        direct_client.direct_head_object(nodes[0], part, "AUTH_t1", container, name,
                                         headers={"X-Backend-Replication": "True"})
    except DirectClientException as exc:
        if exc.http_status == 404:
            return False
        raise
    return True


def test_expiry_sets_x_delete_at_on_writes_and_the_expirer_removes_them(
        t1, container, policies, aio):
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET EXPIRY WITH after=1h")
    before = time.time()
    t1.put_object(container, "plain", b"x" * 100)
    assert before + 3600 - 1 <= _delete_at(t1, container, "plain") <= time.time() + 3600
    # A sooner deletion the tenant asks for stays; a later one is brought back to the policy's.
    t1.put_object(container, "soon", b"s", headers={"X-Delete-After": "600"})
    assert _delete_at(t1, container, "soon") <= time.time() + 600
    t1.put_object(container, "late", b"l", headers={"X-Delete-At": str(int(time.time()) + 86400)})
    assert _delete_at(t1, container, "late") <= time.time() + 3600
    # A POST neither removes it nor escapes it (it restarts the clock, as a write).
    t1.post_object(container, "plain", headers={"X-Remove-Delete-At": "1",
                                                "X-Object-Meta-Color": "red"})
    assert time.time() + 3600 - 5 <= _delete_at(t1, container, "plain") <= time.time() + 3600
    explained = _cli(aio, "policy", "explain", "PUT", f"/v1/AUTH_t1/{container}/o",
                     "--url", aio["controller_url"], "--token", aio["admin_token"])
    assert explained.returncode == 0, explained.stderr
    assert "lifecycle: objects written here are deleted 1 h after each write" in explained.stdout
    # Another container is untouched.
    t1.put_container(f"{container}-free")
    t1.put_object(f"{container}-free", "o", b"o")
    assert _delete_at(t1, f"{container}-free", "o") is None
    t1.delete_object(f"{container}-free", "o")
    t1.delete_container(f"{container}-free")


def test_expired_objects_are_really_removed_by_the_running_expirer(
        t1, container, policies, aio, object_ring):
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET EXPIRY WITH after=2s")
    t1.put_object(container, "brief", b"gone soon")
    assert _on_disk(object_ring, container, "brief")
    time.sleep(2.5)
    with pytest.raises(swiftclient.ClientException) as err:  # expired: Swift hides it at once
        t1.get_object(container, "brief")
    assert err.value.http_status == 404
    deadline = time.monotonic() + 4 * EXPIRER_INTERVAL + 20
    while _on_disk(object_ring, container, "brief") and time.monotonic() < deadline:
        time.sleep(1)
    assert not _on_disk(object_ring, container, "brief")  # the expirer deleted it
    status = _cli(aio, "aio", "status", "--state-dir", aio["state_dir"])
    (row,) = [line for line in status.stdout.splitlines() if line.startswith("object-expirer")]
    assert " up " in f"{row} " or "running" in row, row


def test_a_reconcile_pass_gives_stored_objects_their_expiry_from_their_last_write(
        t1, container, policies, iostack_json):
    t1.put_object(container, "old", b"o" * 1000, headers={"X-Object-Meta-Color": "blue"})
    soon = int(time.time()) + 120
    t1.put_object(container, "soon", b"s", headers={"X-Delete-At": str(soon)})
    before = {name: t1.head_object(container, name) for name in ("old", "soon")}
    assert before["old"].get("x-delete-at") is None
    text = f"FOR CONTAINER AUTH_t1/{container} DO SET EXPIRY WITH after=1h"
    today = iostack_json("policy", "simulate", text)
    assert (today["expiring_objects"], today["overdue_objects"]) == (1, 0)  # "soon" goes sooner
    later = iostack_json("policy", "simulate", text, "--now", str(time.time() + 7200))
    assert (later["overdue_objects"], later["overdue_bytes"]) == (1, 1000)
    policies.add(text)
    done = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait", "--duty", "1")
    assert (done["reencoded"], done["skipped"], done["failed"]) == (1, 1, 0)
    after = t1.head_object(container, "old")
    written = float(before["old"]["x-timestamp"])
    assert int(after["x-delete-at"]) == int(written + 3600)
    for kept in ("etag", "last-modified", "x-object-meta-color", "content-length"):
        assert after[kept] == before["old"][kept]
    assert int(t1.head_object(container, "soon")["x-delete-at"]) == soon  # sooner: kept
    again = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait", "--duty", "1")
    assert (again["reencoded"], again["skipped"]) == (0, 2)  # idempotent
