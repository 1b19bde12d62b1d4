"""Swift devices on XFS loopback images (``device_fs = xfs``, iostack.aio.devices).

A real loop mount of a real XFS image: it holds more metadata per file than
ext4 (Swift's whole metadata allowance), is mounted once however often the
stack starts, keeps its files across unmount and mount, and ``unmount_all``
leaves nothing mounted.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
import xattr

from iostack.aio.config import AioConfig
from iostack.aio.devices import mount_xfs, unmount_all

pytestmark = pytest.mark.integration
needs_xfs = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mkfs.xfs"),
                               reason="loop-mounting XFS needs root and mkfs.xfs (Debian xfsprogs)")


def fs_type(path) -> str:
    return subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True,  # noqa: S603, S607
                          text=True, check=True).stdout.strip()


@needs_xfs
def test_an_xfs_device_holds_more_metadata_than_ext4_and_keeps_it(tmp_path):
    devices = tmp_path / "srv" / "node"
    device = devices / "d1"
    device.mkdir(parents=True)
    image = tmp_path / "srv" / "images" / "d1.xfs"
    mount_xfs(device, image)
    try:
        mount_xfs(device, image)  # a second start finds it mounted
        assert fs_type(device) == "xfs"
        obj = device / "object.data"
        obj.write_bytes(b"body")
        # More than one 4 KiB block of attributes: ext4 refuses this (ENOSPC), Swift 507s.
        xattr.setxattr(str(obj), "user.swift.metadata", b"m" * 16384)
    finally:
        assert unmount_all(devices) == ["device d1"]
    assert not os.path.ismount(device)
    assert unmount_all(devices) == []
    mount_xfs(device, image)  # the image keeps what was written
    try:
        assert xattr.getxattr(str(device / "object.data"), "user.swift.metadata") == b"m" * 16384
    finally:
        unmount_all(devices)


def test_device_fs_is_checked(tmp_path):
    with pytest.raises(ValueError, match="device_fs must be one of dir, xfs"):
        AioConfig(state_dir=tmp_path, device_fs="zfs")
    with pytest.raises(ValueError, match="for the all-in-one"):
        AioConfig(state_dir=tmp_path, device_fs="xfs", nodes=3)
