"""The LIO backend: targets built through rtslib, served by tcmu-runner with handler_iostack.

The kernel here has no configfs/TCMU, so the end-to-end test skips; the
same path is exercised by (a) a recording rtslib that checks the objects
the exporter builds and tears down, and (b) the real handler driven by
tcmu-harness against the very volume file the exporter writes.
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass

import pytest
from bb_helpers import make_backing

from iostack.block_bridge import exporters
from iostack.block_bridge.access import IscsiAccess
from iostack.block_bridge.exporters import CONFIGFS_TARGET, LioExporter
from iostack.block_bridge.native_lib import BUILD_DIR

pytestmark = pytest.mark.integration


@dataclass
class Volume:
    name: str
    backing: str
    spec: str
    tid: int
    iqn: str


class RecordingRtslib:
    """Stands in for rtslib_fb: records what was created, configured and deleted."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.log: list[tuple] = []
        self.fail_on = fail_on
        outer = self

        class Node:
            kind = "node"

            def __init__(self, *args, **kwargs):
                if outer.fail_on == self.kind:
                    raise RuntimeError(f"{self.kind} refused")
                self.args, self.kwargs = args, kwargs
                outer.log.append(("new", self.kind, args, kwargs))

            def delete(self):
                outer.log.append(("delete", self.kind, self.args))

        class TPG(Node):
            kind = "tpg"

            def set_attribute(self, name, value):
                outer.log.append(("attr", name, value))

            @property
            def enable(self):
                return True

            @enable.setter
            def enable(self, value):
                outer.log.append(("enable", value))

        self.UserBackedStorageObject = type("UserBackedStorageObject", (Node,),
                                            {"kind": "backstore"})
        self.FabricModule = type("FabricModule", (Node,), {"kind": "fabric"})
        self.Target = type("Target", (Node,), {"kind": "target"})
        self.TPG = TPG
        self.LUN = type("LUN", (Node,), {"kind": "lun"})
        self.NetworkPortal = type("NetworkPortal", (Node,), {"kind": "portal"})
        self.MappedLUN = type("MappedLUN", (Node,), {"kind": "mapped_lun"})

        class NodeACL(Node):
            kind = "acl"

            def __setattr__(self, name, value):
                if name.startswith("chap_"):
                    outer.log.append(("acl", self.args[1], name, value))
                super().__setattr__(name, value)

        self.NodeACL = NodeACL


@pytest.fixture
def volume(tmp_path, native_build):
    backing = make_backing(tmp_path / "vol.img", 4 << 20)
    return Volume("vol9", str(backing), "xor(key=0x21)>bitrev", 1,
                  "iqn.2026-11.org.iostack:vol9")


ACCESS = IscsiAccess("iostack", "chap-secret-0123456789",
                     ("iqn.2026-11.org.iostack:host-a", "iqn.2026-11.org.iostack:host-b"))


def exporter_for(tmp_path, rtslib):
    return LioExporter(tmp_path / "tcmu", BUILD_DIR / "filters", BUILD_DIR, "127.0.0.1", 3260,
                       tmp_path / "tcmu-runner.log", ACCESS, rtslib=rtslib)


