"""Volume request checks that need no daemons: devices by path or serial,
filters as list or spec."""

from __future__ import annotations

import json

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


def test_the_bridges_own_state_is_never_a_backing_device(tmp_path, filter_dir):
    """Security regression: any file under <state>/block was exportable, among
    them volumes.json, which holds the AES-XTS keys of every volume."""
    state = tmp_path / "state"
    manager = VolumeManager(state, exporter=None, filter_dir=filter_dir,
                            iqn_prefix="iqn.2026-11.org.iostack",
                            allowed_devices=[str(state)])  # an operator listing too much
    keys = state / "block" / "volumes.json"
    keys.write_text("[]")
    link = manager.images / "innocent.img"
    link.symlink_to(keys)
    for device in (keys, link, state / "block" / "own.img"):
        if not device.exists():
            device.write_bytes(bytes(4096))
        with pytest.raises(VolumeError) as err:
            manager._resolve_device(str(device), None)
        assert "the bridge's own state" in str(err.value)
    image = manager.images / "disk.img"
    image.write_bytes(bytes(4096))
    assert manager._resolve_device(str(image), None) == image
    assert manager.images == state / "block-images"


class Recorder:
    def __init__(self):
        self.up_names = []

    def up(self, record):
        self.up_names.append(record.name)


def test_restore_puts_every_record_through_the_create_checks(tmp_path, filter_dir):
    """Security regression: restore() re-exported whatever volumes.json said,
    so an edited record exported the bridge's own files or a host disk."""
    state = tmp_path / "state"
    exporter = Recorder()
    manager = VolumeManager(state, exporter=exporter, filter_dir=filter_dir,
                            iqn_prefix="iqn.2026-11.org.iostack", allowed_devices=[])
    good = manager.images / "good.img"
    good.write_bytes(bytes(4096))
    host = tmp_path / "host-disk"
    host.write_bytes(bytes(4096))
    keys = state / "block" / "volumes.json"

    def record(name, backing, filters=("xor(key=1)",)):
        return {"name": name, "backing": str(backing), "spec": ">".join(filters),
                "filters": list(filters), "tid": 9, "iqn": f"iqn.x:{name}"}

    keys.write_text(json.dumps([
        record("good", good), record("keys", keys), record("host", host),
        record("../evil", good), record("twin", good), record("badstack", good, ("nosuch",)),
        {"name": "short"}, 7,
    ]))
    problems = manager.restore()
    assert exporter.up_names == ["good"]
    assert manager.targets() == {"iqn.2026-11.org.iostack:good"}  # IQN rebuilt, not trusted
    assert len(problems) == 7
    joined = "\n".join(problems)
    for text in ("own state", "outside the allowed", "name must match", "already used",
                 "unknown filter", "malformed"):
        assert text in joined
    assert [r["name"] for r in json.loads(keys.read_text())] == ["good"]
