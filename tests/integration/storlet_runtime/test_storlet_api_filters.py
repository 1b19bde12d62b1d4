"""Storlets written to the plain OpenStack Storlets API run as IOStack filters, unchanged.

``rot13_storlet.py`` is written as the upstream samples are (no IOStack
protocol); uploaded with ``iostack filter upload`` and named in a policy, it
encodes on PUT and decodes on GET in t1's real sandbox.
"""

from __future__ import annotations

import codecs
import io
import uuid

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

from iostack.controller.client import ControllerError

pytestmark = pytest.mark.integration

MIB = 1 << 20
BODY = b"".join(b"%06d Plain Text written by a Tenant\n" % i for i in range(40000))


def rot13(data: bytes) -> bytes:
    return codecs.encode(data.decode("ascii"), "rot13").encode("ascii")


@pytest.fixture(scope="module")
def rot13_filter(upload_t1_filter):
    return upload_t1_filter("rot13_storlet.Rot13Storlet", "trot")


@pytest.fixture
def rot13_container(swift_for, policies, rot13_filter):
    conn = swift_for("t1")
    container = f"rot-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {rot13_filter}")
    return conn, container


def test_a_storlets_api_storlet_encodes_on_put_and_decodes_on_get(rot13_container, stored):
    conn, container = rot13_container
    conn.put_object(container, "log", BODY)
    _, raw = stored("AUTH_t1", container, "log")
    assert raw == rot13(BODY) != BODY  # the bytes on disk are rot13'd
    assert conn.get_object(container, "log")[1] == BODY
    _, part = conn.get_object(container, "log", headers={"Range": "bytes=1000-1099"})
    assert part == BODY[1000:1100]
    _, tail = conn.get_object(container, "log", headers={"Range": "bytes=-10"})
    assert tail == BODY[-10:]
    assert int(conn.head_object(container, "log")["content-length"]) == len(BODY)
    conn.put_object(container, "empty", b"")
    assert conn.get_object(container, "empty")[1] == b""


def test_a_storlet_that_transforms_differently_each_way_gets_the_direction(
        upload_t1_filter, swift_for, policies, stored):
    shift = upload_t1_filter("shift_storlet.ShiftStorlet", "tshift", "--param", "by:int:0..255")
    conn = swift_for("t1")
    container = f"shift-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {shift} WITH by=3")
    conn.put_object(container, "o", BODY)
    _, raw = stored("AUTH_t1", container, "o")
    assert raw == bytes((b + 3) % 256 for b in BODY)  # params["by"], as Storlets passes it
    assert conn.get_object(container, "o")[1] == BODY
    assert conn.get_object(container, "o", headers={"Range": "bytes=7-9"})[1] == BODY[7:10]
    # The declared range holds at compile time.
    with pytest.raises(ControllerError) as err:
        policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {shift} WITH by=300")
    assert "must be in [0, 255]" in str(err.value.diagnostics)


def test_the_same_through_s3_multipart(aio, rot13_container, stored):
    conn, container = rot13_container
    creds = aio["tenants"]["t1"]
    s3 = boto3.client(
        "s3", endpoint_url=aio["s3_url"], region_name=aio["s3_region"],
        aws_access_key_id=creds["user"], aws_secret_access_key=creds["key"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    body = (BODY * 5)[:6 * MIB + 123]
    s3.upload_fileobj(io.BytesIO(body), container, "big.bin",
                      Config=TransferConfig(multipart_threshold=5 * MIB,
                                            multipart_chunksize=5 * MIB))
    got = s3.get_object(Bucket=container, Key="big.bin")["Body"].read()
    assert got == body
    ranged = s3.get_object(Bucket=container, Key="big.bin", Range="bytes=5242800-5242999")
    assert ranged["Body"].read() == body[5242800:5243000]
    # The parts are stored rot13'd, under the bucket's policy.
    parts = sorted(o["name"] for o in conn.get_container(container + "+segments")[1]
                   if o["name"].count("/") == 2)
    _, raw = stored("AUTH_t1", container + "+segments", parts[0])
    assert raw == rot13(body[:5 * MIB])


def test_a_tenants_filter_named_for_another_tenant_is_a_dsl_error_and_nothing_is_stored(
        policies, rot13_filter):
    before = policies.client.policies()
    text = f"FOR CONTAINER t3/x DO SET {rot13_filter}"
    with pytest.raises(ControllerError) as err:
        policies.add(text)
    assert err.value.status == 400
    (diagnostic,) = err.value.diagnostics
    assert (diagnostic["line"], diagnostic["column"]) == (1, text.index(rot13_filter) + 1)
    assert "AUTH_t1's own filter" in diagnostic["message"]
    assert policies.client.policies() == before


def test_a_filter_written_against_the_sdk_from_its_template_runs_on_the_data_path(
        iostack, tmp_path, swift_for, policies, stored):
    """``filter new`` writes an SDK filter; its declared parameter reaches the DSL unasked."""
    name = f"tsdk{uuid.uuid4().hex[:6]}"
    assert iostack("filter", "new", name, "--dir", str(tmp_path)).returncode == 0
    done = iostack("filter", "upload", str(tmp_path / f"{name}.py"), "--name", name,
                   "--tenant", "t1")
    assert done.returncode == 0, done.stderr
    conn = swift_for("t1")
    container = f"sdk-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    with pytest.raises(ControllerError) as err:  # the class's declaration: key:int:0..255
        policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {name} WITH key=300")
    assert "must be in [0, 255]" in str(err.value.diagnostics)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {name} WITH key=7")
    conn.put_object(container, "o", BODY)
    _, raw = stored("AUTH_t1", container, "o")
    assert raw == bytes(b ^ 7 for b in BODY)
    assert conn.get_object(container, "o")[1] == BODY
    assert conn.get_object(container, "o", headers={"Range": "bytes=70-99"})[1] == BODY[70:100]
