"""``iostack storlet upload|deploy|sandbox`` against the all-in-one and its controller."""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path

import pytest
import requests
from swiftclient.exceptions import ClientException

from iostack.storlet_runtime.host import packaging
from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.storlets_api import WRAPPER_CLASS, wrapped_code

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
BODY = b"cli-deployed filter " * 500


def test_upload_registers_and_deploys_then_the_filter_runs(iostack, aio, storlet_tenant):
    name = f"cli_{uuid.uuid4().hex[:6]}"
    done = iostack("storlet", "upload", str(HERE / "zlib_filter.py"), "--name", name,
                   "--main", "zlib_filter.ZlibFilter", "--tenant", "t1")
    assert done.returncode == 0, done.stderr
    # The controller knows it as a sandboxed filter, with its code, pinned by its content.
    meta = requests.get(f"{aio['controller_url']}/v1/filters/{name}", timeout=30,
                        headers={"X-Auth-Token": aio["admin_token"]}).json()
    assert meta["sandboxable"] and meta["extra"]["runtime"] == "storlet"
    storlet = meta["extra"]["storlet"]
    assert storlet == packaging.pin_name(meta["extra"]["code_sha256"]) in done.stdout
    assert re.fullmatch(r"iostack_pin_[0-9a-f]{32}\.py", storlet)
    assert meta["extra"]["storlet_main"] == f"{storlet[:-3]}.IOStackStorletsApi"
    assert [v["sha256"] for v in meta["extra"]["versions"]] == [meta["extra"]["code_sha256"]]
    # Swift has the storlet; it round-trips a body.
    storlet_tenant.conn.put_container(storlet_tenant.container)
    put = storlet_tenant.put("cli.txt", BODY, packaging.storlet_run_headers(storlet, "encode"))
    assert put.status_code == 201, put.text
    sysmeta = packaging.read_storlet_result(storlet_tenant.conn.head_object(
        storlet_tenant.container, "cli.txt"))["sysmeta"]
    get = storlet_tenant.get("cli.txt", packaging.storlet_run_headers(storlet, "decode",
                                                                      sysmeta=sysmeta))
    assert get.content == BODY


@pytest.mark.parametrize(("code", "extra", "message"), [
    (b"import os\nclass A:\n    pass\n", [], "classes with __call__: none"),
    (b"class A(:\n", [], "syntax error"),
    (b"class A:\n    def __call__(self, i, o, p):\n        pass\n", ["--name", "Bad-Name"],
     "lower-case letters"),
])
def test_bad_code_is_refused_before_anything_is_deployed(iostack, aio, storlet_tenant, tmp_path,
                                                         code, extra, message):
    source = tmp_path / "bad.py"
    source.write_bytes(code)
    name = f"bad_{uuid.uuid4().hex[:6]}"
    args = extra or ["--name", name]
    done = iostack("storlet", "upload", str(source), *args, "--tenant", "t1")
    assert done.returncode == 2
    assert message in done.stderr
    with pytest.raises(ClientException):
        storlet_tenant.conn.head_object("storlet", f"iostack_{name}.py")
    assert requests.get(f"{aio['controller_url']}/v1/filters/{name}", timeout=30,
                        headers={"X-Auth-Token": aio["admin_token"]}).status_code == 404


def test_library_filter_that_is_not_sandboxable_is_refused(iostack):
    done = iostack("storlet", "deploy", "encryption", "--tenant", "t1")
    assert done.returncode == 2
    assert "sandboxable" in done.stderr


def test_sandbox_list_and_stop(iostack, storlet_tenant):
    storlet_tenant.put("warm.txt", b"x")
    assert storlet_tenant.get("warm.txt", {"X-Run-Storlet": "upper.py"}).status_code == 200
    scope = sandbox_scope("AUTH_t1")
    listed = json.loads(iostack("storlet", "sandbox", "list", "--json").stdout)
    row = {row["scope"]: row for row in listed}[scope]
    assert row["pid"] and Path(f"/proc/{row['pid']}").exists()
    if os.geteuid() == 0:  # its own uid, and which limits hold (cgroup v1 on this machine)
        assert row["uid"] >= 1_700_000_000 and "pids.max=128" in row["limits"]
    text = iostack("storlet", "sandbox", "list").stdout
    assert scope in text and "pids.max" in text
    stopped = iostack("storlet", "sandbox", "stop", scope)
    assert "stopped" in stopped.stdout
    listed = json.loads(iostack("storlet", "sandbox", "list", "--json").stdout)
    assert {row["scope"]: row["pid"] for row in listed}.get(scope) is None
    # The next request brings a fresh sandbox up.
    assert storlet_tenant.get("warm.txt", {"X-Run-Storlet": "upper.py"}).content == b"X"


@pytest.mark.parametrize(("cls", "message"), [
    ("RaisingStorlet", "encode failed"),
    ("TruncatingStorlet", "decode of one line, bytes 0-39: 19 bytes that are not the 39"),
    ("OverlongStorlet", "decode of an empty body, bytes 0-0: 100 bytes"),
])
def test_a_filter_that_fails_in_the_sandbox_is_refused_and_nothing_is_registered(
        iostack, aio, storlet_tenant, cls, message):
    before = {o["name"] for o in storlet_tenant.conn.get_container("storlet")[1]}
    name = f"broken_{uuid.uuid4().hex[:6]}"
    done = iostack("filter", "upload", str(HERE / "broken_storlet.py"), "--name", name,
                   "--main", f"broken_storlet.{cls}", "--tenant", "t1")
    assert done.returncode == 2, done.stdout
    assert "failed its check in t1's sandbox" in done.stderr and message in done.stderr, \
        done.stderr
    assert requests.get(f"{aio['controller_url']}/v1/filters/{name}", timeout=30,
                        headers={"X-Auth-Token": aio["admin_token"]}).status_code == 404
    assert {o["name"] for o in storlet_tenant.conn.get_container("storlet")[1]} == before


@pytest.mark.parametrize(("code", "main", "message"), [
    # As `filter upload` sends it: the author's class inside IOStack's protocol.
    (wrapped_code((HERE / "broken_storlet.py").read_bytes(), "TruncatingStorlet"),
     f"broken_storlet.{WRAPPER_CLASS}",
     "decode of one line, bytes 0-39: 19 bytes that are not the 39"),
    ((HERE / "rot13_storlet.py").read_bytes(), "rot13_storlet.Rot13Storlet",
     "no Iostack-Encoded-Length"),  # plain Storlets code, not the wrapped form
    (b"class Broken(:\n", "broken_storlet.Broken", "broken_storlet.py:1:"),
], ids=["truncates", "no-protocol", "syntax"])
def test_code_uploaded_through_the_rest_api_that_fails_its_check_gets_a_400_naming_why(
        aio, code, main, message):
    url = f"{aio['controller_url']}/v1/filters/rest_{uuid.uuid4().hex[:6]}"
    admin = {"X-Auth-Token": aio["admin_token"]}
    meta = {"description": "x", "extra": {"storlet": f"{main.split('.')[0]}.py",
                                          "storlet_main": main}}
    assert requests.put(url, json=meta, headers=admin, timeout=30).status_code == 201
    refused = requests.put(f"{url}/code", data=code, timeout=120,
                           headers={**admin, "Content-Type": "application/octet-stream"})
    assert refused.status_code == 400, refused.text
    assert message in refused.json()["error"] and "Nothing was stored" in refused.json()["error"]
    assert requests.get(f"{url}/code", headers=admin, timeout=30).status_code == 404
    assert "versions" not in requests.get(url, headers=admin, timeout=30).json()["extra"]
