"""Hostile sandboxed filters against the real all-in-one: each gets a clear error for its
own tenant's request, and another tenant's requests keep working meanwhile.

t1 runs ``hostile_filter.py`` as its own sandboxed filter on the data path;
t2 runs ``upper.py`` in its own sandbox. (A hostile storlet's fork bomb,
memory hog and reach into another tenant's channel, under both runtimes, are
in the sandbox suite, ``test_storlet_isolation``.)
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
import requests

from iostack.storlet_runtime.host import deploy
from iostack.storlet_runtime.storlets import upper

pytestmark = pytest.mark.integration

UPPER = {"X-Run-Storlet": "upper.py"}


@pytest.fixture(scope="module")
def t2(tenant_for):
    tenant = tenant_for("t2")
    deploy.enable_account(tenant.conn)
    deploy.upload_storlet(tenant.conn, deploy.check_python_storlet(
        "upper.py", Path(upper.__file__).read_bytes()))
    tenant.conn.put_container(tenant.container)
    assert tenant.put("hello", b"hello").status_code == 201
    return tenant


def t2_works(t2) -> None:
    resp = t2.get("hello", UPPER, timeout=30)
    assert (resp.status_code, resp.content) == (200, b"HELLO"), resp.text


@pytest.fixture(scope="module")
def hostile(upload_t1_filter, swift_for):
    name = upload_t1_filter("hostile_filter.HostileFilter", "thost")
    conn = swift_for("t1")
    return name, conn


@pytest.fixture
def hostile_container(hostile, policies):
    name, conn = hostile
    container = f"sbx-hostile-{uuid.uuid4().hex[:8]}"
    conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET {name}")
    url, token = conn.get_auth()
    return f"{url}/{container}", token, name


@pytest.mark.parametrize("obj", ["die", "flood"])
def test_an_encode_that_dies_or_floods_fails_the_put_and_stores_nothing(hostile_container, t2,
                                                                       obj, storlet_of):
    """Regression: a storlet that died after its metadata had a short object committed;
    one that never stopped writing made an endless PUT."""
    url, token, name = hostile_container
    put = requests.put(f"{url}/{obj}", data=b"x" * 100_000, headers={"X-Auth-Token": token},
                       timeout=60)
    assert put.status_code >= 500, put.text
    assert storlet_of(name) in put.text
    assert requests.head(f"{url}/{obj}", headers={"X-Auth-Token": token},
                         timeout=30).status_code == 404
    t2_works(t2)
    ok = requests.put(f"{url}/fine", data=b"fine", headers={"X-Auth-Token": token}, timeout=60)
    assert ok.status_code == 201


def test_a_decode_past_its_length_never_reaches_the_client(hostile_container):
    """Regression: the bytes past the range were sent before the length was checked."""
    url, token, name = hostile_container
    body = b"y" * 5000
    assert requests.put(f"{url}/past", data=body, headers={"X-Auth-Token": token},
                        timeout=60).status_code == 201
    got = requests.get(f"{url}/past", headers={"X-Auth-Token": token}, timeout=60)
    assert got.status_code == 503 and "more than the 5000 bytes" in got.text, got.text
    assert b"!" not in got.content


SWAPPED = b'''"""A pass-through that a tenant puts in place of an imposed filter's storlet."""
import json


class IOStackFilter:
    def __init__(self, logger):
        self.logger = logger

    def __call__(self, in_files, out_files, params):
        body = in_files[0].read()
        out_files[0].set_metadata({"Iostack-Sysmeta": json.dumps({}),
                                   "Iostack-Encoded-Length": str(len(body))})
        out_files[0].write(body)
        in_files[0].close()
        out_files[0].close()
'''


def test_a_tenant_cannot_swap_the_code_of_an_imposed_filter(noop_sandboxed_container, iostack,
                                                            storlet_tenant, t2):
    """Regression: the data path ran whatever the tenant's storlet container held."""
    conn, container = noop_sandboxed_container("SET NOOP SANDBOXED")
    assert conn.put_object(container, "before", b"imposed") is not None
    # The tenant (an .admin of its account) overwrites the imposed filter's storlet.
    storlet_tenant.conn.put_object("storlet", "iostack_noop.py", SWAPPED, headers={
        "X-Object-Meta-Storlet-Language": "Python",
        "X-Object-Meta-Storlet-Interface-Version": "1.0",
        "X-Object-Meta-Storlet-Object-Metadata": "no",
        "X-Object-Meta-Storlet-Main": "iostack_noop.IOStackFilter"})
    time.sleep(1.1)  # the proxy's registration cache
    url, token = conn.get_auth()
    try:
        put = requests.put(f"{url}/{container}/after", data=b"swapped?", timeout=60,
                           headers={"X-Auth-Token": token})
        assert put.status_code == 503, put.text
        assert "iostack_noop.py" in put.text and "controller recorded" in put.text
        got = requests.get(f"{url}/{container}/before", headers={"X-Auth-Token": token},
                           timeout=60)
        assert got.status_code == 503 and "controller recorded" in got.text, got.text
        t2_works(t2)
    finally:
        redeployed = iostack("storlet", "deploy", "noop", "--tenant", "t1")
        assert redeployed.returncode == 0, redeployed.stderr
    time.sleep(1.1)
    assert conn.get_object(container, "before")[1] == b"imposed"
