"""Sandboxed filters in IOStack policies: uploaded code runs in the tenant's sandbox on the data
path, composed with native filters, and objects read back exactly as written."""

from __future__ import annotations

import json
import uuid

import pytest

pytestmark = pytest.mark.integration

BODY = b"".join(b"%06d sandboxed line of a tenant log\n" % i for i in range(20000))


@pytest.fixture(scope="module")
def zlib_filter(upload_t1_filter):
    return upload_t1_filter("zlib_filter.ZlibFilter", "tzlib")


@pytest.mark.parametrize("native", ["", ", SET ENCRYPTION"], ids=["alone", "then-encryption"])
def test_uploaded_filter_runs_in_the_sandbox_on_the_data_path(swift_for, policies, stored,
                                                              zlib_filter, native):
    conn = swift_for("t1")
    container = f"sbx-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {zlib_filter}{native}")

    conn.put_object(container, "log", BODY)
    headers, raw = stored("AUTH_t1", container, "log")
    record = json.loads(headers["x-object-sysmeta-iostack-pipeline"])
    assert [e["name"] for e in record][0] == zlib_filter
    assert record[0]["meta"]["iostack.runtime"] == "storlet"
    assert len(raw) < len(BODY) / 5  # the sandboxed filter really compressed it

    _, got = conn.get_object(container, "log")
    assert got == BODY
    _, part = conn.get_object(container, "log", headers={"Range": "bytes=1000-1099"})
    assert part == BODY[1000:1100]
    assert int(conn.head_object(container, "log")["content-length"]) == len(BODY)


def test_a_policy_runs_a_library_filter_sandboxed(noop_sandboxed_container, stored):
    conn, container = noop_sandboxed_container("SET NOOP SANDBOXED, SET ENCRYPTION")

    conn.put_object(container, "o", BODY)
    headers, raw = stored("AUTH_t1", container, "o")
    record = json.loads(headers["x-object-sysmeta-iostack-pipeline"])
    assert [(e["name"], e["meta"].get("iostack.runtime")) for e in record] == [
        ("noop", "storlet"), ("encryption", None)]
    assert BODY[:100] not in raw
    assert conn.get_object(container, "o")[1] == BODY
    assert conn.get_object(container, "o", headers={"Range": "bytes=-10"})[1] == BODY[-10:]
