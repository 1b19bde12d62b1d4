"""Swift, S3, the controller and the console with identities from a real Keystone.

One stack with ``--auth keystone`` (``conftest.keystone_stack``): Keystone 30
on SQLite behind uwsgi, the proxy pipeline ``authtoken s3api s3token
keystoneauth``, the controller validating tokens as the ``iostack`` service
user. Tenants are Keystone projects; their accounts are ``AUTH_<project id>``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import boto3
import pytest
import requests
from botocore.config import Config
from botocore.exceptions import ClientError
from keystone_helpers import TOKEN_CACHE_SECONDS, keystone_session, swift_v3
from keystoneclient.v3 import client as keystone_client
from playwright.sync_api import expect
from swift.common import utils
from swift.common.ring import Ring
from swift_confs import pipeline, read_conf, set_pipeline, write_conf

from iostack.controller.client import ControllerClient, ControllerError
from iostack.doctor.cli import diagnose
from iostack.doctor.pipelines import find_configs
from iostack.storlet_runtime.host.packaging import PIN_PREFIX
from tests.conftest import read_stored

pytestmark = pytest.mark.integration
PIPELINE = "x-object-sysmeta-iostack-pipeline"
STORLET_TESTS = Path(__file__).resolve().parents[1] / "storlet_runtime"


def logs(size: int) -> bytes:
    line = b"2026-11-26T18:00:00 GET /v1/AUTH_x/c/o 200 1234 0.004 tx1234abcd\n"
    return (line * (size // len(line) + 1))[:size]


def s3_client(stack: dict, tenant: str, secret: str | None = None):
    creds = stack["tenants"][tenant]
    return boto3.client(
        "s3", endpoint_url=stack["s3_url"], region_name=stack["s3_region"],
        aws_access_key_id=creds["s3_access_key"],
        aws_secret_access_key=secret or creds["s3_secret_key"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


def test_swiftclient_v3_password_auth_reaches_the_projects_account(keystone_stack):
    t1 = keystone_stack["tenants"]["t1"]
    conn = swift_v3(t1)
    url, _token = conn.get_auth()
    assert t1["account"] == f"AUTH_{t1['os_project_id']}"
    assert url == t1["storage_url"], "the catalog's object-store endpoint"
    conn.put_container("v3")
    conn.put_object("v3", "o", b"hello keystone")
    assert conn.get_object("v3", "o")[1] == b"hello keystone"
    assert conn.head_account()["x-account-container-count"] != "0"


def test_a_project_token_is_refused_on_another_projects_account(keystone_stack):
    t1, t2 = keystone_stack["tenants"]["t1"], keystone_stack["tenants"]["t2"]
    token = swift_v3(t1).get_auth()[1]

    def status(method: str, url: str, token: str | None) -> int:
        headers = {"X-Auth-Token": token} if token else {}
        return requests.request(method, url, headers=headers, timeout=30).status_code

    assert status("HEAD", t1["storage_url"], token) == 204
    assert status("HEAD", t2["storage_url"], token) == 403
    assert status("PUT", f"{t2['storage_url']}/stolen", token) == 403
    assert status("HEAD", t2["storage_url"], None) == 401
    assert status("HEAD", t2["storage_url"], "gAAAAAbogus") == 401


def test_s3_with_the_ec2_pair_through_s3token(keystone_stack):
    s3 = s3_client(keystone_stack, "t2")
    bucket = f"ec2-{uuid.uuid4().hex[:8]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"via s3token")
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"via s3token"
    # The bucket is a container of the project's account, seen from Swift too.
    assert swift_v3(keystone_stack["tenants"]["t2"]).get_object(bucket, "k")[1] == b"via s3token"
    with pytest.raises(ClientError) as refused:
        s3_client(keystone_stack, "t2", secret="not-the-secret").list_objects_v2(Bucket=bucket)
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    with pytest.raises(ClientError) as other:  # buckets are the project's containers
        s3_client(keystone_stack, "t1").list_objects_v2(Bucket=bucket)
    assert other.value.response["Error"]["Code"] == "NoSuchBucket"


def test_controller_a_tenant_token_reads_its_own_policies_only(keystone_stack, ks_admin):
    t1, t2 = keystone_stack["tenants"]["t1"], keystone_stack["tenants"]["t2"]
    ks_admin.add_policies("FOR CONTAINER t1/logs DO SET COMPRESSION")
    tenant = ControllerClient(keystone_stack["controller_url"],
                              keystone_session(t1).get_token())
    own = tenant.tenant_policies(t1["account"])["policies"]
    assert [t["name"] for p in own for t in p["targets"]] == [f"{t1['account']}/logs"]
    for refused in (lambda: tenant.tenant_policies(t2["account"]), tenant.policies,
                    lambda: tenant.add_policies("FOR TENANT t1 DO SET NOOP")):
        with pytest.raises(ControllerError) as exc:
            refused()
        assert exc.value.status == 403


def test_controller_admin_is_the_admin_role_in_the_admin_project_only(keystone_stack):
    url = keystone_stack["controller_url"]
    admin = keystone_session(keystone_stack["admin"])
    assert isinstance(ControllerClient(url, admin.get_token()).policies(), list)
    # A user who is admin of project t2 is t2's tenant here, nothing more.
    t2 = keystone_stack["tenants"]["t2"]
    ks = keystone_client.Client(session=admin, interface="public")
    name = f"t2-boss-{uuid.uuid4().hex[:6]}"
    user = ks.users.create(name=name, password="boss-password-1234", domain="default")
    try:
        ks.roles.grant(ks.roles.find(name="admin"), user=user,
                       project=t2["os_project_id"])
        boss = keystone_session({**t2, "os_username": name,
                                 "os_password": "boss-password-1234"})
        client = ControllerClient(url, boss.get_token())
        assert client.tenant_policies(t2["account"])["account"] == t2["account"]
        with pytest.raises(ControllerError) as exc:
            client.policies()
        assert exc.value.status == 403
    finally:
        ks.users.delete(user)


def test_a_revoked_token_is_refused_within_the_cache_window(keystone_stack):
    t3 = keystone_stack["tenants"]["t3"]
    token = keystone_session(t3).get_token()
    tenant = ControllerClient(keystone_stack["controller_url"], token)

    def swift_status() -> int:
        return requests.head(t3["storage_url"], headers={"X-Auth-Token": token},
                             timeout=30).status_code

    def controller_status() -> int:
        try:
            tenant.tenant_policies(t3["account"])
            return 200
        except ControllerError as exc:
            return exc.status

    assert swift_status() in (200, 204) and controller_status() == 200  # now cached by both
    admin = keystone_client.Client(session=keystone_session(keystone_stack["admin"]),
                                   interface="public")
    admin.tokens.revoke_token(token)
    revoked = time.monotonic()
    window = TOKEN_CACHE_SECONDS + 10  # the cache, plus a loaded machine's slack
    refused = {}
    while len(refused) < 2 and time.monotonic() - revoked < window:
        for name, status in (("swift", swift_status), ("controller", controller_status)):
            if name not in refused and status() == 401:
                refused[name] = time.monotonic() - revoked
        time.sleep(0.5)
    assert set(refused) == {"swift", "controller"}, f"still accepted after {window}s"


def test_the_console_logs_in_with_a_keystone_token(keystone_stack, browser):
    """In Chromium: a Keystone project token opens the tenant's own console, the admin
    project's admin token the administrator's; a token Keystone does not know, nothing."""
    t1 = keystone_stack["tenants"]["t1"]
    tokens = {"tenant": keystone_session(t1).get_token(),
              "admin": keystone_session(keystone_stack["admin"]).get_token()}
    for who, token in tokens.items():
        context = browser.new_context(base_url=keystone_stack["controller_url"])
        context.set_default_timeout(15000)
        try:
            tab = context.new_page()
            tab.goto("/ui/login")
            tab.get_by_label("Token", exact=True).fill("gAAAAAnot-a-token")
            tab.get_by_role("button", name="Log in").click()
            expect(tab.locator("#login-error")).to_be_visible()
            tab.get_by_label("Token", exact=True).fill(token)
            tab.get_by_role("button", name="Log in").click()
            tab.wait_for_url("**/ui/policies")
            history = tab.get_by_role("link", name="History")
            if who == "tenant":
                expect(tab.locator("#who")).to_contain_text(t1["account"])
                expect(history).to_have_count(0)
                assert tab.goto("/ui/history").status == 403
            else:
                expect(history).to_be_visible()
                assert tab.goto("/ui/history").status == 200
        finally:
            context.close()



@pytest.fixture
def keystone_hashing(keystone_stack):
    """Swift hashes object paths with the Keystone stack's swift.conf while a test reads
    its devices; the session's stack's settings come back after (later tests read theirs)."""
    saved = utils.SWIFT_CONF_FILE, utils.HASH_PATH_PREFIX, utils.HASH_PATH_SUFFIX
    utils.set_swift_dir(keystone_stack["swift_dir"])
    yield
    utils.SWIFT_CONF_FILE, utils.HASH_PATH_PREFIX, utils.HASH_PATH_SUFFIX = saved


def test_policies_hold_for_keystone_tenants(keystone_stack, ks_admin, keystone_hashing):
    """Named by project name (t1) or id: compression + encryption round trip through Swift
    and an S3 multipart upload, stored encoded."""
    t1 = keystone_stack["tenants"]["t1"]
    conn = swift_v3(t1)
    conn.put_container("enc")
    bucket = f"mp-{uuid.uuid4().hex[:8]}"
    s3 = s3_client(keystone_stack, "t1")
    s3.create_bucket(Bucket=bucket)
    added = ks_admin.add_policies(
        f"FOR CONTAINER t1/enc DO SET COMPRESSION WITH algorithm=zstd, SET ENCRYPTION; "
        f"FOR CONTAINER {t1['os_project_id']}/{bucket} DO SET COMPRESSION WITH "
        f"algorithm=zstd, SET ENCRYPTION")["policies"]
    assert {t["name"] for p in added for t in p["targets"]} == {
        f"{t1['account']}/enc", f"{t1['account']}/{bucket}"}
    time.sleep(0.5)  # the proxies' invalidation
    ring = Ring(keystone_stack["swift_dir"], ring_name="object")

    body = logs(300_000)
    conn.put_object("enc", "o", body)
    assert conn.get_object("enc", "o")[1] == body
    headers, raw = read_stored(ring, t1["account"], "enc", "o")
    assert [f["name"] for f in json.loads(headers[PIPELINE])] == ["compression", "encryption"]
    assert body[:64] not in raw and len(raw) < len(body)

    part = logs(5 << 20)
    upload = s3.create_multipart_upload(Bucket=bucket, Key="mp")["UploadId"]
    etags = [s3.upload_part(Bucket=bucket, Key="mp", UploadId=upload, PartNumber=n,
                            Body=part)["ETag"] for n in (1, 2)]
    s3.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload,
        MultipartUpload={"Parts": [{"ETag": e, "PartNumber": n}
                                   for n, e in zip((1, 2), etags, strict=True)]})
    assert s3.get_object(Bucket=bucket, Key="mp")["Body"].read() == part + part
    segments = f"{bucket}+segments"
    first = conn.get_container(segments)[1][0]["name"]
    headers, raw = read_stored(ring, t1["account"], segments, first)
    assert [f["name"] for f in json.loads(headers[PIPELINE])] == ["compression", "encryption"]
    assert part[:64] not in raw


def test_a_bandwidth_cap_holds_for_a_keystone_tenant(keystone_stack, ks_admin):
    t2 = keystone_stack["tenants"]["t2"]
    conn = swift_v3(t2)
    conn.put_container("qos")
    conn.put_object("qos", "o", os.urandom(1 << 20))
    token = conn.get_auth()[1]
    ks_admin.add_policies("FOR TENANT t2 DO SET BANDWIDTH WITH get=2MBps")
    deadline = time.monotonic() + 60  # the assignment reaches the proxy through RabbitMQ
    rate = float("inf")
    while rate > 2.5e6 and time.monotonic() < deadline:
        started = time.monotonic()
        got = requests.get(f"{t2['storage_url']}/qos/o", headers={"X-Auth-Token": token},
                           timeout=30)
        assert got.status_code == 200 and len(got.content) == 1 << 20
        rate = len(got.content) / (time.monotonic() - started)
    assert rate <= 2.5e6, f"a GET still ran at {rate / 1e6:.1f} MB/s"


def test_doctor_finds_no_error_and_takes_a_keystone_admin_token(keystone_stack):
    swift_dir = keystone_stack["swift_dir"]
    token = keystone_session(keystone_stack["admin"]).get_token()
    findings = diagnose(find_configs(swift_dir, "proxy"), find_configs(swift_dir, "object"),
                        keystone_stack["controller_url"], token)
    assert [f for f in findings if f.level == "error"] == []
    assert any(f.level == "ok" and "as an administrator's" in f.what for f in findings)
    assert any(f.level == "ok" and "service user 'iostack' logs in" in f.what
               for f in findings)


def test_doctor_finds_authtoken_below_s3token_and_a_wrong_service_password(
        keystone_stack, tmp_path):
    proxy = read_conf(Path(keystone_stack["swift_dir"]) / "proxy-server.conf")
    order = pipeline(proxy)
    order.remove("authtoken")
    order.insert(order.index("keystoneauth"), "authtoken")
    set_pipeline(proxy, order)
    proxy["filter:authtoken"]["password"] = "not-the-password"
    path = tmp_path / "proxy-server.conf"
    write_conf(proxy, path)
    found = [f.what for f in diagnose([str(path)], []) if f.level == "error"]
    assert any("authtoken sits below s3api" in what for what in found), found
    assert any("refuses the service user 'iostack'" in what for what in found), found


def test_a_tenant_filter_is_uploaded_to_a_keystone_project(keystone_stack):
    """``iostack storlet upload`` deploys as Keystone's reseller admin (role ResellerAdmin)."""
    name = f"ks_{uuid.uuid4().hex[:6]}"
    done = subprocess.run(
        [sys.executable, "-m", "iostack.cli", "storlet", "upload",
         str(STORLET_TESTS / "zlib_filter.py"), "--name", name,
         "--main", "zlib_filter.ZlibFilter", "--tenant", "t1"],
        capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, "IOSTACK_STATE_DIR": keystone_stack["state_dir"]})
    assert done.returncode == 0, done.stderr
    t1 = swift_v3(keystone_stack["tenants"]["t1"])
    # Uploaded code is stored under its pinned, content-addressed name.
    pinned = [o for o in t1.get_container("storlet")[1] if o["name"].startswith(PIN_PREFIX)]
    assert pinned and all(o["bytes"] > 0 for o in pinned)
