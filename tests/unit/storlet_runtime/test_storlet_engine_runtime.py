"""The container runtime's pieces without an engine: its seccomp profile, image inputs and tag,
and the limits and binds its containers get."""

from __future__ import annotations

from iostack.storlet_runtime.host.config import SandboxConfig
from iostack.storlet_runtime.host.container import container_limits, container_mounts
from iostack.storlet_runtime.tools.engine_image import image_inputs, image_tag
from iostack.storlet_runtime.tools.engine_seccomp import denied_syscalls, seccomp_profile


def test_the_profile_refuses_what_bubblewrap_refuses_whatever_the_base_allowed():
    denied = denied_syscalls()
    assert {"ptrace", "keyctl", "bpf", "mount", "unshare", "setns"} <= set(denied)
    base = {"defaultAction": "SCMP_ACT_ERRNO", "syscalls": [
        {"names": ["read", "ptrace", "mount"], "action": "SCMP_ACT_ALLOW"},
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {"names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]}
    profile = seccomp_profile(base, denied)
    allowed = {n for r in profile["syscalls"] if r["action"] == "SCMP_ACT_ALLOW"
               for n in r["names"]}
    assert allowed == {"read"}
    assert profile["syscalls"][-1] == {"names": sorted(set(denied)),
                                       "action": "SCMP_ACT_ERRNO", "errnoRet": 1}
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"


def test_the_image_holds_python_its_library_and_logger_and_its_tag_follows_them(tmp_path):
    inputs = image_inputs()
    names = {p.name for p in inputs}
    assert "logger" in names and any(n.startswith("libc.so") for n in names)
    assert any(p.name == "os.py" for p in inputs)
    assert not any("/test/" in str(p) or "site-packages" in str(p) for p in inputs)
    copy = tmp_path / "os.py"
    copy.write_bytes(next(p for p in inputs if p.name == "os.py").read_bytes())
    before = image_tag([copy])
    assert image_tag([copy]) == before
    copy.write_bytes(copy.read_bytes() + b"# changed\n")
    assert image_tag([copy]) != before


def test_containers_get_the_sandboxs_limits_and_read_only_binds():
    cfg = SandboxConfig.from_gateway_conf({
        "sandbox_memory_limit": "512M", "container_pids_limit": "64", "sandbox_cpus": "0.5",
        "sandbox_cpu_seconds": "20", "sandbox_file_size": "8M",
        "sandbox_python_path": "/opt/site", "sandbox_python_packages": "/opt/pkgs/iostack"})
    limits = container_limits(cfg)
    assert (limits["mem_limit"], limits["memswap_limit"], limits["pids_limit"]) == \
        (512 << 20, 512 << 20, 64)
    assert (limits["cpu_quota"], limits["cpu_period"]) == (50_000, 100_000)
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in limits["ulimits"]}
    assert ulimits["cpu"] == (20, 20) and ulimits["nproc"] == (64, 64)
    assert ulimits["fsize"] == (8 << 20, 8 << 20) and ulimits["core"] == (0, 0)
    mounts, python_path = container_mounts(cfg, "/state/storlets/scope-1")
    assert all(m["ReadOnly"] for m in mounts)
    assert {m["Target"]: m["Source"] for m in mounts} == {
        "/var/lib/storlets": "/state/storlets/scope-1",
        "/usr/local/lib/storlets/libsbus.so": cfg.libsbus_path,
        "/usr/local/lib/storlets/python/0": "/opt/site",
        "/usr/local/lib/storlets/packages/iostack": "/opt/pkgs/iostack"}
    assert python_path == "/usr/local/lib/storlets/packages:/usr/local/lib/storlets/python/0"
