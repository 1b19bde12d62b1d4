"""handler_iostack.so driven like tcmu-runner drives it, against the real
libtcmu.so.2 (tcmu-harness). The kernel here has no TCMU/configfs, so a
real LIO LUN cannot be created; the harness exercises the same callouts."""

from __future__ import annotations

import os
import subprocess

import pytest
from bb_helpers import make_backing

from iostack.block_bridge.native_lib import BUILD_DIR
from iostack.private_files import write_private_text

pytestmark = pytest.mark.integration


def steps(output: str) -> dict[str, str]:
    """The harness prints '<step> ok|FAILED' per step."""
    return {line.rsplit(None, 1)[0]: line.rsplit(None, 1)[1] for line in output.splitlines()
            if line.endswith((" ok", " FAILED"))}


def run_harness(cfgstring: str, data_file, offset: int, config_dir, block_size: int = 512):
    return subprocess.run(
        [str(BUILD_DIR / "tcmu-harness"), str(BUILD_DIR / "handler_iostack.so"), cfgstring,
         str(data_file), str(offset), str(block_size)],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "IOSTACK_TCMU_CONFIG_DIR": str(config_dir)})


@pytest.fixture
def volume(tmp_path, native_build):
    backing = make_backing(tmp_path / "backing.img", 4 << 20)
    conf_dir = tmp_path / "tcmu"
    conf_dir.mkdir()
    key = bytes(range(32)).hex()

    def configure(spec: str) -> None:
        write_private_text(conf_dir / "vol1.conf",
                      f"backing={backing}\nspec={spec}\nfilter_dir={BUILD_DIR / 'filters'}\n")

    configure(f"aes_xts(key={key})>xor(key=0x33)")
    return backing, conf_dir, configure


def test_handler_open_write_read_flush_close_reopen(volume, tmp_path):
    """The device ends up holding xor(AES-XTS(data)), computed independently."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    backing, conf_dir, _ = volume
    data = os.urandom(64 * 1024)
    (tmp_path / "data").write_bytes(data)
    result = run_harness("iostack/vol1", tmp_path / "data", 8192, conf_dir)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "handler IOStack filter stack (subtype iostack)" in result.stdout
    assert "num_lbas 8192 block_size 512 write_cache 1" in result.stdout
    assert steps(result.stdout) == dict.fromkeys(
        ["handler_init", "check_config", "open", "write (3 iovecs)", "read back (2 iovecs)",
         "flush", "close", "reopen", "read after reopen"], "ok")
    stored = backing.read_bytes()[8192:8192 + len(data)]
    for sector in range(0, len(data), 512):
        tweak = ((8192 + sector) // 512).to_bytes(16, "little")
        enc = Cipher(algorithms.AES(bytes(range(32))), modes.XTS(tweak)).encryptor()
        expected = bytes(b ^ 0x33 for b in enc.update(data[sector:sector + 512]))
        assert stored[sector:sector + 512] == expected


def test_handler_rejects_a_bad_volume(volume, tmp_path):
    _, conf_dir, configure = volume
    (tmp_path / "data").write_bytes(bytes(4096))
    missing = run_harness("iostack/nosuch", tmp_path / "data", 0, conf_dir)
    assert missing.returncode != 0 and "nosuch.conf" in missing.stdout
    traversal = run_harness("iostack/../etc", tmp_path / "data", 0, conf_dir)
    assert traversal.returncode != 0 and "may only use letters" in traversal.stdout
    configure("xor(key=1000)")
    bad_spec = run_harness("iostack/vol1", tmp_path / "data", 0, conf_dir)
    assert bad_spec.returncode != 0 and "must be a number in [0, 255]" in bad_spec.stdout


def test_handler_refuses_a_block_size_below_the_stack_alignment(volume, tmp_path):
    _, conf_dir, configure = volume
    configure("aes_xts(key=" + bytes(range(32)).hex() + ",sector=4096)")
    (tmp_path / "data").write_bytes(bytes(4096))
    result = run_harness("iostack/vol1", tmp_path / "data", 0, conf_dir, block_size=512)
    assert result.returncode != 0
    assert steps(result.stdout)["open"] == "FAILED"


def test_handler_refuses_a_volume_file_others_can_read(volume, tmp_path):
    """Security regression: the volume file holds the stack spec, aes_xts key
    included; the handler served one any local user could read."""
    _, conf_dir, _ = volume
    (tmp_path / "data").write_bytes(bytes(4096))
    (conf_dir / "vol1.conf").chmod(0o644)
    result = run_harness("iostack/vol1", tmp_path / "data", 0, conf_dir)
    assert result.returncode != 0
    assert "is readable by others (mode 644)" in result.stdout
    assert "must be 0600" in result.stdout
