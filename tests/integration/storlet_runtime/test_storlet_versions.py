"""Uploaded filter code is pinned by its content; objects decode with the version that
encoded them, whatever happens to the filter or to the tenant's ``storlet`` container."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import requests
from swiftclient.exceptions import ClientException

from iostack.storlet_runtime.host.packaging import pin_name

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
BODY = b"".join(b"%06d versioned Text\n" % i for i in range(5000))


def _meta(aio, name: str) -> dict:
    return requests.get(f"{aio['controller_url']}/v1/filters/{name}", timeout=30,
                        headers={"X-Auth-Token": aio["admin_token"]}).json()


def test_objects_decode_with_their_version_after_a_new_upload_a_refused_rm_and_tenant_deletes(
        aio, iostack, swift_for, policies, stored, tmp_path):
    name = f"tver{uuid.uuid4().hex[:6]}"

    def upload(module: str, cls: str) -> str:
        # Versions are the code's hash, shared by every filter uploading the same code:
        # a line of this run's own makes the objects counted here this test's only.
        source = tmp_path / f"{module}.py"
        source.write_text((HERE / f"{module}.py").read_text() + f"# {name}\n")
        done = iostack("filter", "upload", str(source), "--name", name,
                       "--main", f"{module}.{cls}", "--tenant", "t1")
        assert done.returncode == 0, done.stderr
        return _meta(aio, name)["extra"]["code_sha256"]

    conn = swift_for("t1")
    container = f"ver-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    v1 = upload("rot13_storlet", "Rot13Storlet")
    [pid] = policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {name}")
    conn.put_object(container, "one", BODY)
    v2 = upload("shift_storlet", "ShiftStorlet")  # same name, other code: version 2
    assert v2 != v1
    conn.put_object(container, "two", BODY)
    assert stored("AUTH_t1", container, "two")[1] == bytes((b + 1) % 256 for b in BODY)
    for obj in ("one", "two"):
        assert conn.get_object(container, obj)[1] == BODY

    # Both versions are kept, counted and shown.
    meta = _meta(aio, name)
    assert [v["sha256"] for v in meta["extra"]["versions"]] == [v1, v2]
    shown = json.loads(iostack("filter", "show", name, "--json").stdout)
    assert shown["objects_by_version"] == {v1: 1, v2: 1}
    text = iostack("filter", "show", name).stdout
    assert pin_name(v1) in text and pin_name(v2) in text

    # rm is refused with the count; nothing is removed.
    policies.remove(pid)
    refused = iostack("filter", "rm", name)
    assert refused.returncode == 2
    assert "2 stored objects" in refused.stderr and v1[:16] in refused.stderr
    assert _meta(aio, name)["name"] == name

    # The tenant deletes every object of its storlet container: the pins stay.
    saved = {}
    for obj in conn.get_container("storlet")[1]:
        headers, body = conn.get_object("storlet", obj["name"])
        try:
            conn.delete_object("storlet", obj["name"])
        except ClientException as exc:
            assert exc.http_status == 403 and obj["name"].startswith("iostack_pin_")
        else:
            saved[obj["name"]] = (headers, body)
    # Storlets' own checks pass (the registration is sent again); IOStack's refuses.
    registration = {k: v for k, v in conn.head_object("storlet", pin_name(v1)).items()
                    if k.startswith("x-object-meta-storlet-")}
    with pytest.raises(ClientException) as err:
        conn.post_object("storlet", pin_name(v1), {**registration, "X-Delete-After": "1"})
    assert err.value.http_status == 403
    with pytest.raises(ClientException) as err:
        conn.put_object("storlet", pin_name(v1), b"class X: pass\n", headers=registration)
    assert err.value.http_status == 403
    with pytest.raises(ClientException) as err:
        conn.delete_container("storlet")
    assert err.value.http_status == 409
    try:
        for obj in ("one", "two"):
            assert conn.get_object(container, obj)[1] == BODY
            _, part = conn.get_object(container, obj, headers={"Range": "bytes=100-199"})
            assert part == BODY[100:200]
    finally:  # other tests of this session use t1's storlets
        for obj, (headers, body) in saved.items():
            keep = {k: v for k, v in headers.items()
                    if k.startswith("x-object-meta-") or k == "content-type"}
            conn.put_object("storlet", obj, body, headers=keep)

    # Once no object uses them, rm removes the filter and its versions.
    for obj in ("one", "two"):
        conn.delete_object(container, obj)
    done = iostack("filter", "rm", name)
    assert done.returncode == 0, done.stderr
    for digest in (v1, v2):
        with pytest.raises(ClientException) as err:
            conn.head_object("storlet", pin_name(digest))
        assert err.value.http_status == 404
