"""The nbdkit frontend: fio's nbd engine and libnbd's nbdcopy over a stack."""

from __future__ import annotations

import os
import subprocess

import pytest
from bb_helpers import make_backing, processes_showing, xts_encrypt

from iostack.block_bridge.frontends import NbdExport
from iostack.block_bridge.processes import DaemonError
from iostack.ports import free_port

pytestmark = pytest.mark.integration

SPEC = "xor(key=0x0f)>bitrev"


def bitrev_xor(data: bytes, key: int) -> bytes:
    table = bytes(int(f"{b ^ key:08b}"[::-1], 2) for b in range(256))
    return data.translate(table)


@pytest.fixture
def export(tmp_path, native_build):
    backing = make_backing(tmp_path / "backing.img", 16 << 20)
    started = []

    def start(spec: str = SPEC) -> NbdExport:
        server = NbdExport(backing, spec, free_port(), tmp_path / "nbdkit.log")
        server.start()
        started.append(server)
        return server

    yield backing, start
    for server in started:
        server.stop()


def test_fio_nbd_engine_verifies_through_the_stack(export):
    _, start = export
    server = start()
    result = subprocess.run(
        ["fio", "--name=verify", "--ioengine=nbd", f"--uri={server.uri}", "--rw=randwrite",
         "--bs=4k", "--size=4M", "--iodepth=16", "--verify=crc32c", "--do_verify=1",
         "--verify_fatal=1", "--verify_state_save=0", "--output-format=terse"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "verify" in result.stdout


def test_nbdcopy_round_trip_transformed_backing_and_reopen(export, tmp_path):
    backing, start = export
    data = os.urandom(16 << 20)
    source = tmp_path / "source.img"
    source.write_bytes(data)
    server = start()
    subprocess.run(["nbdcopy", str(source), server.uri], check=True, timeout=60)
    server.stop()
    assert backing.read_bytes() == bitrev_xor(data, 0x0F)
    # A new server over the same file (a reopened volume) reads the plaintext.
    again = start()
    out = tmp_path / "out.img"
    subprocess.run(["nbdcopy", again.uri, str(out)], check=True, timeout=60)
    assert out.read_bytes() == data


def test_bad_spec_stops_nbdkit_with_the_reason(export):
    _, start = export
    with pytest.raises(DaemonError) as err:
        start("xor(key=999)")
    assert "must be a number in [0, 255]" in str(err.value)


def test_an_aes_xts_key_is_never_in_nbdkits_argv(export, tmp_path):
    """Security regression: the spec was an nbdkit argument, so any local user
    read the volume's key in /proc/<pid>/cmdline."""
    backing, start = export
    key = os.urandom(32)
    server = start(f"aes_xts(key={key.hex()})")
    assert processes_showing(key.hex()) == []
    data = os.urandom(1 << 20)
    source = tmp_path / "source.img"
    source.write_bytes(data)
    subprocess.run(["nbdcopy", str(source), server.uri], check=True, timeout=60)
    server.stop()
    assert backing.read_bytes()[:len(data)] == xts_encrypt(key, data, 0)


def test_a_failing_filter_fails_the_nbd_write_with_eio(failing_filters, tmp_path):
    """Regression: a block filter could not fail a write (void transforms), so
    the frontend acknowledged writes that never happened correctly. A filter's
    error-returning transform now fails the NBD request with EIO, the client
    sees it, and the device is untouched."""
    filters = failing_filters
    backing = make_backing(tmp_path / "backing.img", 4 << 20)
    flag = tmp_path / "fail-now"
    server = NbdExport(backing, f"failing(flag={flag})>xor(key=0x0f)", free_port(),
                       tmp_path / "nbdkit.log", filter_dir=filters)
    server.start()
    try:
        source = tmp_path / "source.img"
        source.write_bytes(os.urandom(4 << 20))
        flag.touch()
        failed = subprocess.run(["nbdcopy", str(source), server.uri], capture_output=True,
                                text=True, timeout=60)
        assert failed.returncode != 0
        assert "Input/output error" in failed.stderr, failed.stderr
        assert backing.read_bytes() == bytes(4 << 20)
        flag.unlink()
        subprocess.run(["nbdcopy", str(source), server.uri], check=True, timeout=60)
    finally:
        server.stop()
    assert backing.read_bytes() == bytes(b ^ 0x0F for b in source.read_bytes())
    assert "iostack: Input/output error" in (tmp_path / "nbdkit.log").read_text()
