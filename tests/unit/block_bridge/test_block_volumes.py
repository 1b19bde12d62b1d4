"""Volume request checks that need no daemons: devices by path or serial,
filters as list or spec."""

from __future__ import annotations

import pytest

from iostack.block_bridge import volumes
from iostack.block_bridge.volumes import VolumeError, VolumeManager, spec_from_filters


@pytest.fixture
def manager(tmp_path, filter_dir):
    devices = tmp_path / "dev"
    devices.mkdir()
    return VolumeManager(tmp_path / "state", exporter=None, filter_dir=filter_dir,
                         iqn_prefix="iqn.2026-11.org.iostack", allowed_devices=[str(devices)])


def test_serial_resolves_through_disk_by_id(manager, tmp_path, monkeypatch):
    disk = tmp_path / "dev" / "sdz"
    disk.write_bytes(bytes(4096))
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    (by_id / "scsi-0MPSTOR_vol_SER123").symlink_to(disk)
    (by_id / "scsi-0MPSTOR_vol_SER999").symlink_to(disk)
    monkeypatch.setattr(volumes, "BY_ID", by_id)
    assert manager._resolve_device(None, "SER123") == disk
    with pytest.raises(VolumeError) as err:
        manager._resolve_device(None, "NOPE")
    assert err.value.kind == "not_found"
    with pytest.raises(VolumeError) as err:
        manager._resolve_device(None, "SER*")
    assert "bad serial" in str(err.value)


def test_devices_outside_the_allowed_places_or_not_devices_are_refused(manager, tmp_path):
    (tmp_path / "dev" / "dir").mkdir()
    outside = tmp_path / "elsewhere.img"
    outside.write_bytes(b"x")
    link = tmp_path / "dev" / "sneaky"
    link.symlink_to(outside)
    for device, text in [(str(outside), "outside the allowed"),
                         (str(link), "outside the allowed"),
                         (str(tmp_path / "dev" / "dir"), "not a block device or file"),
                         ("relative.img", "absolute path"),
                         (str(tmp_path / "dev" / "missing"), "No such file")]:
        with pytest.raises(VolumeError) as err:
            manager._resolve_device(device, None)
        assert text in str(err.value)


@pytest.mark.parametrize(
    ("filters", "spec"),
    [(["xor(key=1)", " bitrev "], "xor(key=1)>bitrev"), ("xor>bitrev", "xor>bitrev"),
     ([], ""), ("", "")],
)
def test_filters_as_list_or_spec(filters, spec):
    assert spec_from_filters(filters)[0] == spec


@pytest.mark.parametrize("filters", [["xor>bitrev"], [""], {"xor": 1}, "xor>>bitrev"])
def test_malformed_filter_lists(filters):
    with pytest.raises(VolumeError):
        spec_from_filters(filters)


def test_a_listed_device_link_allows_the_device_it_names_and_nothing_beside_it(tmp_path,
                                                                                filter_dir):
    disks = tmp_path / "disks"
    disks.mkdir()
    for name in ("sdb", "sdc"):
        (disks / name).write_bytes(bytes(4096))
    by_id = tmp_path / "by-id"
    by_id.mkdir()
    (by_id / "wwn-0x5000").symlink_to(disks / "sdb")
    manager = VolumeManager(tmp_path / "state", exporter=None, filter_dir=filter_dir,
                            iqn_prefix="iqn.2026-11.org.iostack",
                            allowed_devices=[str(by_id / "wwn-0x5000")])
    assert manager._resolve_device(str(by_id / "wwn-0x5000"), None) == disks / "sdb"
    with pytest.raises(VolumeError, match="outside the allowed"):
        manager._resolve_device(str(disks / "sdc"), None)
