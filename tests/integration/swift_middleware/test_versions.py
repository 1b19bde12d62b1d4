"""Old versions read, copy and restore exactly like current objects, under every pipeline.

Swift's object versioning keeps each version under a reserved name in a
hidden container (``\\x00versions\\x00<container>``); a read of an old
version, and every read through a versioned object's symlink, reaches it
there. IOStack's decoding re-reads stored byte ranges with sub-requests,
which must address that reserved name as the request did (issue 42: a Range
GET or an ``UploadPartCopy`` range of a version answered 500). Each test runs
under compression, encryption and both stacked, on incompressible bodies
(stored unchanged under compression) and compressible ones, through S3
versioning (boto3) and Swift's ``X-Versions-Enabled`` (swiftclient).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from urllib.parse import quote

import pytest
from botocore.exceptions import ClientError
from swiftclient.exceptions import ClientException

pytestmark = pytest.mark.integration
MIB = 1 << 20
PART = 5 * MIB  # S3's smallest part but the last
PIPELINES = {"compression": "SET COMPRESSION", "encryption": "SET ENCRYPTION",
             "stacked": "SET COMPRESSION, SET ENCRYPTION"}


def body_of(kind: str, size: int) -> bytes:
    if kind == "random":
        return os.urandom(size)
    line = f"{uuid.uuid4().hex},GET /p/%d 200\n".encode()
    return b"".join(line % i for i in range(size // len(line) + 1))[:size]


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - the ETag S3 and Swift define


def multipart_etag(parts: list[bytes]) -> str:
    joined = b"".join(bytes.fromhex(md5(p)) for p in parts)
    return f'"{md5(joined)}-{len(parts)}"'


@pytest.fixture(params=sorted(PIPELINES))
def filtered(request, t1, policies) -> str:
    name = f"ver-{request.param}-{uuid.uuid4().hex[:8]}"
    t1.put_container(name)
    policies.add(f"FOR CONTAINER AUTH_t1/{name} DO {PIPELINES[request.param]}")
    return name


@pytest.fixture
def s3(s3_for):
    return s3_for("t1")


def read(s3, bucket: str, key: str, **kwargs) -> bytes:
    return s3.get_object(Bucket=bucket, Key=key, **kwargs)["Body"].read()


def copy_by_parts(s3, bucket: str, key: str, source: dict[str, str], size: int,
                  ranged: bool = True) -> dict:
    """``UploadPartCopy`` of ``source`` into ``key``: by ranges of ``PART`` bytes, or whole."""
    upload = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    spans = [(start, min(start + PART, size) - 1) for start in range(0, size, PART)]
    parts = []
    for number, (start, end) in enumerate(spans if ranged else [(0, size - 1)], 1):
        extra = {"CopySourceRange": f"bytes={start}-{end}"} if ranged else {}
        result = s3.upload_part_copy(Bucket=bucket, Key=key, UploadId=upload,
                                     PartNumber=number, CopySource=source, **extra)
        parts.append({"PartNumber": number, "ETag": result["CopyPartResult"]["ETag"]})
    return s3.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                        MultipartUpload={"Parts": parts})


def version_ids(s3, bucket: str, key: str) -> list[str]:
    """Versions of ``key``, newest first."""
    listing = s3.list_object_versions(Bucket=bucket, Prefix=key)
    return [v["VersionId"] for v in listing.get("Versions", []) if v["Key"] == key]


@pytest.mark.parametrize("kind", ["random", "text"])
def test_s3_versions_read_copy_and_restore(s3, filtered, kind):
    bucket = filtered
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    key = "dir/ü %25 v?.bin"
    old, new = body_of(kind, 2 * PART + 12_345), body_of(kind, 70_000)
    first = s3.put_object(Bucket=bucket, Key=key, Body=old)["VersionId"]
    second = s3.put_object(Bucket=bucket, Key=key, Body=new)["VersionId"]
    s3.delete_object(Bucket=bucket, Key=key)  # a delete marker on top
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket=bucket, Key=key)
    assert gone.value.response["Error"]["Code"] == "NoSuchKey"

    for version, body in ((first, old), (second, new)):
        got = s3.get_object(Bucket=bucket, Key=key, VersionId=version)
        assert got["Body"].read() == body
        assert got["ETag"] == f'"{md5(body)}"'
        assert got["ContentLength"] == len(body)
        head = s3.head_object(Bucket=bucket, Key=key, VersionId=version)
        assert (head["ContentLength"], head["ETag"]) == (len(body), f'"{md5(body)}"')
        for start, end in ((0, 99), (len(body) // 3, len(body) - 2), (len(body) - 7, None)):
            span = f"bytes={start}-{'' if end is None else end}"
            part = s3.get_object(Bucket=bucket, Key=key, VersionId=version, Range=span)
            assert part["Body"].read() == body[start:None if end is None else end + 1], span
        assert read(s3, bucket, key, VersionId=version, IfMatch=f'"{md5(body)}"') == body
        with pytest.raises(ClientError) as unchanged:
            s3.get_object(Bucket=bucket, Key=key, VersionId=version,
                          IfNoneMatch=f'"{md5(body)}"', Range="bytes=10-20")
        assert unchanged.value.response["Error"]["Code"] == "304"

    source = {"Bucket": bucket, "Key": key, "VersionId": first}
    copied = s3.copy_object(Bucket=bucket, Key="copy", CopySource=source)
    assert copied["CopyObjectResult"]["ETag"] == f'"{md5(old)}"'
    assert read(s3, bucket, "copy") == old

    spans = [old[at:at + PART] for at in range(0, len(old), PART)]
    done = copy_by_parts(s3, bucket, "ranged", source, len(old))
    assert done["ETag"] == multipart_etag(spans)
    assert read(s3, bucket, "ranged") == old
    done = copy_by_parts(s3, bucket, "whole", source, len(old), ranged=False)
    assert done["ETag"] == multipart_etag([old])
    assert read(s3, bucket, "whole") == old

    # Restore the first version by copying it over the delete marker.
    s3.copy_object(Bucket=bucket, Key=key, CopySource=source)
    assert read(s3, bucket, key) == old
    assert read(s3, bucket, key, Range="bytes=5-5000000") == old[5:5_000_001]
    assert len(version_ids(s3, bucket, key)) == 3


@pytest.mark.parametrize("kind", ["random", "text"])
def test_s3_multipart_copy_of_a_multipart_version(s3, filtered, kind):
    bucket = filtered
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    parts = [body_of(kind, PART), body_of(kind, PART), body_of(kind, 54_321)]
    whole = b"".join(parts)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=n,
                            Body=p)["ETag"] for n, p in enumerate(parts, 1)]
    s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(etags, 1)]})
    version = version_ids(s3, bucket, "mp")[0]
    s3.put_object(Bucket=bucket, Key="mp", Body=b"newer")  # the multipart one is noncurrent now
    got = s3.get_object(Bucket=bucket, Key="mp", VersionId=version)
    assert got["Body"].read() == whole
    assert got["ETag"] == multipart_etag(parts)
    span = read(s3, bucket, "mp", VersionId=version, Range=f"bytes={PART - 10}-{PART + 10}")
    assert span == whole[PART - 10:PART + 11]

    # Ranges that cross the source's part boundaries.
    source = {"Bucket": bucket, "Key": "mp", "VersionId": version}
    upload = s3.create_multipart_upload(Bucket=bucket, Key="copy")["UploadId"]
    cuts = [(0, PART + 99), (PART + 100, len(whole) - 1)]
    copied = []
    for n, (start, end) in enumerate(cuts, 1):
        copied.append(s3.upload_part_copy(
            Bucket=bucket, Key="copy", UploadId=upload, PartNumber=n, CopySource=source,
            CopySourceRange=f"bytes={start}-{end}")["CopyPartResult"]["ETag"])
    s3.complete_multipart_upload(
        Bucket=bucket, Key="copy", UploadId=upload,
        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e}
                                   for n, e in enumerate(copied, 1)]})
    assert read(s3, bucket, "copy") == whole
    s3.put_object(Bucket=bucket, Key="copy", Body=b"over")
    noncurrent = version_ids(s3, bucket, "copy")[1]
    assert read(s3, bucket, "copy", VersionId=noncurrent) == whole
    assert read(s3, bucket, "copy", VersionId=noncurrent,
                Range="bytes=-1000") == whole[-1000:]


@pytest.mark.parametrize("kind", ["random", "text"])
def test_swift_object_versioning_reads_and_copies_each_version(t1, filtered, kind):
    container = filtered
    t1.post_container(container, {"X-Versions-Enabled": "true"})
    name = "a/ü%25?b"
    bodies = [body_of(kind, 3 * MIB + 17), body_of(kind, 1 * MIB + 3), body_of(kind, 0)]
    for body in bodies:
        t1.put_object(container, name, body)
    listing = t1.get_container(container, query_string="versions")[1]
    ids = [o["version_id"] for o in listing if o["name"] == name]  # newest first
    assert len(ids) == 3
    for version, body in zip(ids, reversed(bodies), strict=True):
        query = f"version-id={version}"
        headers, got = t1.get_object(container, name, query_string=query)
        assert got == body
        assert headers["etag"] == md5(body)
        if body:
            start, end = len(body) // 4, len(body) - 3
            _, part = t1.get_object(container, name, query_string=query,
                                    headers={"Range": f"bytes={start}-{end}"})
            assert part == body[start:end + 1]
            with pytest.raises(ClientException) as unchanged:
                t1.get_object(container, name, query_string=query,
                              headers={"If-None-Match": md5(body), "Range": "bytes=0-3"})
            assert unchanged.value.http_status == 304
        head = t1.head_object(container, name, query_string=query)
        assert (int(head["content-length"]), head["etag"]) == (len(body), md5(body))

    # Restore the oldest by copying it over the current one (the copy middleware
    # reads the source version named in the PUT's own query).
    t1.put_object(container, name, None, query_string=f"version-id={ids[-1]}",
                  headers={"X-Copy-From": quote(f"{container}/{name}"), "Content-Length": "0"})
    assert t1.get_object(container, name)[1] == bodies[0]
    _, tail = t1.get_object(container, name, headers={"Range": "bytes=-4096"})
    assert tail == bodies[0][-4096:]