def test_lio_exporter_builds_a_tcmu_backed_iscsi_target(tmp_path, volume):
    rts = RecordingRtslib()
    exporter = exporter_for(tmp_path, rts)
    exporter.config_dir.mkdir()
    exporter.up(volume)
    new = [(e[1], e[2], e[3]) for e in rts.log if e[0] == "new"]
    assert new[0] == ("backstore", ("vol9",), {"config": "iostack/vol9", "size": 4 << 20})
    assert ("target", new[2][1][1]) == ("target", volume.iqn)
    assert [kind for kind, _, _ in new] == ["backstore", "fabric", "target", "tpg", "lun",
                                           "portal", "acl", "mapped_lun", "acl", "mapped_lun"]
    # Security regression: the TPG had authentication=0 and generated demo-mode
    # ACLs, open to every initiator. Now: CHAP, and a node ACL per listed name.
    assert ("attr", "authentication", "1") in rts.log
    assert ("attr", "generate_node_acls", "0") in rts.log
    assert ("attr", "generate_node_acls", "1") not in rts.log
    for name in ACCESS.initiators:
        assert ("acl", name, "chap_userid", "iostack") in rts.log
        assert ("acl", name, "chap_password", "chap-secret-0123456789") in rts.log
    mapped = [(e[2][0].args[1], e[2][1]) for e in rts.log if e[:2] == ("new", "mapped_lun")]
    assert mapped == [(name, 1) for name in ACCESS.initiators]
    assert rts.log.index(("enable", True)) == len(rts.log) - 1  # open only when guarded
    assert exporter.conf_path("vol9").read_text() == (
        f"backing={volume.backing}\nspec={volume.spec}\nfilter_dir={BUILD_DIR / 'filters'}\n")
    # The spec may hold an aes_xts key: private from the start.
    assert stat.S_IMODE(exporter.conf_path("vol9").stat().st_mode) == 0o600
    assert exporter.url(volume.iqn) == f"iscsi://127.0.0.1:3260/{volume.iqn}/1"
    assert exporter.exported() == ["vol9"]

    exporter.down(volume)
    deleted = [e[1] for e in rts.log if e[0] == "delete"]
    assert deleted == ["target", "backstore"]
    assert not exporter.conf_path("vol9").exists() and exporter.exported() == []


def test_lio_exporter_undoes_a_half_built_target(tmp_path, volume):
    rts = RecordingRtslib(fail_on="lun")
    exporter = exporter_for(tmp_path, rts)
    exporter.config_dir.mkdir()
    with pytest.raises(RuntimeError, match="lun refused"):
        exporter.up(volume)
    assert [e[1] for e in rts.log if e[0] == "delete"] == ["target", "backstore"]
    assert not exporter.conf_path("vol9").exists() and exporter.exported() == []


def test_the_volume_file_the_exporter_writes_serves_io_through_the_handler(tmp_path, volume):
    exporter = exporter_for(tmp_path, RecordingRtslib())
    exporter.config_dir.mkdir()
    exporter.up(volume)
    data = os.urandom(32 * 1024)
    (tmp_path / "data").write_bytes(data)
    result = subprocess.run(
        [str(BUILD_DIR / "tcmu-harness"), str(BUILD_DIR / "handler_iostack.so"),
         "iostack/vol9", str(tmp_path / "data"), "4096", "512"],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "IOSTACK_TCMU_CONFIG_DIR": str(exporter.config_dir)})
    assert result.returncode == 0, result.stdout + result.stderr
    stored = open(volume.backing, "rb").read()[4096:4096 + len(data)]
    assert stored == bytes(int(f"{b ^ 0x21:08b}"[::-1], 2) for b in data)


def test_without_configfs_the_lio_backend_says_why(tmp_path, monkeypatch):
    monkeypatch.setattr(exporters, "CONFIGFS_TARGET", tmp_path / "no-configfs")
    with pytest.raises(exporters.DaemonError, match="configfs"):
        exporter_for(tmp_path, RecordingRtslib()).start()


@pytest.mark.skipif(not CONFIGFS_TARGET.is_dir(),
                    reason="kernel lacks configfs/LIO/TCMU here (no /sys/kernel/config/target); "
                           "the exporter and handler paths are covered by the tests above")
def test_lio_end_to_end(tmp_path, volume):
    from bb_helpers import iscsi_rw

    exporter = exporter_for(tmp_path, None)
    exporter.start()
    try:
        exporter.up(volume)
        data = os.urandom(64 * 1024)
        iscsi_rw(ACCESS, "write", exporter.url(volume.iqn), "4096", data=data)
        assert iscsi_rw(ACCESS, "read", exporter.url(volume.iqn), "4096", str(len(data))) == data
        exporter.down(volume)
    finally:
        exporter.stop()
