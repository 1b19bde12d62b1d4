"""Swift devices on XFS loopback images (``device_fs = xfs``, iostack.aio.devices).

A real loop mount of a real XFS image: it holds more metadata per file than
ext4 (Swift's whole metadata allowance), is mounted once however often the
stack starts, keeps its files across unmount and mount, and ``unmount_all``
leaves nothing mounted; Swift's servers then reserve no space (SAIO's
``disable_fallocate``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from configparser import ConfigParser

import pytest
import xattr

from iostack.aio import devices as aio_devices
from iostack.aio import secrets
from iostack.aio.config import AioConfig
from iostack.aio.devices import DeviceError, mount_xfs, prepare_devices, unmount_all
from iostack.aio.swift import SwiftLayout

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
    with pytest.raises(ValueError, match="device_fs must be one of auto, dir, xfs"):
        AioConfig(state_dir=tmp_path, device_fs="zfs")
    with pytest.raises(ValueError, match="for the all-in-one"):
        AioConfig(state_dir=tmp_path, device_fs="xfs", nodes=3)
    assert AioConfig(state_dir=tmp_path, nodes=3).device_fs == "dir"  # auto: nodes keep dirs


@needs_xfs
@pytest.mark.parametrize("device_fs", ["xfs", "dir"])
def test_a_layout_on_xfs_images_mounts_them_and_reserves_no_space(tmp_path, device_fs):
    config = AioConfig(state_dir=tmp_path, device_fs=device_fs, replicas=2)
    layout = SwiftLayout(config, secrets.load_or_create(tmp_path), "127.0.0.1:11211",
                         "redis://127.0.0.1:6379/0", "amqp://u:p@127.0.0.1:5672/%2F")
    layout.prepare()
    try:
        assert {fs_type(layout.devices_dir / d) for d in layout.device_names} == (
            {"xfs"} if device_fs == "xfs" else {fs_type(tmp_path)})
        # As the SAIO: a PUT declaring max_file_size must not fallocate a sparse image full.
        for server in layout.servers:
            conf = ConfigParser(interpolation=None)
            conf.read(layout.conf_path(server))
            assert conf["DEFAULT"].get("disable_fallocate") == (
                "true" if device_fs == "xfs" else None), server
    finally:
        assert unmount_all(layout.devices_dir) == (
            ["device d1", "device d2"] if device_fs == "xfs" else [])


@needs_xfs
def test_auto_puts_new_devices_on_xfs_and_keeps_them_there(tmp_path):
    devices, warnings = tmp_path / "srv" / "node", []
    assert prepare_devices("auto", devices, ["d1"], warnings) == "xfs" and warnings == []
    try:
        assert fs_type(devices / "d1") == "xfs"
    finally:
        unmount_all(devices)
    # Unmounted, the device is an empty directory again, but its objects are in the image.
    assert prepare_devices("auto", devices, ["d1"], warnings) == "xfs"
    unmount_all(devices)


def test_auto_keeps_objects_where_they_are_and_says_why(tmp_path):
    devices, warnings = tmp_path / "srv" / "node", []
    (devices / "d1" / "objects").mkdir(parents=True)  # a state dir from before: objects in dirs
    assert prepare_devices("auto", devices, ["d1", "d2"], warnings) == "dir"
    assert not (tmp_path / "srv" / "images").exists()
    assert len(warnings) == 1 and "already hold objects" in warnings[0]


def test_auto_falls_back_to_directories_where_the_host_cannot_mount(tmp_path, monkeypatch):
    def refused(device, image):
        image.parent.mkdir(parents=True, exist_ok=True)
        image.write_bytes(b"")  # made, then the mount failed
        raise DeviceError("device_fs xfs: mount failed (root and a free loop device are needed)")

    monkeypatch.setattr(aio_devices, "_xfs_possible", lambda: None)
    monkeypatch.setattr(aio_devices, "mount_xfs", refused)
    devices, warnings = tmp_path / "srv" / "node", []
    assert prepare_devices("auto", devices, ["d1"], warnings) == "dir"
    assert "mount failed" in warnings[0]
    assert list((tmp_path / "srv" / "images").iterdir()) == []  # no half-made image left
    with pytest.raises(DeviceError, match="mount failed"):  # asked for: an error, no fallback
        prepare_devices("xfs", devices, ["d1"], [])
    monkeypatch.setattr(aio_devices, "_xfs_possible", lambda: "not root")
    warnings.clear()
    assert prepare_devices("auto", devices, ["d1"], warnings) == "dir"
    assert "(not root)" in warnings[0]
