"""The sandbox suite: isolation of both runtimes, observed from inside by a probe storlet.

Every test runs twice, against a stack with the bubblewrap sandbox and one
with Storlets' docker gateway in containers of the stack's Podman service
(``sandbox_aio``), with the same assertions. Each runs ``isolation_probe.py``
on a small object through the real all-in-one (proxy -> object server ->
gateway -> sandbox) and checks what it reports, or makes t1's sandbox
hostile while t2 (``upper.py`` in its own sandbox) keeps working. Limits
come from the all-in-one's gateway config
(``iostack.storlet_runtime.host.swift_conf``): 1 GiB address space and memory per
scope, 128 processes, an 8 s request timeout.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from iostack.doctor.cli import diagnose, find_configs
from iostack.doctor.sandbox import check_gateway
from iostack.ports import wait_until
from iostack.storlet_runtime.host.identity import sandbox_scope
from iostack.storlet_runtime.host.swift_conf import STORLET_TIMEOUT
from tests.conftest import Policies

pytestmark = pytest.mark.integration

PROBE = {"X-Run-Storlet": "isolation_probe.py"}
UPPER = {"X-Run-Storlet": "upper.py"}


@pytest.fixture(scope="module")
def t1(sandbox_tenant_for):
    tenant = sandbox_tenant_for("t1")
    assert tenant.put("probe-input", b"input of the probe").status_code == 201
    return tenant


@pytest.fixture(scope="module")
def t2(sandbox_tenant_for):
    tenant = sandbox_tenant_for("t2")
    assert tenant.put("hello", b"hello").status_code == 201
    return tenant


def t2_works(t2) -> None:
    resp = t2.get("hello", UPPER, timeout=30)
    assert (resp.status_code, resp.content) == (200, b"HELLO"), resp.text


@pytest.fixture(scope="module")
def probe(t1):
    def run(check: str, **params: str) -> dict:
        resp = t1.get("probe-input", PROBE, params={"check": check, **params})
        assert resp.status_code == 200, resp.text
        return json.loads(resp.content)

    return run


def test_no_network_even_to_host_loopback(probe):
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(0.5)
        result = probe("network", port=str(listener.getsockname()[1]))
        assert result["connected"] is False
        assert result["error"] in {"ENETUNREACH", "ECONNREFUSED", "EADDRNOTAVAIL"}
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing from the sandbox arrived


def test_host_files_are_invisible(probe, sandbox_aio, sandbox_of):
    swift_conf = str(Path(sandbox_aio["swift_dir"]) / "proxy-server.conf")
    hidden = [swift_conf, sandbox_aio["state_dir"], "/root", "/etc/shadow", "/work", "/home",
              str(Path(__file__))]
    result = probe("files", paths=",".join(hidden + ["/usr/bin/python3", "/var/lib/storlets"]))
    assert {path: result[path] for path in hidden} == dict.fromkeys(hidden, False)
    assert result["/usr/bin/python3"] and result["/var/lib/storlets"]  # the probe can look
    # No host account database: none (bubblewrap), or the engine's own naming only root
    # and the sandbox's uid (Podman writes one for a uid the image does not know).
    uid = sandbox_of("AUTH_t1").record()["uid"]
    assert set(probe("users")["names"]) <= {"root", str(uid)}


def test_nothing_that_looks_like_host_state_is_mounted(probe):
    assert probe("secrets") == {"found": []}


def test_writes_outside_tmp_fail(probe):
    targets = ["/probe", "/usr/probe", "/usr/local/probe", "/var/lib/storlets/probe",
               "/etc/probe"]
    result = probe("write", paths=",".join(targets + ["/tmp/probe"]))
    assert result.pop("/tmp/probe") == "written"
    assert all(outcome in {"EROFS", "EACCES", "ENOENT", "EPERM"} for outcome in result.values()), \
        result


def test_no_capabilities(probe):
    caps = probe("caps")
    for name in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(caps[name], 16) == 0, caps


def test_memory_limit(probe):
    assert probe("memory", mib="2048") == {"allocated": 0, "error": "MemoryError"}
    assert probe("memory", mib="64")["allocated"] == 64 << 20  # the limit is not absurdly low


def test_fork_bomb_is_contained(probe, t1):
    result = probe("forkbomb")
    assert result["refused"] == "EAGAIN"
    assert result["forks"] < 128
    time.sleep(2.5)  # the bomb's children exit; the sandbox serves again
    resp = t1.get("probe-input", PROBE, params={"check": "echo"})
    assert resp.status_code == 200
    assert resp.content == b"input of the probe"


@pytest.mark.parametrize("where", ["object", "proxy"])
def test_hung_storlet_times_out_and_next_request_is_served(t1, where):
    run = {**PROBE, "X-Storlet-Run-On-Proxy": ""} if where == "proxy" else dict(PROBE)
    start = time.monotonic()
    resp = t1.get("probe-input", run, params={"check": "loop"})
    elapsed = time.monotonic() - start
    assert resp.status_code >= 500, resp.text
    assert elapsed < STORLET_TIMEOUT + 5
    if where == "proxy":
        assert b"did not answer within" in resp.content
    after = t1.get("probe-input", run, params={"check": "echo"})
    assert after.status_code == 200
    assert after.content == b"input of the probe"


def test_seccomp_refuses_ptrace_keyctl_bpf_mount_unshare(probe):
    """Regression: the sandbox had no seccomp filter; ptrace and keyctl worked inside."""
    assert probe("syscalls") == dict.fromkeys(("ptrace", "keyctl", "bpf", "mount", "unshare"),
                                              "EPERM")


def test_channels_are_a_private_tmpfs_and_dev_log_leads_there(probe):
    """Regression: the channels were a 0777 host directory and /dev/log the host's syslog."""
    assert probe("channels") == {"dev_log": "/mnt/channels/log", "mode": "0o700",
                                 "fs": ["tmpfs"]}


