"""A sandboxed filter that hangs on GET: the client gets a 503 that names it within the
timeout, whether it ran at the proxy or at the object servers, and the next GET is served."""

from __future__ import annotations

import time
import uuid

import pytest
import requests

from iostack.storlet_runtime.host.swift_conf import STORLET_TIMEOUT

pytestmark = pytest.mark.integration

@pytest.fixture(scope="module")
def hang_filter(upload_t1_filter):
    return upload_t1_filter("hang_filter.HangFilter", "thang")


@pytest.mark.parametrize("size", [2000, 2_200_000], ids=["at-the-proxy", "at-the-object-servers"])
def test_a_hung_sandboxed_filter_is_a_clear_503_and_the_next_get_works(swift_for, policies,
                                                                       hang_filter, size,
                                                                       storlet_of):
    conn = swift_for("t1")
    container = f"sbx-hang-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {hang_filter}")
    body = b"x" * size
    for name in ("hang", "fine"):
        conn.put_object(container, name, body)

    url, token = conn.get_auth()
    start = time.monotonic()
    hung = requests.get(f"{url}/{container}/hang", headers={"X-Auth-Token": token}, timeout=60)
    assert time.monotonic() - start < STORLET_TIMEOUT + 5
    assert hung.status_code == 503
    assert f"sandboxed filter {storlet_of(hang_filter)}" in hung.text, hung.text
    assert conn.get_object(container, "fine")[1] == body
