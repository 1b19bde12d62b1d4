"""Per-scope cgroups on a v1 and a v2 layout (directories standing in for the cgroup
filesystem; the real hierarchy of this machine is used by
tests/integration/storlet_runtime/test_storlet_hostile.py)."""

from __future__ import annotations

from pathlib import Path

from iostack.storlet_runtime.host.cgroups import scope_cgroup


def test_v1_sets_each_controller_below_the_servers_own_group(tmp_path):
    for controller in ("pids", "memory", "cpu"):
        (tmp_path / controller).mkdir()
    group = scope_cgroup("iostack-storlets/abc", "t1-x", 64, 256 << 20, 0.5, fs=tmp_path)
    assert group.version == 1
    own_pids = Path(open("/proc/self/cgroup").read().split("pids:")[1].split("\n")[0])
    pids_dir = tmp_path / "pids" / str(own_pids).lstrip("/") / "iostack-storlets/abc/t1-x"
    assert (pids_dir / "pids.max").read_text() == "64"
    assert str(pids_dir / "cgroup.procs") in group.procs_files
    assert "memory.limit_in_bytes=268435456" in group.describe()
    assert "cpu.cfs_quota_us=50000" in group.describe()
    assert len(group.dirs) == 3


def test_v1_without_some_controllers_says_which_limits_are_missing(tmp_path):
    (tmp_path / "pids").mkdir()
    group = scope_cgroup("root", "s", 10, 1 << 20, 1, fs=tmp_path)
    assert group.version == 1 and len(group.dirs) == 1
    assert "memory (not mounted)" in group.describe() and "cpu (not mounted)" in group.describe()


def test_v2_enables_controllers_on_the_way_down(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    group = scope_cgroup("iostack-storlets/abc", "s", 10, 1 << 20, 2, fs=tmp_path)
    assert group.version == 2
    for level in (tmp_path, tmp_path / "iostack-storlets", tmp_path / "iostack-storlets/abc"):
        assert (level / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    leaf = tmp_path / "iostack-storlets/abc/s"
    assert (leaf / "cpu.max").read_text() == "200000 100000"
    assert (leaf / "memory.swap.max").read_text() == "0"
    assert group.procs_files == [str(leaf / "cgroup.procs")]


def test_no_cgroup_filesystem_means_rlimits_only(tmp_path):
    group = scope_cgroup("root", "s", 10, 1 << 20, 1, fs=tmp_path / "absent")
    assert group.version is None and group.procs_files == []
    assert group.describe().startswith("no cgroup: rlimits only")
