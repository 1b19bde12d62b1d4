"""Isolation of the bubblewrap sandbox, observed from inside by a probe storlet.

Each test runs ``isolation_probe.py`` on a small object through the real
all-in-one (proxy -> object server -> gateway -> sandbox) and checks what it
reports. Limits come from the all-in-one's gateway config
(``iostack.storlet_runtime.swift_conf``): 1 GiB address space, 128 processes,
an 8 s request timeout.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from iostack.storlet_runtime.swift_conf import STORLET_TIMEOUT

pytestmark = pytest.mark.integration

PROBE = {"X-Run-Storlet": "isolation_probe.py"}


@pytest.fixture(scope="module")
def probe(storlet_tenant):
    assert storlet_tenant.put("probe-input", b"input of the probe").status_code == 201

    def run(check: str, **params: str) -> dict:
        resp = storlet_tenant.get("probe-input", PROBE, params={"check": check, **params})
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


def test_host_files_are_invisible(probe, aio):
    swift_conf = str(Path(aio["swift_dir"]) / "proxy-server.conf")
    hidden = [swift_conf, aio["state_dir"], "/root", "/etc/passwd", "/work", "/home",
              str(Path(__file__))]
    result = probe("files", paths=",".join(hidden + ["/usr/bin/python3", "/var/lib/storlets"]))
    assert {path: result[path] for path in hidden} == dict.fromkeys(hidden, False)
    assert result["/usr/bin/python3"] and result["/var/lib/storlets"]  # the probe can look


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


def test_fork_bomb_is_contained(probe, storlet_tenant):
    result = probe("forkbomb")
    assert result["refused"] == "EAGAIN"
    assert result["forks"] < 128
    time.sleep(2.5)  # the bomb's children exit; the sandbox serves again
    resp = storlet_tenant.get("probe-input", PROBE, params={"check": "echo"})
    assert resp.status_code == 200
    assert resp.content == b"input of the probe"


@pytest.mark.parametrize("where", ["object", "proxy"])
def test_hung_storlet_times_out_and_next_request_is_served(storlet_tenant, where):
    run = {**PROBE, "X-Storlet-Run-On-Proxy": ""} if where == "proxy" else dict(PROBE)
    start = time.monotonic()
    resp = storlet_tenant.get("probe-input", run, params={"check": "loop"})
    elapsed = time.monotonic() - start
    assert resp.status_code >= 500, resp.text
    assert elapsed < STORLET_TIMEOUT + 5
    if where == "proxy":
        assert b"did not answer within" in resp.content
    after = storlet_tenant.get("probe-input", run, params={"check": "echo"})
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
