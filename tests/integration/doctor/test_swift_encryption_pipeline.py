"""IOStack above Swift's own at-rest encryption, the order docs/deploy.md prescribes.

A second proxy on the all-in-one's rings runs the stack's proxy config with
``keymaster encryption`` added right before ``proxy-logging proxy-server``
(below ``iostack`` and ``iostack_cache``). Through it a tenant's objects are
compressed by IOStack and then encrypted by Swift: they read back exactly as
written (whole, ranges, HEAD, server-side copy), the container listing shows
the tenant's size and ETag, and the object servers hold ciphertext of the
compressed form with both IOStack's record and Swift's crypto metadata.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from configparser import ConfigParser
from pathlib import Path

import pytest
import swiftclient
from swift_confs import pipeline, read_conf, set_pipeline, write_conf

from iostack.doctor import pipelines
from iostack.ports import free_port, port_open, wait_until

pytestmark = pytest.mark.integration

PIPELINE = "x-object-sysmeta-iostack-pipeline"
SWIFT_CRYPTO = "x-object-sysmeta-crypto-body-meta"


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()  # noqa: S324 - Swift's ETag


def with_swift_encryption(conf: ConfigParser, port: int) -> None:
    conf["DEFAULT"]["bind_port"] = str(port)
    conf["DEFAULT"]["log_name"] = "proxy-encrypted"
    conf["filter:keymaster"] = {"use": "egg:swift#keymaster",
                                "encryption_root_secret": base64.b64encode(os.urandom(32)).decode()}
    conf["filter:encryption"] = {"use": "egg:swift#encryption"}
    names = pipeline(conf)
    names[-2:-2] = ["keymaster", "encryption"]  # right before proxy-logging proxy-server
    set_pipeline(conf, names)


@pytest.fixture(scope="module")
def encrypted_proxy(aio, tmp_path_factory) -> Iterator[str]:
    """A proxy with Swift's encryption below IOStack; its URL."""
    port = free_port()
    conf = read_conf(Path(aio["swift_dir"]) / "proxy-server.conf")
    with_swift_encryption(conf, port)
    path = tmp_path_factory.mktemp("encrypted-proxy") / "proxy-server.conf"
    write_conf(conf, path)
    log = open(path.with_suffix(".log"), "wb")  # noqa: SIM115 - closed after the process
    proc = subprocess.Popen(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.aio.swift_launcher", aio["swift_dir"], str(path),
         "proxy-server"], stdout=log, stderr=subprocess.STDOUT)
    try:
        assert wait_until(lambda: port_open("127.0.0.1", port) or proc.poll() is not None, 60)
        assert proc.poll() is None, path.with_suffix(".log").read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


@pytest.fixture
def tenant(aio, encrypted_proxy) -> swiftclient.Connection:
    creds = aio["tenants"]["t1"]
    return swiftclient.Connection(authurl=f"{encrypted_proxy}/auth/v1.0", user=creds["user"],
                                  key=creds["key"], retries=0)


def test_the_doctor_accepts_the_order(aio, tmp_path):
    conf = read_conf(Path(aio["swift_dir"]) / "proxy-server.conf")
    with_swift_encryption(conf, free_port())
    write_conf(conf, tmp_path / "proxy-server.conf")
    loaded = pipelines.load(str(tmp_path / "proxy-server.conf"), "proxy")
    assert [f for f in pipelines.check(loaded) if f.level == "error"] == []


def test_compressed_by_iostack_then_encrypted_by_swift(tenant, policies, stored):
    container = f"enc-{uuid.uuid4().hex[:10]}"
    tenant.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION WITH algorithm=zstd")
    body = b"".join(b"%08d GET /v1/AUTH_t1/logs 200\n" % i for i in range(40000))
    assert tenant.put_object(container, "o", body) == md5(body)

    headers, got = tenant.get_object(container, "o")
    assert got == body and headers["etag"] == md5(body)
    assert int(tenant.head_object(container, "o")["content-length"]) == len(body)
    _, part = tenant.get_object(container, "o", headers={"Range": "bytes=100000-100099"})
    assert part == body[100000:100100]
    tenant.put_object(container, "copy", b"", headers={"X-Copy-From": f"/{container}/o"})
    assert tenant.get_object(container, "copy")[1] == body
    listing = {o["name"]: o for o in tenant.get_container(container)[1]}
    assert (listing["o"]["bytes"], listing["o"]["hash"]) == (len(body), md5(body))

    raw_headers, raw = stored("AUTH_t1", container, "o")
    assert [f["name"] for f in json.loads(raw_headers[PIPELINE])] == ["compression"]
    assert SWIFT_CRYPTO in raw_headers  # Swift encrypted what IOStack stored
    assert len(raw) < len(body) / 5  # compressed before it was encrypted
    assert body[:32] not in raw


def test_objects_without_a_policy_are_encrypted_by_swift_alone(tenant, stored):
    container = f"enc-{uuid.uuid4().hex[:10]}"
    tenant.put_container(container)
    body = os.urandom(1000) + b"plaintext marker" * 100
    tenant.put_object(container, "plain", body)
    assert tenant.get_object(container, "plain")[1] == body
    raw_headers, raw = stored("AUTH_t1", container, "plain")
    assert PIPELINE not in raw_headers and SWIFT_CRYPTO in raw_headers
    assert b"plaintext marker" not in raw
