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
It needs root, Debian ``xfsprogs`` and a free loop device; the default,
``dir``, keeps devices as plain directories of the state dir's filesystem.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

IMAGE_SIZE = 4 << 30  # bytes, sparse: only what Swift writes takes space
DEVICE_FILESYSTEMS = ("dir", "xfs")


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


def unmount_all(devices_dir: Path) -> list[str]:
    """Unmount every device mounted under ``devices_dir``; their names."""
    if not devices_dir.is_dir():
        return []
    mounted = [d for d in sorted(devices_dir.iterdir()) if os.path.ismount(d)]
    for device in mounted:
        _run("umount", str(device))
    return [f"device {device.name}" for device in mounted]
