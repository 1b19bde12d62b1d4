"""The Storlets public API (X-Run-Storlet) through the all-in-one with the bubblewrap gateway."""

from __future__ import annotations

import pytest
from swiftclient.exceptions import ClientException

pytestmark = pytest.mark.integration

RUN_UPPER = {"X-Run-Storlet": "upper.py"}


@pytest.fixture(scope="module")
def text_object(storlet_tenant):
    body = b"sandboxed storlets on swift\n" * 1000
    assert storlet_tenant.put("text.txt", body, {"X-Object-Meta-Color": "blue"}).status_code == 201
    return body


def test_get_runs_on_object_node(storlet_tenant, text_object):
    resp = storlet_tenant.get("text.txt", RUN_UPPER)
    assert resp.status_code == 200, resp.text
    assert resp.content == text_object.upper()
    assert resp.headers["X-Object-Meta-Transformed-By"] == "upper"
    assert resp.headers["X-Object-Meta-Color"] == "blue"  # input metadata reaches the storlet


def test_get_runs_on_proxy(storlet_tenant, text_object):
    resp = storlet_tenant.get("text.txt", {**RUN_UPPER, "X-Storlet-Run-On-Proxy": ""})
    assert resp.status_code == 200, resp.text
    assert resp.content == text_object.upper()


def test_parameters_by_query_and_header(storlet_tenant, text_object):
    by_query = storlet_tenant.get("text.txt", RUN_UPPER, params={"prefix": "Q:"})
    by_header = storlet_tenant.get("text.txt", {**RUN_UPPER, "X-Storlet-Parameter-1": "prefix:H:"})
    assert by_query.content == b"Q:" + text_object.upper()
    assert by_header.content == b"H:" + text_object.upper()


def test_put_runs_on_proxy_and_stores_the_output(storlet_tenant):
    resp = storlet_tenant.put("put-upper.txt", b"stored through a storlet", RUN_UPPER)
    assert resp.status_code == 201, resp.text
    plain = storlet_tenant.get("put-upper.txt")
    assert plain.content == b"STORED THROUGH A STORLET"
    assert plain.headers["X-Object-Meta-Transformed-By"] == "upper"


def test_storlet_range(storlet_tenant, text_object):
    resp = storlet_tenant.get("text.txt", {**RUN_UPPER, "X-Storlet-Range": "bytes=0-9"})
    assert resp.status_code == 200, resp.text
    assert resp.content == text_object[:10].upper()
    # Storlets refuses plain Range together with a storlet.
    assert storlet_tenant.get("text.txt", {**RUN_UPPER, "Range": "bytes=0-9"}).status_code == 400


def test_plain_get_is_untouched(storlet_tenant, text_object):
    assert storlet_tenant.get("text.txt").content == text_object


def test_unknown_storlet_is_an_error(storlet_tenant, text_object):
    resp = storlet_tenant.get("text.txt", {"X-Run-Storlet": "missing.py"})
    assert resp.status_code >= 400
    assert resp.content != text_object


def test_account_without_storlets_is_refused(plain_tenant):
    assert plain_tenant.put("x.txt", b"abc").status_code == 201
    resp = plain_tenant.get("x.txt", RUN_UPPER)
    assert resp.status_code == 400
    assert b"Account disabled for storlets" in resp.content


def test_bad_storlet_registration_is_refused(storlet_tenant):
    # Main must name a class of the uploaded module; the middleware checks it too.
    with pytest.raises(ClientException) as err:
        storlet_tenant.conn.put_object("storlet", "broken.py", b"class A:\n    pass\n", headers={
            "X-Object-Meta-Storlet-Language": "Python",
            "X-Object-Meta-Storlet-Interface-Version": "1.0",
            "X-Object-Meta-Storlet-Object-Metadata": "no",
            "X-Object-Meta-Storlet-Main": "other.A"})
    assert err.value.http_status == 400


@pytest.mark.parametrize("where", ["object", "proxy"])
def test_oversized_parameters_get_400_and_the_sandbox_keeps_serving(storlet_tenant, text_object,
                                                                      where):
    run = {**RUN_UPPER, "X-Storlet-Run-On-Proxy": ""} if where == "proxy" else dict(RUN_UPPER)
    resp = storlet_tenant.get("text.txt", run, params={"prefix": "x" * 5000})
    assert resp.status_code == 400, resp.text
    assert b"too large" in resp.content
    after = storlet_tenant.get("text.txt", run, params={"prefix": "ok:"})
    assert after.status_code == 200
    assert after.content == b"ok:" + text_object.upper()


def test_reuploaded_storlet_of_the_same_size_replaces_the_old_one(storlet_tenant, text_object):
    from iostack.storlet_runtime.host import deploy

    template = (b"class Version:\n    def __init__(self, logger):\n        pass\n\n"
                b"    def __call__(self, in_files, out_files, params):\n"
                b"        out_files[0].set_metadata({})\n"
                b"        out_files[0].write(b'%s')\n"
                b"        out_files[0].close()\n")
    for version in (b"v1", b"v2"):
        storlet = deploy.check_python_storlet("version.py", template % version)
        deploy.upload_storlet(storlet_tenant.conn, storlet)
        for run in ({"X-Run-Storlet": "version.py"},
                    {"X-Run-Storlet": "version.py", "X-Storlet-Run-On-Proxy": ""}):
            assert storlet_tenant.get("text.txt", run).content == version
