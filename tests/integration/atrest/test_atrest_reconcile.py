"""``iostack reconcile`` against the real stack: objects re-encoded as they were, tenants win."""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import boto3
import pytest
from botocore.config import Config
from swift.common.utils import FileLikeIter, Timestamp

from iostack.atrest import reconcile
from iostack.atrest.inspect import stored_object
from iostack.atrest.scan import Target
from iostack.atrest.swift_access import SwiftAccess
from iostack.policy.reader import PolicyReader

pytestmark = pytest.mark.integration

MARKER = b"PLAINTEXT-MARKER-" + uuid.uuid4().hex.encode()


def bodies(count: int) -> dict[str, bytes]:
    return {f"o{n:03d}": (b"%d,alice,login\n" % n) * (200 + 37 * n) if n % 3
            else os.urandom(3000 + n) for n in range(count)}


def tenant_view(t1, container: str, name: str) -> dict[str, str]:
    headers = t1.head_object(container, name)
    return {k: v for k, v in headers.items()
            if k in ("etag", "last-modified", "content-type", "content-length", "x-delete-at")
            or k.startswith("x-object-meta-")}


def offset(access: SwiftAccess, container: str, name: str) -> int:
    headers = access.stored_headers("AUTH_t1", container, name)
    return Timestamp(headers["X-Backend-Timestamp"]).offset


@pytest.fixture
def access(aio) -> SwiftAccess:
    return SwiftAccess(aio["swift_dir"])


def test_reconcile_reencodes_every_object_as_the_tenant_stored_it(
        aio, t1, container, policies, iostack_json, access):
    written = bodies(30)
    later = int(time.time()) + 86400
    for name, body in written.items():
        t1.put_object(container, name, body, content_type="text/csv",
                      headers={"X-Object-Meta-Owner": name, "X-Delete-At": str(later)})
    before = {name: tenant_view(t1, container, name) for name in written}
    listing = t1.get_container(container)[1]
    usage_before = iostack_json("usage", f"AUTH_t1/{container}")["containers"][0]
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    projected = iostack_json("policy", "simulate",
                             f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION",
                             "--sample", "10")

    done = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait", "--duty", "1")
    assert done["state"] == "done"
    assert (done["scanned"], done["reencoded"], done["failed"]) == (30, 30, 0)
    assert done["stored_bytes_after"] < done["stored_bytes_before"]
    assert abs(done["stored_bytes_after"] - projected["projected_stored_bytes"]) <= \
        projected["projection"]["error_bound_bytes"]

    s3 = boto3.client("s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
                      aws_access_key_id=aio["tenants"]["t1"]["user"],
                      aws_secret_access_key=aio["tenants"]["t1"]["key"],
                      config=Config(s3={"addressing_style": "path"}))
    for name, body in written.items():
        assert t1.get_object(container, name)[1] == body
        assert tenant_view(t1, container, name) == before[name]
        assert t1.get_object(container, name, headers={"Range": "bytes=100-1099"})[1] == \
            body[100:1100]
        assert s3.get_object(Bucket=container, Key=name)["Body"].read() == body
        assert s3.get_object(Bucket=container, Key=name,
                             Range="bytes=7-99")["Body"].read() == body[7:100]
        assert offset(access, container, name) == 1
    assert t1.get_container(container)[1] == listing
    usage_after = iostack_json("usage", f"AUTH_t1/{container}")["containers"][0]
    assert usage_after["logical_bytes"] == usage_before["logical_bytes"]
    assert usage_after["stored_bytes"] < usage_before["stored_bytes"]

    again = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait")
    assert (again["reencoded"], again["skipped"]) == (0, 30)  # a pass is idempotent


