"""The all-in-one is a real, working Swift: tenants, objects, ranges, listings, isolation, S3."""

from __future__ import annotations

import hashlib
import os
import uuid

import boto3
import pytest
import requests
import swiftclient
from botocore.config import Config

pytestmark = pytest.mark.integration

SIZES = {"empty": 0, "1KiB": 1024, "10MiB": 10 * 1024 * 1024}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("tenant", ["t1", "t2", "t3"])
def test_each_tenant_authenticates_to_its_own_account(aio, swift_for, tenant):
    conn = swift_for(tenant)
    url, token = conn.get_auth()
    assert url.endswith("/v1/" + aio["tenants"][tenant]["account"])
    assert token
    headers = conn.head_account()
    assert "x-account-container-count" in headers


def test_wrong_key_is_rejected(aio):
    response = requests.get(
        aio["auth_url"],
        headers={"X-Auth-User": "t1:user", "X-Auth-Key": "not-the-key"},
        timeout=10,
    )
    assert response.status_code == 401


@pytest.mark.parametrize("size_name", sorted(SIZES))
def test_put_get_head_delete(swift_for, size_name):
    conn = swift_for("t1")
    container = unique("objects")
    conn.put_container(container)
    body = os.urandom(SIZES[size_name])
    etag = conn.put_object(container, "blob", body)
    assert etag == hashlib.md5(body).hexdigest()  # Swift's ETag is MD5

    headers = conn.head_object(container, "blob")
    assert int(headers["content-length"]) == len(body)
    assert headers["etag"] == etag

    headers, got = conn.get_object(container, "blob")
    assert got == body

    conn.delete_object(container, "blob")
    with pytest.raises(swiftclient.ClientException) as err:
        conn.head_object(container, "blob")
    assert err.value.http_status == 404
    conn.delete_container(container)


def test_range_get(swift_for):
    conn = swift_for("t2")
    container = unique("ranges")
    conn.put_container(container)
    body = bytes(range(256)) * 64
    conn.put_object(container, "r", body)
    cases = {"bytes=0-0": body[:1], "bytes=10-99": body[10:100], "bytes=-5": body[-5:],
             f"bytes={len(body) - 1}-": body[-1:]}
    for header, expected in cases.items():
        headers, got = conn.get_object(container, "r", headers={"Range": header})
        assert got == expected, header
        assert headers["content-length"] == str(len(expected))
    with pytest.raises(swiftclient.ClientException) as err:
        conn.get_object(container, "r", headers={"Range": f"bytes={len(body)}-"})
    assert err.value.http_status == 416


def test_listing_shows_names_sizes_and_etags(swift_for):
    conn = swift_for("t1")
    container = unique("listing")
    conn.put_container(container)
    bodies = {f"obj-{i}": os.urandom(100 * i) for i in range(3)}
    for name, body in bodies.items():
        conn.put_object(container, name, body)
    _, listing = conn.get_container(container)
    assert {entry["name"]: entry["bytes"] for entry in listing} == {
        name: len(body) for name, body in bodies.items()
    }
    assert {entry["hash"] for entry in listing} == {
        hashlib.md5(body).hexdigest() for body in bodies.values()
    }
    _, containers = conn.get_account()
    assert container in {c["name"] for c in containers}


def test_tenant_cannot_read_another_tenants_container(aio, swift_for):
    owner = swift_for("t1")
    container = unique("private")
    owner.put_container(container)
    owner.put_object(container, "secret", b"t1 only")

    intruder = swift_for("t2")
    _, token = intruder.get_auth()
    victim_url = aio["tenants"]["t1"]["storage_url"]
    for method in ("GET", "PUT", "DELETE"):
        response = requests.request(
            method, f"{victim_url}/{container}/secret",
            headers={"X-Auth-Token": token}, data=b"x" if method == "PUT" else None, timeout=10,
        )
        assert response.status_code == 403, method
    listing = requests.get(f"{victim_url}/{container}", headers={"X-Auth-Token": token},
                           timeout=10)
    assert listing.status_code == 403
    assert owner.get_object(container, "secret")[1] == b"t1 only"


def test_s3_api_through_s3api(aio):
    creds = aio["tenants"]["t3"]
    s3 = boto3.client(
        "s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
        aws_access_key_id=creds["user"], aws_secret_access_key=creds["key"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    bucket = unique("bucket")
    s3.create_bucket(Bucket=bucket)
    body = os.urandom(300_000)
    s3.put_object(Bucket=bucket, Key="k", Body=body)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == body
    ranged = s3.get_object(Bucket=bucket, Key="k", Range="bytes=100-199")["Body"].read()
    assert ranged == body[100:200]
    assert s3.head_object(Bucket=bucket, Key="k")["ContentLength"] == len(body)
    assert [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]] == ["k"]

    # The bucket is the tenant's Swift container.
    conn = swiftclient.Connection(authurl=aio["auth_url"], user=creds["user"], key=creds["key"])
    assert conn.get_object(bucket, "k")[1] == body

    wrong = boto3.client(
        "s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
        aws_access_key_id=creds["user"], aws_secret_access_key="wrong",
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )
    with pytest.raises(wrong.exceptions.ClientError) as err:
        wrong.get_object(Bucket=bucket, Key="k")
    assert err.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
