"""How a filtered volume reaches initiators: the two backends of the block bridge.

``TgtFuseExporter`` (hosts without TCMU, and CI): a FUSE file per volume
whose reads and writes run through the filter stack, exported by the
bridge's own userspace ``tgtd``.

``LioExporter`` (production, hosts with configfs and TCMU): a LIO target
whose LUN is a TCMU user backstore, ``user/iostack/<volume>``; the bridge's
``tcmu-runner`` serves it with ``handler_iostack.so``, which reads the
volume's backing device, stack spec and filter directory from
``<tcmu_config_dir>/<volume>.conf`` (the kernel caps cfgstrings at 256
bytes, so the spec lives in that file). LIO is driven through rtslib
(``rtslib-fb``), the library targetcli uses.

Both require CHAP with the bridge's account and admit only the initiator
names of its ``IscsiAccess`` (``access``): tgt binds the account and a name
ACL per target; LIO gets a node ACL per initiator with the CHAP pair,
``authentication=1`` and no generated (demo-mode) ACLs.

Both expose the same small interface to ``VolumeManager``: ``start``,
``stop``, ``up(record)``, ``down(record)``, ``device(name)``, ``url(iqn)``
and ``exported()``.
"""

from __future__ import annotations

import importlib
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any, Protocol

from iostack.private_files import write_private_text

from .access import IscsiAccess
from .frontends import FuseVolume
from .processes import Daemon, DaemonError
from .tgt import Tgtd

CONFIGFS_TARGET = Path("/sys/kernel/config/target")


class VolumeLike(Protocol):
    name: str
    backing: str
    spec: str
    tid: int
    iqn: str


class TgtFuseExporter:
    def __init__(self, tgtd: Tgtd, volumes_dir: Path, filter_dir: Path) -> None:
        self.tgtd = tgtd
        self.volumes_dir = volumes_dir
        self.filter_dir = filter_dir
        self.frontends: dict[str, FuseVolume] = {}

    def start(self) -> None:
        self.tgtd.start()

    def stop(self) -> None:
        self.tgtd.stop()

    def up(self, record: VolumeLike) -> None:
        volume_dir = self.volumes_dir / record.name
        frontend = FuseVolume(volume_dir / "mnt", Path(record.backing), record.spec,
                              volume_dir / "fuse.log", filter_dir=self.filter_dir)
        frontend.start()
        try:
            self.tgtd.export(record.tid, record.iqn, frontend.path)
        except Exception:
            frontend.stop()
            raise
        self.frontends[record.name] = frontend

    def down(self, record: VolumeLike) -> None:
        """Unexport, then stop the frontend (tgt must let go of the file first)."""
        if record.tid in self.tgtd.target_ids():
            self.tgtd.remove(record.tid)
        self.frontends.pop(record.name).stop()

    def device(self, name: str) -> str:
        return str(self.frontends[name].path)

    def url(self, iqn: str) -> str:
        return self.tgtd.url(iqn)

    def exported(self) -> list[str]:
        return list(self.frontends)


def device_size(path: str) -> int:
    """Bytes of a regular file or a block device."""
    with open(path, "rb") as f:
        if stat.S_ISBLK(os.fstat(f.fileno()).st_mode):
            return f.seek(0, os.SEEK_END)
    return os.path.getsize(path)


class LioExporter:
    def __init__(self, config_dir: Path, filter_dir: Path, handler_dir: Path,
                 portal_host: str, portal_port: int, log_path: Path, access: IscsiAccess,
                 rtslib: Any = None) -> None:
        self.access = access
        self.config_dir = config_dir
        self.filter_dir = filter_dir
        self.handler_dir = handler_dir
        self.portal_host = portal_host
        self.portal_port = portal_port
        self.log_path = log_path
        self._rtslib = rtslib  # injected by tests; rtslib_fb otherwise
        self.runner: Daemon | None = None
        self.volumes: set[str] = set()

    @property
    def rtslib(self) -> Any:
        if self._rtslib is None:
            self._rtslib = importlib.import_module("rtslib_fb")
        return self._rtslib

    def start(self) -> None:
        if not CONFIGFS_TARGET.is_dir():
            raise DaemonError("the LIO backend needs configfs with the target core "
                              f"({CONFIGFS_TARGET} is missing): load target_core_user, or use "
                              "the tgt backend")
        binary = shutil.which("tcmu-runner")
        if binary is None:
            raise DaemonError("tcmu-runner is not installed (Debian package tcmu-runner)")
        self.config_dir.mkdir(parents=True, exist_ok=True)
        self.runner = Daemon([binary, "--handler-path", str(self.handler_dir)],
                             self.log_path, "tcmu-runner")
        os.environ["IOSTACK_TCMU_CONFIG_DIR"] = str(self.config_dir)  # inherited by tcmu-runner
        self.runner.start()
        # tcmu-runner has no readiness signal of its own; one that cannot start
        # (no TCMU netlink family, handler refused) exits at once.
        time.sleep(0.5)
        if self.runner.proc.poll() is not None:
            raise DaemonError(f"tcmu-runner exited at start; see {self.log_path}")

    def stop(self) -> None:
        if self.runner is not None:
            self.runner.stop()

    def conf_path(self, name: str) -> Path:
        return self.config_dir / f"{name}.conf"

    def up(self, record: VolumeLike) -> None:
        rts = self.rtslib
        conf = self.conf_path(record.name)
        # 0600: the spec may hold an aes_xts key (the handler refuses a readable file).
        write_private_text(conf, f"backing={record.backing}\nspec={record.spec}\n"
                            f"filter_dir={self.filter_dir}\n")
        created: list[Any] = []
        try:
            backstore = rts.UserBackedStorageObject(
                record.name, config=f"iostack/{record.name}",
                size=device_size(record.backing))
            created.append(backstore)
            target = rts.Target(rts.FabricModule("iscsi"), record.iqn)
            created.append(target)
            tpg = rts.TPG(target, 1)
            lun = rts.LUN(tpg, 1, backstore)
            rts.NetworkPortal(tpg, self.portal_host, self.portal_port)
            # The listed initiators only, each with the CHAP pair; no demo-mode ACLs.
            for attribute, value in (("authentication", "1"), ("generate_node_acls", "0")):
                tpg.set_attribute(attribute, value)
            for name in self.access.initiators:
                acl = rts.NodeACL(tpg, name)
                acl.chap_userid = self.access.chap_user
                acl.chap_password = self.access.chap_password
                rts.MappedLUN(acl, 1, lun)
            tpg.enable = True
        except Exception:
            for obj in reversed(created):
                obj.delete()
            conf.unlink(missing_ok=True)
            raise
        self.volumes.add(record.name)

    def down(self, record: VolumeLike) -> None:
        rts = self.rtslib
        rts.Target(rts.FabricModule("iscsi"), record.iqn, mode="lookup").delete()
        rts.UserBackedStorageObject(record.name).delete()
        self.conf_path(record.name).unlink(missing_ok=True)
        self.volumes.discard(record.name)

    def device(self, name: str) -> str:
        return f"user/iostack/{name}"

    def url(self, iqn: str) -> str:
        return f"iscsi://{self.portal_host}:{self.portal_port}/{iqn}/1"

    def exported(self) -> list[str]:
        return sorted(self.volumes)