def test_after_reconcile_under_encryption_no_plaintext_is_stored(
        aio, t1, container, policies, iostack_json, access, stored):
    t1.post_container(container, {"X-Versions-Enabled": "true"})
    t1.put_object(container, "doc", MARKER + b" version 1")
    t1.put_object(container, "doc", MARKER + b" version 2")
    s3 = boto3.client("s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
                      aws_access_key_id=aio["tenants"]["t1"]["user"],
                      aws_secret_access_key=aio["tenants"]["t1"]["key"],
                      config=Config(s3={"addressing_style": "path"}))
    upload = s3.create_multipart_upload(Bucket=container, Key="big")["UploadId"]
    part = MARKER * (6 * 1024 * 1024 // len(MARKER) + 1)
    etag = s3.upload_part(Bucket=container, Key="big", UploadId=upload, PartNumber=1,
                          Body=part)["ETag"]
    s3.complete_multipart_upload(Bucket=container, Key="big", UploadId=upload,
                                 MultipartUpload={"Parts": [{"ETag": etag, "PartNumber": 1}]})
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET ENCRYPTION")

    done = iostack_json("reconcile", "start", f"AUTH_t1/{container}", "--wait", "--duty", "1")
    assert done["state"] == "done" and done["failed"] == 0
    assert done["reencoded"] >= 3  # two versions of doc and the part; manifests skipped
    found = 0
    for account, cont, entry in _every_object(access, container):
        headers, body = stored("AUTH_t1", cont, entry["name"])
        if stored_object(account, cont, entry["name"], headers).kind != "object":
            continue
        found += 1
        assert MARKER not in body, (cont, entry["name"])
    assert found >= 3
    assert t1.get_object(container, "doc")[1] == MARKER + b" version 2"
    assert s3.get_object(Bucket=container, Key="big")["Body"].read() == part


def _every_object(access: SwiftAccess, container: str):
    from iostack.atrest import scan

    return scan.objects(access, Target("AUTH_t1", container), [])


def test_a_tenant_write_or_delete_during_a_reencode_wins(
        aio, t1, container, policies, access, tmp_path, monkeypatch):
    for name in ("overwritten", "deleted"):
        t1.put_object(container, name, b"old,csv\n" * 1000)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    conf = access.iostack_conf
    reader = PolicyReader(conf["redis_url"], prefix=conf["key_prefix"], live=True)
    worker = reconcile.Reconciler(access, reader, Target("AUTH_t1", container), [],
                                  tmp_path / "state.json")
    tenant_acts = {"overwritten": lambda: t1.put_object(container, "overwritten", b"tenant v2"),
                   "deleted": lambda: t1.delete_object(container, "deleted")}
    try:
        for name, act in tenant_acts.items():
            headers = access.stored_headers("AUTH_t1", container, name)
            target = stored_object("AUTH_t1", container, name, headers)
            acted = []

            class ActingBody(FileLikeIter):
                def read(self, size=-1, act=act, acted=acted):
                    if not acted:  # between the daemon's read and its write-back
                        acted.append(act())
                    return super().read(size)

            monkeypatch.setattr(reconcile, "FileLikeIter", ActingBody)
            state = reconcile.ReconcileState("test")
            worker._reencode(state, target, headers)
            assert acted and (state.reencoded, state.raced) == (0, 1), name
    finally:
        reader.close()
    assert t1.get_object(container, "overwritten")[1] == b"tenant v2"
    assert access.stored_headers("AUTH_t1", container, "deleted") is None
    assert [e["name"] for e in t1.get_container(container)[1]] == ["overwritten"]


def test_a_killed_daemon_resumes_without_redoing_and_stop_stops_it(
        t1, container, policies, iostack, iostack_json, access):
    written = bodies(24)
    for name, body in written.items():
        t1.put_object(container, name, body)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    target = f"AUTH_t1/{container}"
    started = iostack_json("reconcile", "start", target, "--objects-per-second", "3")
    assert started["state"] == "running" and started["total"] == 24
    status = _wait_for(iostack_json, target, lambda s: s["scanned"] >= 6)
    os.kill(status["pid"], signal.SIGKILL)
    time.sleep(0.5)
    killed = iostack_json("reconcile", "status", target)
    assert killed["state"] == "interrupted" and 6 <= killed["scanned"] < 24

    # Slow enough that a loaded machine's CLI calls come well before its end.
    iostack_json("reconcile", "start", target, "--objects-per-second", "0.1")
    _wait_for(iostack_json, target, lambda s: s["scanned"] > killed["scanned"])
    stopped = iostack_json("reconcile", "stop", target)
    assert stopped["state"] == "stopped" and stopped["scanned"] < 24
    assert iostack("reconcile", "stop", target).returncode == 1  # nothing runs now

    done = iostack_json("reconcile", "start", target, "--wait", "--duty", "1")
    assert done["state"] == "done" and done["failed"] == 0
    assert done["scanned"] >= 24 and done["reencoded"] <= 24
    # Each object was written back exactly once: its timestamp's offset is 1.
    assert [offset(access, container, n) for n in written] == [1] * len(written)
    for name, body in written.items():
        assert t1.get_object(container, name)[1] == body


def _wait_for(iostack_json, target: str, ready, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = iostack_json("reconcile", "status", target)
        if ready(status):
            return status
        assert status["state"] == "running", json.dumps(status)
        time.sleep(0.5)
    raise AssertionError(f"reconcile of {target} did not get there in {timeout} s")
