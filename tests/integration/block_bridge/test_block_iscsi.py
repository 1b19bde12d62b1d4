"""A filtered volume over iSCSI: FUSE frontend + tgt + libiscsi initiators."""

from __future__ import annotations

import os

import pytest
from bb_helpers import compliance, iscsi_rw, make_backing

from iostack.block_bridge.frontends import FuseVolume

pytestmark = pytest.mark.integration

SPEC = "xor(key=0x0f)>bitrev"
SUITES = ["Inquiry", "ReadCapacity10", "ReadCapacity16", "Read10", "Read16", "Write10",
          "Write16", "Verify10", "Verify16", "WriteVerify10", "WriteVerify16"]


def bitrev_xor(data: bytes, key: int) -> bytes:
    return bytes(int(f"{b ^ key:08b}"[::-1], 2) for b in data)


@pytest.fixture
def fuse_volume(tmp_path, native_build):
    backing = make_backing(tmp_path / "backing.img")
    volume = FuseVolume(tmp_path / "mnt", backing, SPEC, tmp_path / "fuse.log")
    volume.start()
    yield backing, volume
    volume.stop()


def test_data_round_trip_backing_holds_transformed_bytes_and_reopen(tgtd, tmp_path,
                                                                    fuse_volume):
    backing, volume = fuse_volume
    iqn = "iqn.2026-11.org.iostack:roundtrip"
    tgtd.export(10, iqn, volume.path)
    url = tgtd.url(iqn)
    data = os.urandom(256 * 1024)
    try:
        assert iscsi_rw(tgtd.access, "size", url).split() == [str(16 << 20).encode(), b"512"]
        iscsi_rw(tgtd.access, "write", url, str(1 << 20), data=data)
        assert iscsi_rw(tgtd.access, "read", url, str(1 << 20), str(len(data))) == data
        with open(backing, "rb") as f:
            f.seek(1 << 20)
            assert f.read(len(data)) == bitrev_xor(data, 0x0F)
    finally:
        tgtd.remove(10)
    # Reopen: a fresh FUSE daemon and target over the same backing file.
    volume.stop()
    again = FuseVolume(tmp_path / "mnt2", backing, SPEC, tmp_path / "fuse2.log")
    again.start()
    try:
        tgtd.export(11, iqn + "2", again.path)
        url2 = tgtd.url(iqn + "2")
        assert iscsi_rw(tgtd.access, "read", url2, str(1 << 20), str(len(data))) == data
    finally:
        tgtd.remove(11)
        again.stop()


def test_compliance_suites_match_a_plain_file_lun(tgtd, tmp_path, fuse_volume):
    _, volume = fuse_volume
    plain = make_backing(tmp_path / "plain.img")
    tgtd.export(20, "iqn.2026-11.org.iostack:plain", plain)
    tgtd.export(21, "iqn.2026-11.org.iostack:filtered", volume.path)
    try:
        baseline = compliance(tgtd.access, tgtd.url("iqn.2026-11.org.iostack:plain"), SUITES)
        filtered = compliance(tgtd.access, tgtd.url("iqn.2026-11.org.iostack:filtered"), SUITES)
    finally:
        tgtd.remove(20)
        tgtd.remove(21)
    passed = [name for name, status in filtered.items() if status == "passed"]
    assert len(passed) >= 40, filtered
    assert {s.split(".")[0] for s in passed} == set(SUITES)
    assert filtered == baseline
