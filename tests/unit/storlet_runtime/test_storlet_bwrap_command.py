"""The bubblewrap command line: what is shared with the sandbox and what is not."""

from __future__ import annotations

import pytest

from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.host.sandbox import bwrap_command


@pytest.fixture
def argv():
    cfg = SandboxConfig.from_gateway_conf({
        "sandbox_python_path": "/opt/site:/opt/more", "sandbox_python_packages": "/src/iostack",
        "sandbox_memory_limit": "256M",
        "sandbox_cpu_seconds": "7", "container_pids_limit": "33", "sandbox_tmp_size": "8M",
    })
    return bwrap_command(cfg, "t1", "/h/storlets/t1", "tenant_t1", "ERROR", 7)


def pairs(argv, flag):
    """Arguments following each occurrence of ``flag`` (two for binds)."""
    return [tuple(argv[i + 1:i + 3]) for i, a in enumerate(argv) if a == flag]


def test_limits_are_set_before_bwrap(argv):
    bwrap = argv.index("/usr/bin/bwrap")
    limits = argv[:bwrap]
    assert limits[0] == "/usr/bin/prlimit"
    assert {"--as=268435456", "--cpu=7", "--nproc=33", "--core=0"} <= set(limits)


def test_namespaces_and_privileges(argv):
    for flag in ("--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
                 "--new-session", "--clearenv"):
        assert flag in argv
    assert "--share-net" not in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"


def test_only_the_scope_directories_are_mounted(argv):
    binds = dict((dst, src) for src, dst in pairs(argv, "--bind"))
    ro_binds = dict((dst, src) for src, dst in pairs(argv, "--ro-bind"))
    assert binds == {}  # nothing of the host is writable inside, not even a log socket
    assert ro_binds["/var/lib/storlets"] == "/h/storlets/t1"
    assert ro_binds["/usr"] == "/usr"
    assert ro_binds["/usr/local/lib/storlets/python/0"] == "/opt/site"
    assert ro_binds["/usr/local/lib/storlets/python/1"] == "/opt/more"
    assert ro_binds["/usr/local/lib/storlets/packages/iostack"] == "/src/iostack"
    mounted = set(binds.values()) | set(ro_binds.values())
    assert not any(src in mounted for src in ("/", "/etc", "/root", "/home", "/var", "/tmp"))


def test_channels_live_on_a_private_capped_tmpfs_and_dev_log_is_theirs(argv):
    """Regression: the channels were a 0777 host directory bound in, and /dev/log the host's."""
    channels = argv.index("/mnt/channels")
    assert argv[channels - 5:channels + 1] == [
        "--perms", "0700", "--size", str(1 << 20), "--tmpfs", "/mnt/channels"]
    assert ("/mnt/channels/log", "/dev/log") in pairs(argv, "--symlink")
    assert "/dev/log" not in [src for src, _ in pairs(argv, "--bind") + pairs(argv, "--ro-bind")]


def test_seccomp_program_comes_through_the_given_descriptor(argv):
    assert argv[argv.index("--seccomp") + 1] == "7"


def test_read_only_root_and_private_tmp(argv):
    assert argv[argv.index("--tmpfs") - 2:argv.index("--tmpfs") + 2] == [
        "--size", str(8 << 20), "--tmpfs", "/tmp"]
    remounts = [argv[i + 1] for i, a in enumerate(argv) if a == "--remount-ro"]
    assert remounts[-1] == "/"
    # Root is made read-only after everything is mounted into it.
    assert argv.index("--remount-ro") > max(i for i, a in enumerate(argv) if "bind" in a)


def test_agent_command(argv):
    agent = argv[argv.index("/usr/bin/python3"):]
    assert agent == ["/usr/bin/python3", "-m", "iostack.storlet_runtime.agent",
                     "/mnt/channels/log", "--",
                     "/usr/bin/python3", "-m", "iostack.storlet_runtime.daemon_factory",
                     "/mnt/channels/factory_pipe", "ERROR", "tenant_t1"]
    env = pairs(argv, "--setenv")
    assert ("PYTHONPATH", "/usr/local/lib/storlets/packages:/usr/local/lib/storlets/python/0:"
            "/usr/local/lib/storlets/python/1") in env
