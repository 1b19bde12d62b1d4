"""Filters run in the sandbox through the Storlets API, alone and composed with native filters.

Request headers come from ``packaging.storlet_headers`` (the call the IOStack
middleware makes); results come back through ``read_storlet_result``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
import zlib
from pathlib import Path

import pytest
from swift.common import direct_client, utils
from swift.common.ring import Ring

from iostack.filters.library import filter_names, get_filter
from iostack.storlet_runtime.host import deploy, packaging

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
SANDBOXABLE = [n for n in filter_names()
               if get_filter(n).metadata.sandboxable and get_filter(n).transforms_body]
BODY = b"".join(b"line %06d of a compressible log, status=ok\n" % i for i in range(6000))


@pytest.fixture(scope="module")
def container(storlet_tenant):
    name = f"sbx-{uuid.uuid4().hex[:8]}"
    storlet_tenant.conn.put_container(name)
    storlet_tenant.container = name
    return name


@pytest.fixture(scope="module")
def custom_zlib(storlet_tenant):
    """A tenant's own compression filter, validated then uploaded."""
    code = (HERE / "zlib_filter.py").read_bytes()
    storlet = deploy.check_python_storlet("iostack_tenant_zlib.py", code)
    deploy.upload_storlet(storlet_tenant.conn, storlet)
    return "tenant_zlib"


def round_trip(tenant, name, filter_name, params=None, on_proxy=False, byte_range=None):
    put = tenant.put(name, BODY, packaging.storlet_headers(filter_name, "encode", params))
    assert put.status_code == 201, put.text
    head = tenant.conn.head_object(tenant.container, name)
    sysmeta = packaging.read_storlet_result(head)["sysmeta"]
    get = tenant.get(name, packaging.storlet_headers(
        filter_name, "decode", sysmeta=sysmeta, on_proxy=on_proxy, byte_range=byte_range))
    assert get.status_code == 200, get.text
    return head, get


def test_noop_is_packaged():
    assert "noop" in SANDBOXABLE  # the library declares at least noop sandbox-capable


@pytest.mark.parametrize("filter_name", SANDBOXABLE)
@pytest.mark.parametrize("on_proxy", [False, True], ids=["object-node", "proxy"])
def test_library_filter_round_trip(storlet_tenant, container, filter_name, on_proxy):
    packaging.deploy_filter(storlet_tenant.conn, filter_name)
    name = f"{filter_name}-{on_proxy}"
    _, get = round_trip(storlet_tenant, name, filter_name, on_proxy=on_proxy)
    assert get.content == BODY
    assert packaging.read_storlet_result(get.headers)["length"] == len(BODY)
    _, ranged = round_trip(storlet_tenant, name, filter_name, on_proxy=on_proxy,
                           byte_range=(1000, 1500))
    assert ranged.content == BODY[1000:1500]


def test_filters_not_declared_sandboxable_are_refused():
    refused = [n for n in filter_names() if not get_filter(n).metadata.sandboxable]
    for name in refused:
        with pytest.raises(packaging.NotSandboxable, match=name):
            packaging.filter_storlet(name)


@pytest.mark.parametrize("on_proxy", [False, True], ids=["object-node", "proxy"])
def test_custom_compression_filter_round_trip(storlet_tenant, container, custom_zlib, on_proxy):
    name = f"zlib-{on_proxy}"
    head, get = round_trip(storlet_tenant, name, custom_zlib, {"level": 9}, on_proxy=on_proxy)
    assert get.content == BODY
    assert int(head["content-length"]) < len(BODY) // 4  # really stored compressed
    assert zlib.decompress(storlet_tenant.conn.get_object(container, name)[1]) == BODY
    _, ranged = round_trip(storlet_tenant, name, custom_zlib, on_proxy=on_proxy,
                           byte_range=(70000, 70100))
    assert ranged.content == BODY[70000:70100]


def test_mixed_pipeline_sandboxed_compression_then_native_encryption(
        aio, storlet_tenant, container, custom_zlib, policies):
    """PUT: sandboxed compression (proxy), then native encryption; a proxy GET undoes both."""
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET ENCRYPTION")
    _, get = round_trip(storlet_tenant, "mixed", custom_zlib, on_proxy=True)
    assert get.content == BODY
    # Without the storlet, the tenant reads what the sandbox produced: the zlib stream,
    # decrypted by the native filter.
    plain = storlet_tenant.get("mixed")
    assert zlib.decompress(plain.content) == BODY
    # On disk: encrypted compressed bytes, neither plaintext nor a zlib stream.
    utils.set_swift_dir(aio["swift_dir"])
    ring = Ring(aio["swift_dir"], ring_name="object")
    part, nodes = ring.get_nodes("AUTH_t1", container, "mixed")
    _, on_disk = direct_client.direct_get_object(
        nodes[0], part, "AUTH_t1", container, "mixed", headers={"X-Backend-Iostack-Raw": "true"})
    assert len(on_disk) < len(BODY) // 4
    assert on_disk != plain.content and b"status=ok" not in on_disk
    with pytest.raises(zlib.error):
        zlib.decompress(on_disk)


@pytest.mark.parametrize("on_proxy", [False, True], ids=["object-node", "proxy"])
def test_a_failing_filter_is_a_503_not_a_body(storlet_tenant, container, custom_zlib, on_proxy):
    assert storlet_tenant.put("bad-sysmeta", BODY).status_code == 201
    resp = storlet_tenant.get("bad-sysmeta", packaging.storlet_headers(
        custom_zlib, "decode", sysmeta={"len": "not a number"}, on_proxy=on_proxy))
    assert resp.status_code == 503
    assert BODY[:100] not in resp.content


def test_tenant_cannot_run_a_storlet_of_another_account(tenant_for, storlet_tenant, custom_zlib):
    other = tenant_for("t2")
    deploy.enable_account(other.conn)
    other.conn.put_container(other.container)
    assert other.put("own.txt", b"t2 data").status_code == 201
    # t1's filter lives in t1's storlet container: t2 cannot run it.
    resp = other.get("own.txt", packaging.storlet_headers(custom_zlib, "decode",
                                                          sysmeta={"len": "7"}))
    assert resp.status_code >= 400
    assert resp.content != b"t2 data"


def run_runner_driver(*args: str) -> dict:
    done = subprocess.run(  # fixed argv
        [sys.executable, str(HERE / "runner_driver.py"), *args],
        capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_runner_drives_a_sandboxed_filter_from_inside_a_middleware(aio, custom_zlib):
    """SandboxRunner: what the IOStack middleware calls to run a filter at the proxy stage."""
    result = run_runner_driver(aio["swift_dir"], "AUTH_t1", packaging.storlet_name(custom_zlib))
    assert result["stored"] < result["original"] // 4
    assert result["sysmeta"] == {"len": str(result["original"])}
    assert result["whole_ok"] and result["part_ok"]


def test_runner_reads_a_registration_at_most_once_a_second(aio, custom_zlib):
    result = run_runner_driver("reads", aio["swift_dir"], "AUTH_t1",
                               packaging.storlet_name(custom_zlib))
    assert result["reads"] == [1, 1]  # three calls within a second read it once; later, again
