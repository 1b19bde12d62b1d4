"""Hostile storlets against the real all-in-one: each gets a clear error for its own
tenant's request, and another tenant's requests keep working meanwhile.

t1 runs the hostile code (the isolation probe through the Storlets API, and
``hostile_filter.py`` as its own sandboxed filter on the data path); t2 runs
``upper.py`` in its own sandbox. Limits are the all-in-one's (128 processes,
1 GiB per scope, 8 s per request).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
import requests

from iostack.storlet_runtime import deploy
from iostack.storlet_runtime.identity import sandbox_scope
from iostack.storlet_runtime.sandbox import ScopeSandbox
from iostack.storlet_runtime.storlets import upper
from iostack.storlet_runtime.swift_conf import STORLET_TIMEOUT

pytestmark = pytest.mark.integration

PROBE = {"X-Run-Storlet": "isolation_probe.py"}
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


@pytest.fixture(scope="module")
def t1(storlet_tenant):
    assert storlet_tenant.put("probe-input", b"probe").status_code == 201
    return storlet_tenant


def t2_works(t2) -> None:
    resp = t2.get("hello", UPPER, timeout=30)
    assert (resp.status_code, resp.content) == (200, b"HELLO"), resp.text


def sandbox_of(aio, account: str) -> ScopeSandbox:
    return ScopeSandbox(Path(aio["state_dir"]) / "storlets" / "sandboxes", sandbox_scope(account))


def in_background(call):
    result = {}
    thread = threading.Thread(target=lambda: result.update(resp=call()), daemon=True)
    thread.start()
    return thread, result


def test_a_fork_bomb_stops_only_its_own_tenant(aio, t1, t2):
    """Regression: every scope ran as nobody, so t1's bomb used up t2's process limit too."""
    t2_works(t2)
    sandbox_of(aio, "AUTH_t2").stop()  # t2 must even be able to start a new sandbox
    thread, result = in_background(lambda: t1.get(
        "probe-input", {**PROBE, "X-Storlet-Run-On-Proxy": ""}, params={"check": "bomb"},
        timeout=60))
    deadline, current = time.monotonic() + STORLET_TIMEOUT - 1, 0
    while current < 100 and time.monotonic() < deadline:  # the bomb reaches its scope's limit
        time.sleep(0.2)
        groups = [Path(g) / "pids.current" for g in
                  sandbox_of(aio, "AUTH_t1").record().get("cgroups", [])]
        current = max([int(g.read_text()) for g in groups if g.exists()] or [128])
    assert current >= 100
    t2_works(t2)
    thread.join(STORLET_TIMEOUT + 20)
    resp = result["resp"]
    assert resp.status_code == 503 and "did not answer within" in resp.text, resp.text
    assert t1.get("probe-input", PROBE).content == b"probe"  # a fresh t1 sandbox


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need a root server")
def test_a_memory_hog_is_stopped_by_its_scopes_memory_limit(aio, t1, t2):
    """4 x 600 MiB, each under the 1 GiB per-process limit: only the cgroup stops it."""
    resp = t1.get("probe-input", PROBE, params={"check": "memhog", "children": "4",
                                                "mib": "600"}, timeout=60)
    assert resp.status_code != 200 or b"ends" not in resp.content, resp.text
    print("memory hog answered", resp.status_code, resp.text[:300])
    t2_works(t2)
    # A hog within the limit is served: the limit is the whole scope's, not absurdly low.
    ok = t1.get("probe-input", PROBE, params={"check": "memhog", "children": "2",
                                              "mib": "200"}, timeout=60)
    assert ok.status_code == 200 and json.loads(ok.content) == {"ends": [0, 0]}, \
        (ok.status_code, ok.text)


def channel_dir(aio, account: str) -> str:
    t = sandbox_of(aio, account).channel_dir()
    assert t is not None, f"no sandbox of {account} runs"
    return t


def as_uid(uid: int, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # fixed interpreter
        ["/usr/bin/python3", "-c", code, *args], user=uid, group=uid, extra_groups=[],
        capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="other uids need a root test run")
def test_another_uid_cannot_read_or_replace_a_tenants_channel(aio, t1, t2):
    """Regression: the channel directory was 0777 on the host: any local user could list
    it and put its own socket in the place of the daemon factory's."""
    t1.get("probe-input", PROBE)
    t2_works(t2)
    channels = channel_dir(aio, "AUTH_t1")
    t2_uid = sandbox_of(aio, "AUTH_t2").record()["uid"]
    assert t2_uid != sandbox_of(aio, "AUTH_t1").record()["uid"]
    for uid in (t2_uid, 65534):  # the other tenant's sandbox identity, and nobody
        done = as_uid(uid, "import os, socket, sys\n"
                           "try:\n    os.listdir(sys.argv[1])\nexcept OSError as e:\n"
                           "    print(e.strerror)\n"
                           "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                           "try:\n    s.bind(sys.argv[1] + '/evil')\nexcept OSError as e:\n"
                           "    print(e.strerror)\n", channels)
        assert done.stdout.split("\n")[:2] == ["Permission denied"] * 2, done
    host_pipes = Path(aio["state_dir"]) / "storlets" / "pipes" / "scopes"
    assert not (host_pipes / sandbox_scope("AUTH_t1")).exists()  # nothing on the host disk


@pytest.mark.skipif(os.geteuid() != 0, reason="placing sockets as other uids needs root")
def test_a_channel_that_is_not_the_scopes_own_socket_gets_nothing(aio, t1, t2):
    """No other uid can put anything in a scope's channels (not even root: its uid has no
    mapping in the sandbox's user namespace); the tenant itself can, and a symlink to
    another tenant's socket is refused instead of followed."""
    on_proxy = {**PROBE, "X-Storlet-Run-On-Proxy": ""}
    assert t1.get("probe-input", on_proxy).content == b"probe"
    t2_works(t2)
    daemon = channel_dir(aio, "AUTH_t1") + "/isolation_probe.Probe"
    with pytest.raises(OSError):  # EOVERFLOW
        socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind(daemon + ".root")
    victim = channel_dir(aio, "AUTH_t2") + "/upper.UpperStorlet"
    t1_uid = sandbox_of(aio, "AUTH_t1").record()["uid"]
    done = as_uid(t1_uid, "import os, sys\nos.unlink(sys.argv[1])\nos.symlink(sys.argv[2], "
                          "sys.argv[1])\n", daemon, victim)
    assert done.returncode == 0, done.stderr
    resp = t1.get("probe-input", on_proxy, params={"check": "echo"})
    assert resp.status_code == 503 and "not the sandbox's own" in resp.text, resp.text
    t2_works(t2)
    # The tampered sandbox was torn down: t1's next request gets a fresh one.
    assert t1.get("probe-input", on_proxy).content == b"probe"


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
