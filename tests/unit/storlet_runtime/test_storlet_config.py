"""Gateway config parsing for the bubblewrap sandbox."""

from __future__ import annotations

import os

import pytest

from iostack.storlet_runtime.host.config import SandboxConfig, SandboxConfigError, parse_size


@pytest.mark.parametrize(("text", "expected"), [
    ("1024", 1024), ("64K", 64 << 10), ("512m", 512 << 20), ("1G", 1 << 30),
    ("2GiB", 2 << 30), (" 3 M ", 3 << 20),
])
def test_sizes(text, expected):
    assert parse_size("k", text) == expected


@pytest.mark.parametrize("text", ["", "1.5G", "-1", "lots", "1X"])
def test_bad_sizes_name_the_key(text):
    with pytest.raises(SandboxConfigError, match="sandbox_tmp_size"):
        SandboxConfig.from_gateway_conf({"sandbox_tmp_size": text})


def test_defaults():
    cfg = SandboxConfig.from_gateway_conf({})
    assert cfg.mem_limit == 1 << 30
    assert cfg.cpu_seconds == 60 and cfg.pids_limit == 128
    assert cfg.python == "/usr/bin/python3"
    assert cfg.libsbus_path.endswith("build/storlet_runtime/libsbus.so")
    # The agent's Python path holds the storlets package; iostack is shared alone, not its
    # checkout (which holds the all-in-one's state and secrets).
    assert any(os.path.isdir(os.path.join(p, "storlets", "agent")) for p in cfg.python_path)
    assert [os.path.basename(p) for p in cfg.python_packages] == ["iostack"]
    assert not any(os.path.exists(os.path.join(p, "pyproject.toml")) for p in cfg.python_path)
    assert cfg.seccomp_path.endswith("build/storlet_runtime/sandbox-seccomp.bpf")
    assert cfg.cgroup_memory == cfg.mem_limit and cfg.cpus == 1.0
    if os.geteuid() == 0:  # each scope gets its own uid from the reserved range
        assert (cfg.uid_base, cfg.uid_count) == (1_700_000_000, 65536)


@pytest.mark.parametrize(("key", "value"), [
    ("sandbox_cpu_seconds", "0"), ("sandbox_cpu_seconds", "ten"), ("container_pids_limit", "-3"),
])
def test_bad_numbers(key, value):
    with pytest.raises(SandboxConfigError, match=key):
        SandboxConfig.from_gateway_conf({key: value})


def test_one_shared_sandbox_user_is_no_longer_accepted():
    """Regression: every scope ran as ``sandbox_user`` (nobody), sharing its process limit."""
    with pytest.raises(SandboxConfigError, match="sandbox_user: no longer used"):
        SandboxConfig.from_gateway_conf({"sandbox_user": "nobody"})


@pytest.mark.parametrize(("key", "value", "match"), [
    ("sandbox_uid_base", "0", "sandbox_uid_base"),
    ("sandbox_uid_count", "4294967295", "exceeds the uid space"),
    ("sandbox_cpus", "-1", "sandbox_cpus"), ("sandbox_cpus", "many", "sandbox_cpus"),
    ("sandbox_cgroup_root", "../escape", "sandbox_cgroup_root"),
])
def test_bad_identity_and_cgroup_settings(key, value, match):
    with pytest.raises(SandboxConfigError, match=match):
        SandboxConfig.from_gateway_conf({key: value})


def test_parsed_once_per_distinct_config():
    from iostack.storlet_runtime.host.config import sandbox_config

    first = sandbox_config({"sandbox_cpu_seconds": "5"})
    assert sandbox_config({"sandbox_cpu_seconds": "5"}) is first
    assert sandbox_config({"sandbox_cpu_seconds": "6"}).cpu_seconds == 6