def in_background(call):
    result = {}
    thread = threading.Thread(target=lambda: result.update(resp=call()), daemon=True)
    thread.start()
    return thread, result


def test_a_fork_bomb_stops_only_its_own_tenant(t1, t2, sandbox_of):
    """Regression: every scope ran as nobody, so t1's bomb used up t2's process limit too."""
    t2_works(t2)
    sandbox_of("AUTH_t2").stop()  # t2 must even be able to start a new sandbox
    thread, result = in_background(lambda: t1.get(
        "probe-input", {**PROBE, "X-Storlet-Run-On-Proxy": ""}, params={"check": "bomb"},
        timeout=60))
    deadline, current = time.monotonic() + STORLET_TIMEOUT - 1, 0
    while current < 100 and time.monotonic() < deadline:  # the bomb reaches its scope's limit
        time.sleep(0.2)
        groups = [Path(g) / "pids.current" for g in
                  sandbox_of("AUTH_t1").record().get("cgroups", [])]
        current = max([int(g.read_text()) for g in groups if g.exists()] or [128])
    assert current >= 100
    t2_works(t2)
    thread.join(STORLET_TIMEOUT + 20)
    resp = result["resp"]
    assert resp.status_code == 503 and "did not answer within" in resp.text, resp.text
    # A fresh t1 sandbox serves, once the kernel has reaped the bomb's processes (seconds
    # under load: until then the scope's process limit is still taken).
    assert wait_until(lambda: t1.get("probe-input", PROBE).content == b"input of the probe",
                      20, 1.0)


@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need a root server")
def test_a_memory_hog_is_stopped_by_its_scopes_memory_limit(t1, t2):
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


def channel_dir(sandbox_of, account: str) -> str:
    t = sandbox_of(account).channel_dir()
    assert t is not None, f"no sandbox of {account} runs"
    return t


