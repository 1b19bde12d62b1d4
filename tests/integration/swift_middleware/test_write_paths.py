"""Every byte under a policy: each write path of Swift and S3 stores filtered bytes.

A container under ``SET ENCRYPTION`` receives bodies carrying a unique
marker through S3 multipart, DLO manifests with a body, SLO segments,
server-side copies (X-Copy-From, COPY, S3 copy_object), both versioning
modes, S3 bucket versioning and expiring objects. Each object reads back
byte-identical, and the marker never appears in plaintext in any file under
the object servers' devices.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import uuid
from pathlib import Path

import pytest
import requests
from boto3.s3.transfer import TransferConfig
from swiftclient.exceptions import ClientException

from iostack.stored_object import PIPELINE_HEADER

pytestmark = pytest.mark.integration
PIPELINE = PIPELINE_HEADER.lower()
MIB = 1 << 20


def marked_body(size: int) -> tuple[bytes, bytes]:
    """A random body with a unique marker every 64 KiB (and at both ends)."""
    marker = f"IOSTACK-PLAINTEXT-{uuid.uuid4().hex}".encode()
    body = bytearray(os.urandom(size))
    for at in list(range(0, size - len(marker), 64 << 10)) + [size - len(marker)]:
        body[at:at + len(marker)] = marker
    return bytes(body), marker


def assert_nowhere_in_plaintext(aio, *markers: bytes) -> None:
    devices = Path(aio["state_dir"]) / "srv" / "node"
    for path in devices.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for marker in markers:
                assert marker not in data, f"{marker!r} stored in plaintext in {path}"


def assert_encrypted(stored, account: str, container: str, obj: str, marker: bytes) -> None:
    headers, raw = stored(account, container, obj)
    assert "encryption" in headers.get(PIPELINE, ""), f"{container}/{obj} stored unfiltered"
    assert marker not in raw


@pytest.fixture
def secure(t1, policies) -> str:
    name = f"sec-{uuid.uuid4().hex[:8]}"
    t1.put_container(name)
    policies.add(f"FOR CONTAINER AUTH_t1/{name} DO SET ENCRYPTION")
    return name


@pytest.fixture
def s3(s3_for):
    return s3_for("t1")


def test_s3_multipart_parts_are_stored_under_the_buckets_policy(aio, s3, secure, t1, stored):
    body, marker = marked_body(6 * MIB + 123)
    s3.upload_fileobj(io.BytesIO(body), secure, "big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MIB,
                                            multipart_chunksize=5 * MIB))
    parts = [body[:5 * MIB], body[5 * MIB:]]
    expected_etag = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest()
    head = s3.head_object(Bucket=secure, Key="big.bin")
    assert head["ETag"].strip('"') == f"{expected_etag}-2"
    assert head["ContentLength"] == len(body)
    assert s3.get_object(Bucket=secure, Key="big.bin")["Body"].read() == body
    ranged = s3.get_object(Bucket=secure, Key="big.bin",
                           Range=f"bytes={5 * MIB - 10}-{5 * MIB + 9}")
    assert ranged["Body"].read() == body[5 * MIB - 10:5 * MIB + 10]
    assert t1.get_object(secure, "big.bin")[1] == body  # the same object through Swift
    segments = [o["name"] for o in t1.get_container(f"{secure}+segments")[1]]
    assert len([s for s in segments if s.count("/") == 2]) == 2
    for segment in segments:
        if segment.count("/") == 2:
            assert_encrypted(stored, "AUTH_t1", f"{secure}+segments", segment, marker)
    assert_nowhere_in_plaintext(aio, marker)


def test_a_dlo_manifest_carrying_a_body_is_filtered(aio, t1, secure, stored):
    body, marker = marked_body(100_000)
    segment, segment_marker = marked_body(50_000)
    t1.put_object(secure, "seg/001", segment)
    t1.put_object(secure, "dlo", body, headers={"X-Object-Manifest": f"{secure}/seg/"})
    assert t1.get_object(secure, "dlo")[1] == segment  # a DLO reads as its segments
    manifest = t1.get_object(secure, "dlo", query_string="multipart-manifest=get")[1]
    assert manifest == body
    assert_encrypted(stored, "AUTH_t1", secure, "dlo", marker)
    assert_nowhere_in_plaintext(aio, marker, segment_marker)


def test_slo_segments_are_filtered_in_their_container(aio, t1, secure):
    parts = [marked_body(MIB + 7) for _ in range(2)]
    for i, (part, _) in enumerate(parts):
        t1.put_object(secure, f"slo-seg/{i}", part)
    manifest = [{"path": f"{secure}/slo-seg/{i}", "etag": hashlib.md5(p).hexdigest(),
                 "size_bytes": len(p)} for i, (p, _) in enumerate(parts)]
    t1.put_object(secure, "slo", json.dumps(manifest), query_string="multipart-manifest=put")
    whole = b"".join(p for p, _ in parts)
    headers, got = t1.get_object(secure, "slo")
    assert got == whole
    assert t1.get_object(secure, "slo", headers={"Range": "bytes=1048570-1048600"})[1] == \
        whole[1048570:1048601]
    assert_nowhere_in_plaintext(aio, *(m for _, m in parts))


def test_server_side_copies_into_a_policy_container_are_filtered(aio, t1, s3, secure, stored):
    plain = f"plain-{uuid.uuid4().hex[:8]}"
    t1.put_container(plain)
    body, marker = marked_body(300_000)
    etag = t1.put_object(plain, "src", body)
    t1.put_object(secure, "via-x-copy-from", b"", headers={"X-Copy-From": f"{plain}/src"})
    t1.copy_object(plain, "src", destination=f"/{secure}/via-copy")
    s3.copy_object(Bucket=secure, Key="via-s3", CopySource={"Bucket": plain, "Key": "src"})
    for name in ("via-x-copy-from", "via-copy", "via-s3"):
        headers, got = t1.get_object(secure, name)
        assert got == body and headers["etag"] == etag, name
        assert_encrypted(stored, "AUTH_t1", secure, name, marker)
    # Out of the policy container: allowed (the tenant's data), read decoded.
    t1.copy_object(secure, "via-copy", destination=f"/{plain}/back")
    assert t1.get_object(plain, "back")[1] == body
    assert marker in stored("AUTH_t1", plain, "back")[1]


def test_legacy_versioning_archives_under_the_origins_policy(aio, t1, secure, stored):
    for mode in ("X-Versions-Location", "X-History-Location"):
        archive = f"arch-{uuid.uuid4().hex[:8]}"  # no policy of its own
        t1.put_container(archive)
        t1.post_container(secure, {mode: archive})
        old, old_marker = marked_body(70_000)
        new, new_marker = marked_body(70_000)
        t1.put_object(secure, f"doc-{mode}", old)
        t1.put_object(secure, f"doc-{mode}", new)
        archived = [o["name"] for o in t1.get_container(archive)[1]]
        assert len(archived) == 1, archived
        assert t1.get_object(archive, archived[0])[1] == old
        assert t1.get_object(secure, f"doc-{mode}")[1] == new
        assert_encrypted(stored, "AUTH_t1", archive, archived[0], old_marker)
        t1.post_container(secure, {mode: ""})
        assert_nowhere_in_plaintext(aio, old_marker, new_marker)


def test_object_versioning_keeps_every_version_filtered(aio, t1, secure):
    t1.post_container(secure, {"X-Versions-Enabled": "true"})
    versions = [marked_body(80_000) for _ in range(3)]
    for body, _ in versions:
        t1.put_object(secure, "v.bin", body)
    listing = t1.get_container(secure, query_string="versions")[1]
    ids = [o["version_id"] for o in listing if o["name"] == "v.bin"]
    assert len(ids) == 3
    got = {t1.get_object(secure, "v.bin", query_string=f"version-id={v}")[1] for v in ids}
    assert got == {b for b, _ in versions}
    assert_nowhere_in_plaintext(aio, *(m for _, m in versions))


def test_s3_bucket_versioning_keeps_old_versions_filtered(aio, s3, secure):
    s3.put_bucket_versioning(Bucket=secure, VersioningConfiguration={"Status": "Enabled"})
    old, old_marker = marked_body(60_000)
    new, new_marker = marked_body(60_000)
    first = s3.put_object(Bucket=secure, Key="k", Body=old)["VersionId"]
    s3.put_object(Bucket=secure, Key="k", Body=new)
    assert s3.get_object(Bucket=secure, Key="k")["Body"].read() == new
    assert s3.get_object(Bucket=secure, Key="k", VersionId=first)["Body"].read() == old
    assert_nowhere_in_plaintext(aio, old_marker, new_marker)


def test_expiring_objects_are_filtered_and_read_back(aio, t1, secure, stored):
    body, marker = marked_body(40_000)
    t1.put_object(secure, "temp", body, headers={"X-Delete-At": str(int(time.time()) + 3600)})
    assert t1.get_object(secure, "temp")[1] == body
    assert_encrypted(stored, "AUTH_t1", secure, "temp", marker)


def test_object_rule_holds_after_container_requests_on_the_same_worker(t1, container, policies,
                                                                        stored):
    policies.add(f"FOR OBJECT AUTH_t1/{container}/secret.txt DO SET ENCRYPTION")
    t1.put_object(container, "other.txt", b"x")
    # Listings and HEADs resolve the container path first (QoS, metrics...).
    for _ in range(3):
        t1.get_container(container)
        t1.head_container(container)
    body, marker = marked_body(10_000)
    t1.put_object(container, "secret.txt", body)
    assert_encrypted(stored, "AUTH_t1", container, "secret.txt", marker)
    assert PIPELINE not in stored("AUTH_t1", container, "other.txt")[0]
    assert t1.get_object(container, "secret.txt")[1] == body


def test_anonymous_requests_do_not_drain_a_tenants_ops_bucket(aio, swift_for, policies):
    t3 = swift_for("t3")
    name = f"ops-{uuid.uuid4().hex[:8]}"
    t3.put_container(name)
    t3.put_object(name, "o", b"data")
    policies.add(f"FOR CONTAINER AUTH_t3/{name} DO SET BANDWIDTH WITH ops=2, wait=0")
    time.sleep(0.3)
    url = f"{aio['swift_url'].rsplit('/v1', 1)[0]}/v1/AUTH_t3/{name}/o"
    refused = [requests.get(url, timeout=5).status_code for _ in range(10)]
    assert set(refused) == {401}
    # The tenant's own requests still have their tokens.
    assert t3.get_object(name, "o")[1] == b"data"
    # And the bucket does work: a burst of the tenant's own requests is limited.
    statuses = []
    for _ in range(6):
        try:
            t3.head_object(name, "o")
            statuses.append(200)
        except ClientException as exc:
            statuses.append(exc.http_status)
    assert 429 in statuses


def test_the_same_paths_under_compression(aio, t1, s3, policies, stored):
    """Under ``SET COMPRESSION`` each path stores compressed bytes that read back whole."""
    name = f"cmp-{uuid.uuid4().hex[:8]}"
    archive = f"{name}-arch"
    t1.put_container(name)
    t1.put_container(archive)
    policies.add(f"FOR CONTAINER AUTH_t1/{name} DO SET COMPRESSION")
    t1.post_container(name, {"X-Versions-Location": archive})
    text = b"".join(b"2026-11-25 GET /v1/AUTH_t1/c/o 200 %06d\n" % i for i in range(150_000))
    s3.upload_fileobj(io.BytesIO(text), name, "mp", Config=TransferConfig(
        multipart_threshold=5 * MIB, multipart_chunksize=5 * MIB))
    t1.put_object(name, "dlo", text[:200_000], headers={"X-Object-Manifest": f"{name}/none/"})
    t1.put_object(archive, "src", text[:300_000])
    t1.copy_object(archive, "src", destination=f"/{name}/copied")
    t1.put_object(name, "versioned", text[:100_000])
    t1.put_object(name, "versioned", text[:50_000])
    assert s3.get_object(Bucket=name, Key="mp")["Body"].read() == text
    assert t1.get_object(name, "dlo", query_string="multipart-manifest=get")[1] == text[:200_000]
    assert t1.get_object(name, "copied")[1] == text[:300_000]
    (old,) = [o["name"] for o in t1.get_container(archive)[1] if o["name"] != "src"]
    assert t1.get_object(archive, old)[1] == text[:100_000]
    segments = [o["name"] for o in t1.get_container(f"{name}+segments")[1]
                if o["name"].count("/") == 2]
    written = [(f"{name}+segments", s) for s in segments] + \
        [(name, "dlo"), (name, "copied"), (archive, old)]
    for container, obj in written:
        headers, raw = stored("AUTH_t1", container, obj)
        assert "compression" in headers.get(PIPELINE, ""), f"{container}/{obj} not compressed"
        assert len(raw) < int(headers["x-object-sysmeta-iostack-size"]) / 2, (container, obj)
