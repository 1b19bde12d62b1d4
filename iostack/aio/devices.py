"""Swift devices on XFS loopback images, as Swift's SAIO guide sets them up.

Swift keeps an object's metadata in extended attributes of its file. ext4 holds
one block of them per inode, less than Swift's own limits let a tenant store
(``max_meta_count`` 90 items, ``max_meta_overall_size`` 4 KiB, plus Swift's
and IOStack's sysmeta): such a PUT or POST gets 507, and the proxy then
error-limits the device for a minute, for every tenant. XFS holds 64 KiB per
attribute.

With ``device_fs = xfs`` (``iostack aio start --device-fs xfs``) each device
``srv/node/dN`` is a sparse image ``srv/images/dN.xfs`` (``IMAGE_SIZE``,
made once with ``mkfs.xfs``) loop-mounted at start and unmounted at stop.
It needs root, Debian ``xfsprogs`` and a free loop device; ``dir`` keeps
devices as plain directories of the state dir's filesystem.

The default, ``auto``, decides at every start from what is on disk: devices
that have images stay on them; devices that already hold data as
directories stay directories (their objects are there); new devices go on
XFS when the host allows it (root, ``mkfs.xfs``, ``/dev/loop-control``, and
the mount succeeds), else on directories, and ``aio.json``'s ``warnings``
say why. A cluster's nodes keep directories.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

IMAGE_SIZE = 4 << 30  # bytes, sparse: only what Swift writes takes space
DEVICE_FILESYSTEMS = ("auto", "dir", "xfs")


class DeviceError(ValueError):
    """A device could not be put on XFS; the message says what the host lacks."""


def _run(*argv: str) -> None:
    try:
        subprocess.run(argv, capture_output=True, text=True, check=True, timeout=120)  # noqa: S603
    except FileNotFoundError:
        raise DeviceError(f"device_fs xfs needs {argv[0]} (Debian xfsprogs, util-linux)"
                          ) from None
    except subprocess.CalledProcessError as exc:
        raise DeviceError(f"device_fs xfs: {' '.join(argv)} failed (root and a free loop "
                          f"device are needed): {exc.stderr.strip()}") from None


def mount_xfs(device: Path, image: Path) -> None:
    """Mount ``image`` (created on first use) on the directory ``device``, unless it is."""
    if os.path.ismount(device):
        return
    if not image.exists():
        image.parent.mkdir(parents=True, exist_ok=True)
        with open(image, "wb") as out:
            out.truncate(IMAGE_SIZE)
        _run("mkfs.xfs", "-q", str(image))
    _run("mount", "-o", "loop,noatime", str(image), str(device))


def mounted(devices_dir: Path) -> list[Path]:
    """The devices under ``devices_dir`` that are mount points."""
    if not devices_dir.is_dir():
        return []
    return [d for d in sorted(devices_dir.iterdir()) if os.path.ismount(d)]


def unmount_all(devices_dir: Path, keep: Iterable[Path] = ()) -> list[str]:
    """Unmount every device mounted under ``devices_dir`` but ``keep``; their names."""
    kept = set(keep)
    unmounted = [device for device in mounted(devices_dir) if device not in kept]
    for device in unmounted:
        _run("umount", str(device))
    return [f"device {device.name}" for device in unmounted]


def _xfs_possible() -> str | None:
    """Why devices cannot go on XFS loopback images here; None when they can."""
    if os.geteuid() != 0:
        return "not root"
    if not (shutil.which("mkfs.xfs") and shutil.which("mount")):
        return "no mkfs.xfs (Debian xfsprogs)"
    if not Path("/dev/loop-control").exists():
        return "no loop devices (/dev/loop-control)"
    return None


def prepare_devices(device_fs: str, devices_dir: Path, names: Iterable[str],
                    warnings: list[str]) -> str:
    """Create (and mount) the devices ``names``; the filesystem they are on, ``dir`` or
    ``xfs``. With ``auto``, why they are not on XFS is appended to ``warnings``."""
    images_dir = devices_dir.parent / "images"
    pairs = [(devices_dir / name, images_dir / f"{name}.xfs") for name in names]
    for device, _image in pairs:
        device.mkdir(parents=True, exist_ok=True)
    automatic = device_fs == "auto"
    if automatic:
        device_fs, why = _auto(pairs)
        if why:
            warnings.append(f"Swift's devices are directories ({why}): objects with much "
                            "metadata get 507 where the filesystem holds less than Swift "
                            "allows (ext4)")
    if device_fs == "xfs":
        new_images = [image for _device, image in pairs if not image.exists()]
        try:
            for device, image in pairs:
                mount_xfs(device, image)
        except DeviceError as exc:
            unmount_all(devices_dir)
            for image in new_images:  # made by this attempt: they hold nothing
                image.unlink(missing_ok=True)
            if not automatic or len(new_images) < len(pairs):
                raise  # asked for, or objects already live in an image
            warnings.append(f"Swift's devices are directories: {exc}")
            return "dir"
    return device_fs


def _auto(pairs: list[tuple[Path, Path]]) -> tuple[str, str | None]:
    if any(image.exists() for _device, image in pairs):
        return "xfs", None  # the objects live in the images
    if any(any(device.iterdir()) for device, _image in pairs if not os.path.ismount(device)):
        return "dir", "they already hold objects"
    why = _xfs_possible()
    return ("dir", why) if why else ("xfs", None)