def as_uid(uid: int, code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # fixed interpreter
        ["/usr/bin/python3", "-c", code, *args], user=uid, group=uid, extra_groups=[],
        capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.skipif(os.geteuid() != 0, reason="other uids need a root test run")
def test_another_uid_cannot_read_or_replace_a_tenants_channel(t1, t2, sandbox_of):
    """Regression: the channel directory was 0777 on the host: any local user could list
    it and put its own socket in the place of the daemon factory's."""
    t1.get("probe-input", PROBE)
    t2_works(t2)
    channels = channel_dir(sandbox_of, "AUTH_t1")
    t2_uid = sandbox_of("AUTH_t2").record()["uid"]
    assert t2_uid != sandbox_of("AUTH_t1").record()["uid"]
    for uid in (t2_uid, 65534):  # the other tenant's sandbox identity, and nobody
        done = as_uid(uid, "import os, socket, sys\n"
                           "try:\n    os.listdir(sys.argv[1])\nexcept OSError as e:\n"
                           "    print(e.strerror)\n"
                           "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)\n"
                           "try:\n    s.bind(sys.argv[1] + '/evil')\nexcept OSError as e:\n"
                           "    print(e.strerror)\n", channels)
        assert done.stdout.split("\n")[:2] == ["Permission denied"] * 2, done
    host_pipes = Path(t1.info["state_dir"]) / "storlets" / "pipes" / "scopes"
    assert not (host_pipes / sandbox_scope("AUTH_t1")).exists()  # nothing on the host disk


@pytest.mark.skipif(os.geteuid() != 0, reason="placing sockets as other uids needs root")
def test_a_channel_that_is_not_the_scopes_own_socket_gets_nothing(t1, t2, sandbox_of,
                                                                   sandbox_aio):
    """No other uid can put anything in a scope's channels; the tenant itself can, and a
    symlink to another tenant's socket is refused instead of followed."""
    on_proxy = {**PROBE, "X-Storlet-Run-On-Proxy": ""}
    assert t1.get("probe-input", on_proxy).content == b"input of the probe"
    t2_works(t2)
    daemon = channel_dir(sandbox_of, "AUTH_t1") + "/isolation_probe.Probe"
    if sandbox_aio["sandbox"] == "bubblewrap":
        # Not even root: its uid has no mapping in the sandbox's user namespace. (A
        # container shares root's: there only the socket check below stands.)
        with pytest.raises(OSError):  # EOVERFLOW
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind(daemon + ".root")
    victim = channel_dir(sandbox_of, "AUTH_t2") + "/upper.UpperStorlet"
    t1_uid = sandbox_of("AUTH_t1").record()["uid"]
    done = as_uid(t1_uid, "import os, sys\nos.unlink(sys.argv[1])\nos.symlink(sys.argv[2], "
                          "sys.argv[1])\n", daemon, victim)
    assert done.returncode == 0, done.stderr
    resp = t1.get("probe-input", on_proxy, params={"check": "echo"})
    assert resp.status_code == 503 and "not the sandbox's own" in resp.text, resp.text
    t2_works(t2)
    # The tampered sandbox was torn down: t1's next request gets a fresh one.
    assert t1.get("probe-input", on_proxy).content == b"input of the probe"


def test_the_data_path_runs_sandboxed_filters_in_the_stacks_runtime(t1, sandbox_aio,
                                                                    sandbox_of):
    """``SET NOOP SANDBOXED`` (the IOStack middleware's own call into the gateway) runs in
    the same runtime as ``X-Run-Storlet``: a container on the docker stack."""
    env = {**os.environ, "IOSTACK_STATE_DIR": sandbox_aio["state_dir"]}
    deployed = subprocess.run([sys.executable, "-m", "iostack.cli", "storlet", "deploy", "noop",
                               "--tenant", "t1"], capture_output=True, text=True, env=env,
                              timeout=120, check=False)
    assert deployed.returncode == 0, deployed.stderr
    policies = Policies(sandbox_aio)
    container = f"sbx-dp-{uuid.uuid4().hex[:6]}"
    t1.conn.put_container(container)
    policies.add(f"FOR CONTAINER AUTH_t1/{container} DO SET NOOP SANDBOXED")
    try:
        sandbox_of("AUTH_t1").stop()
        t1.conn.put_object(container, "obj", b"through the sandbox")
        assert t1.conn.get_object(container, "obj")[1] == b"through the sandbox"
        record = sandbox_of("AUTH_t1").record()
        assert sandbox_of("AUTH_t1").running_pid() is not None
        assert ("container" in record) == (sandbox_aio["sandbox"] == "docker"), record
    finally:
        policies.cleanup()


def test_doctor_checks_the_stacks_runtime(sandbox_aio, tmp_path):
    """The running runtime passes; the container runtime with an image the engine lacks, or
    an engine that does not answer, is an error that says so."""
    swift_dir = Path(sandbox_aio["swift_dir"])
    proxy, objects = find_configs([str(swift_dir)])
    found = [f for f in diagnose(proxy, objects) if "sandbox:" in f.what]
    runtime = "docker" if sandbox_aio["sandbox"] == "docker" else "bubblewrap"
    assert [f.level for f in found] == ["ok"] and found[0].what.startswith(runtime), found
    if runtime == "docker":
        conf = (swift_dir / "storlet-gateway.conf").read_text()
        broken = tmp_path / "gateway.conf"
        broken.write_text(conf.replace("localhost/iostack-storlet:", "localhost/missing:"))
        [finding] = check_gateway("iostack_docker", str(broken))
        assert finding.level == "error" and "localhost/missing:" in finding.what, finding
        broken.write_text(conf.replace("podman.sock", "nothing.sock"))
        [finding] = check_gateway("iostack_docker", str(broken))
        assert finding.level == "error" and "does not answer" in finding.what, finding
