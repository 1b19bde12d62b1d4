"""libiostack through ctypes: spec parsing, stack order, pre_read/doRead,
doWrite=false, unaligned I/O, private per-volume filter instances and the
bare Konnector ABI."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from iostack.block_bridge.native_lib import Stack, StackError, validate


def bitrev(data: bytes) -> bytes:
    return bytes(int(f"{b:08b}"[::-1], 2) for b in data)


def xor(data: bytes, key: int) -> bytes:
    return bytes(b ^ key for b in data)


def on_disk(path, offset: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("xor>", "column 5: expected a filter name, found end of spec"),
        ("xor(key=1", "column 10: expected ')'"),
        ("xor bitrev", "column 5: expected '>' or '('"),
        ("xor((key=1)", "column 5: expected ')', found '('"),
        (">xor", "column 1: expected a filter name"),
        ("nosuch", "unknown filter 'nosuch'"),
        ("../xor", "column 1: expected a filter name, found '.'"),
        ("xor(key=256)", "must be a number in [0, 255]"),
        ("xor(colour=red)", "unknown argument 'colour' (xor takes: key)"),
        ("bitrev(x=1)", "bitrev takes no arguments"),
        ("nop(a=1, b=2)", "nop takes no arguments, got 'a'"),
        ("nop(1)", "expected key=value"),
        ("iops(read=fast)", "read='fast' is not a number"),
        ("aes_xts", "aes_xts needs key=<hex>"),
        ("aes_xts(key=" + "00" * 32 + ")", "halves of an XTS key must differ"),
        ("aes_xts(key=abc)", "64 (AES-128-XTS) or 128 (AES-256-XTS) hex digits"),
        ("prefetch>xor", "must be last (bottom)"),
        ("ccache(size=1)", "size='1' must be a number in [4096,"),
        ("ccache(level=10)", "level='10' must be a number in [1, 9]"),
        ("ccache(colour=red)", "unknown argument 'colour' (ccache takes: size, level)"),
        ("dcache(level=1)", "unknown argument 'level' (dcache takes: size)"),
    ],
)
def test_bad_specs_are_rejected_with_the_reason(filter_dir, spec, message):
    with pytest.raises(StackError) as err:
        validate(spec, filter_dir)
    assert message in str(err.value)


def test_good_spec_validates_and_empty_spec_is_the_raw_device(filter_dir, backing):
    validate(" xor(key=0x5a) > bitrev >iops(read=500, write=200) ", filter_dir)
    # Konnector's own argument form, as in its policy field "rit 10, wit 10".
    validate("iops(rit 10, wit 10)>bw(rbt 10, wbt 5)>xor(key = 3)", filter_dir)
    path, fd = backing
    with Stack("", fd, filter_dir) as stack:
        assert stack.filters == []
        stack.write(b"plain", 10)
    assert on_disk(path, 10, 5) == b"plain"


def test_writes_go_top_to_bottom_and_reads_come_back(filter_dir, backing):
    path, fd = backing
    data = os.urandom(8192)
    with Stack("xor(key=0x5a)>bitrev", fd, filter_dir) as stack:
        assert stack.filters == ["xor", "bitrev"]
        stack.write(data, 4096)
        assert stack.read(8192, 4096) == data
    # xor is on top, so it runs first on the way down: device = bitrev(xor(data)).
    assert on_disk(path, 4096, 8192) == bitrev(xor(data, 0x5A))


def test_reversed_order_stores_different_bytes(filter_dir, backing):
    path, fd = backing
    data = bytes(range(256))
    # Not 0x5a: its bits read the same both ways, so it commutes with bitrev.
    with Stack("bitrev>xor(key=0x0f)", fd, filter_dir) as stack:
        stack.write(data, 0)
    assert on_disk(path, 0, 256) == xor(bitrev(data), 0x0F)
    assert xor(bitrev(data), 0x0F) != bitrev(xor(data, 0x0F))


def test_reopened_volume_reads_what_was_written(filter_dir, backing):
    _, fd = backing
    data = os.urandom(5000)
    with Stack("xor(key=7)>bitrev", fd, filter_dir) as stack:
        stack.write(data, 12345)
    with Stack("xor(key=7)>bitrev", fd, filter_dir) as stack:
        assert stack.read(5000, 12345) == data


def test_plain_dlopen_would_share_one_instance(filter_dir):
    """Why instances are private: the dynamic loader hands back the already
    loaded copy of a path, so its globals (the xor key) are shared."""
    import ctypes

    first = ctypes.CDLL(str(filter_dir / "xor.so"))
    second = ctypes.CDLL(str(filter_dir / "xor.so"))
    first.pass_args(ctypes.c_char_p(b"key=17"))
    second.pass_args(ctypes.c_char_p(b"key=34"))
    out = ctypes.create_string_buffer(64)
    first.iostack_stats(out, 64)
    assert out.value == b"key=34"


def test_each_volume_gets_a_private_filter_instance(filter_dir, tmp_path):
    """Same .so, different arguments, open at the same time: no shared key."""
    paths = [tmp_path / "a.img", tmp_path / "b.img"]
    fds = []
    for p in paths:
        p.write_bytes(bytes(4096))
        fds.append(os.open(p, os.O_RDWR))
    try:
        first = Stack("xor(key=0x11)", fds[0], filter_dir)
        second = Stack("xor(key=0x22)", fds[1], filter_dir)
        first.write(b"same", 0)
        second.write(b"same", 0)
        assert first.stats(0)["key"] == "17" and second.stats(0)["key"] == "34"
        assert first.read(4, 0) == b"same" and second.read(4, 0) == b"same"
        first.close()
        second.close()
    finally:
        for fd in fds:
            os.close(fd)
    assert on_disk(paths[0], 0, 4) == xor(b"same", 0x11)
    assert on_disk(paths[1], 0, 4) == xor(b"same", 0x22)


@pytest.mark.parametrize(
    ("spec", "serialized"),
    [("", False), ("xor>bitrev>iops(read=10)>bw(write=1M)", False),
     ("xor>ccache", True), ("dcache", True), ("prefetch", True), ("xor>mirror", True)],
)
def test_stack_runs_in_parallel_only_if_every_filter_is_thread_safe(filter_dir, backing, spec,
                                                                    serialized):
    """Caches and the prefetcher keep device bytes, and the bare-ABI filter
    says nothing: with any of them the stack takes one request at a time."""
    with Stack(spec, backing[1], filter_dir) as stack:
        assert stack.serialized is serialized


def test_bare_konnector_abi_filter_loads_unmodified(filter_dir, backing):
    path, fd = backing
    with Stack("mirror>xor(key=1)", fd, filter_dir) as stack:
        stack.write(b"konnector", 100)
        assert stack.read(9, 100) == b"konnector"
        assert stack.alignment == 1
    assert on_disk(path, 100, 9) == xor(bitrev(b"konnector"), 1)


ABI = {"write_xform", "read_xform", "pre_read", "pass_args", "get_name", "iostack_alignment",
       "iostack_thread_safe", "iostack_reads_device", "iostack_last_error", "iostack_stats",
       "iostack_release", "iostack_write_xform", "iostack_read_xform"}


def test_shipped_filters_export_only_the_abi(native_build):
    """The helpers linked into the filters (argument parsing, the cache index,
    the byte-map loop) stay inside them: each .so exports entry points only,
    xor and bitrev exactly the same ones they always had."""
    exported = {}
    for so in sorted((native_build / "filters").glob("*.so")):
        symbols = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True,
                                 text=True, check=True).stdout
        exported[so.stem] = {line.split()[-1] for line in symbols.splitlines()}
    assert {"nop", "xor", "bitrev", "ccache", "dcache", "aes_xts"} <= set(exported)
    for name, symbols in exported.items():
        assert symbols <= ABI, f"{name}.so exports {sorted(symbols - ABI)}"
        assert {"pass_args", "get_name"} <= symbols, name
        assert ({"write_xform", "read_xform"} <= symbols
                or {"iostack_write_xform", "iostack_read_xform"} <= symbols), name
    # aes_xts can fail (libcrypto): it exports only the error-returning transforms.
    assert not {"write_xform", "read_xform"} & exported["aes_xts"]
    assert exported["bitrev"] == {"write_xform", "read_xform", "pass_args", "get_name",
                                  "iostack_last_error", "iostack_thread_safe"}
    assert exported["xor"] == exported["bitrev"] | {"iostack_stats"}


def test_filter_that_owns_the_write_stops_it(filter_dir, backing, tmp_path):
    """doWrite=false: the filters below and the device never see the write."""
    path, fd = backing
    side = tmp_path / "side.img"
    with Stack(f"bitrev>divert(path={side})>xor(key=0xff)", fd, filter_dir) as stack:
        stack.write(b"diverted", 0)
    assert on_disk(path, 0, 8) == bytes(8)
    assert side.read_bytes()[:8] == bitrev(b"diverted")


def test_a_failing_transform_fails_the_io_and_writes_nothing(filter_dir, backing, tmp_path):
    """Regression: Konnector's transforms return void, so a filter could not fail
    a write; the error-returning iostack_* transforms fail it with EIO, and
    neither the filters below nor the device see anything."""
    path, fd = backing
    flag = tmp_path / "fail-now"
    with Stack(f"xor(key=0x11)>failing(flag={flag})>bitrev", fd, filter_dir) as stack:
        stack.write(b"before", 0)
        flag.touch()
        with pytest.raises(StackError, match="write failed: Input/output error"):
            stack.write(b"during", 4096)
        with pytest.raises(StackError, match="read failed: Input/output error"):
            stack.read(6, 0)
        with pytest.raises(StackError, match="write failed: Input/output error"):
            stack.write(b"x", 3)  # read-modify-write: its read fails first
        flag.unlink()
        assert stack.read(6, 0) == b"before"
    assert on_disk(path, 4096, 6) == bytes(6)
    assert on_disk(path, 0, 6) == bitrev(xor(b"before", 0x11))


AES_SPEC = "aes_xts(key=" + "01" * 16 + "02" * 16 + ")"
FAILING_CIPHER = """
import os, sys
from pathlib import Path
from iostack.block_bridge.native_lib import Stack, StackError
flag, backing, filters = (Path(a) for a in sys.argv[1:4])
fd = os.open(backing, os.O_RDWR)
with Stack(sys.argv[4], fd, filters) as stack:
    stack.write(b"k" * 512, 0)
    flag.touch()
    for what, call in (("write", lambda: stack.write(b"p" * 4096, 8192)),
                       ("read", lambda: stack.read(512, 0))):
        try:
            call()
            print(what, "succeeded")
        except StackError as exc:
            print(what, exc)
    flag.unlink()
    print("after", stack.read(512, 0) == b"k" * 512)
"""


def test_aes_xts_fails_the_io_when_the_cipher_fails(filter_dir, backing, tmp_path,
                                                    evp_fail_shim):
    """Regression: aes_xts ignored every EVP return and wrote what the failed
    cipher left in the buffer (plaintext here). Now the write fails with EIO
    and the device keeps its bytes; a read fails rather than hand up garbage."""
    import sys

    path, _ = backing
    flag = tmp_path / "cipher-fails"
    result = subprocess.run(
        [sys.executable, "-c", FAILING_CIPHER, str(flag), str(path), str(filter_dir), AES_SPEC],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "LD_PRELOAD": str(evp_fail_shim), "EVP_FAIL_FLAG": str(flag)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "write stack write failed: Input/output error",
        "read stack read failed: Input/output error",
        "after True"]
    assert on_disk(path, 8192, 4096) == bytes(4096)


@pytest.mark.parametrize("spec", ["xor(key=3)", AES_SPEC])
@pytest.mark.parametrize(("offset", "length"), [(1, 1), (100, 1000), (511, 2), (4095, 8193)])
def test_unaligned_io_keeps_neighbouring_bytes(filter_dir, backing, spec, offset, length):
    _, fd = backing
    background = os.urandom(16384)
    patch = os.urandom(length)
    with Stack(spec, fd, filter_dir) as stack:
        stack.write(background, 0)
        stack.write(patch, offset)
        expected = background[:offset] + patch + background[offset + length:]
        assert stack.read(16384, 0) == expected
        assert stack.read(length, offset) == patch


def test_pre_read_answer_skips_the_device_and_the_filters_below(filter_dir, backing):
    """A cache hit must not read the device: change the device behind the
    stack's back and the cached bytes still come back, decoded by the
    filters above the cache only."""
    path, fd = backing
    data = os.urandom(8192)
    with Stack("bitrev>ccache(size=1M)>xor(key=9)", fd, filter_dir) as stack:
        stack.write(data, 0)
        os.pwrite(fd, bytes(8192), 0)
        assert stack.read(8192, 0) == data
        stats = stack.stats(1)
        assert stats["hits"] == "1" and stats["misses"] == "0"
        # A partial write drops the cached block it touches: the next read misses.
        stack.write(b"x", 10)
        stack.read(4096, 0)
        assert stack.stats(1)["misses"] == "1"
    assert on_disk(path, 0, 1) == bytes(1)  # the device was cleared, untouched since


@pytest.mark.parametrize("cache", ["ccache", "dcache"])
def test_read_cache_miss_fill_hit_and_eviction(filter_dir, backing, cache):
    _, fd = backing
    blocks = [os.urandom(4096) for _ in range(32)]
    for i, block in enumerate(blocks):
        os.pwrite(fd, block, i * 4096)
    with Stack(f"{cache}(size=64K)", fd, filter_dir) as stack:
        assert stack.read(4096, 0) == blocks[0]
        assert stack.read(4096, 0) == blocks[0]
        stats = stack.stats(0)
        assert (stats["misses"], stats["hits"]) == ("1", "1")
        for i, block in enumerate(blocks):
            assert stack.read(4096, i * 4096) == block
        stats = stack.stats(0)
        assert int(stats["evictions"]) > 0
        assert int(stats["used"]) <= 64 * 1024
        # Block 0 was evicted first (least recently used): a miss again.
        misses = int(stats["misses"])
        assert stack.read(4096, 0) == blocks[0]
        assert int(stack.stats(0)["misses"]) == misses + 1


def test_compressed_cache_stores_compressible_blocks_small(filter_dir, backing):
    _, fd = backing
    os.pwrite(fd, b"abcd" * 4096, 0)
    with Stack("ccache(size=1M,level=6)", fd, filter_dir) as stack:
        stack.read(16384, 0)
        assert int(stack.stats(0)["stored_bytes"]) < 16384 // 10


def test_dedup_cache_stores_identical_blocks_once(filter_dir, backing):
    _, fd = backing
    block = os.urandom(4096)
    for i in range(8):
        os.pwrite(fd, block, i * 4096)
    with Stack("dcache(size=1M)", fd, filter_dir) as stack:
        assert stack.read(8 * 4096, 0) == block * 8
        stats = stack.stats(0)
        assert stats["unique_chunks"] == "1" and stats["inserts"] == "8"
        stack.write(os.urandom(4096), 0)
        assert stack.stats(0)["unique_chunks"] == "2"
        assert stack.read(8 * 4096, 0)[4096:] == block * 7


def test_prefetcher_serves_a_sequential_stream_from_its_window(filter_dir, backing):
    _, fd = backing
    data = os.urandom(1 << 20)
    os.pwrite(fd, data, 0)
    with Stack("xor(key=1)>prefetch(window=64K,trigger=2)", fd, filter_dir) as stack:
        got = b"".join(stack.read(4096, off) for off in range(0, 256 * 1024, 4096))
        stats = stack.stats(1)
        # 2 reads to detect the stream, then one device read per 64K window.
        assert stats["misses"] == "2"
        assert stats["fetches"] == "4"
        # A write into the window discards it rather than serving stale bytes.
        stack.write(b"new", 256 * 1024 - 10)
        assert stack.read(3, 256 * 1024 - 10) == b"new"
    assert got == xor(data[: 256 * 1024], 1)


def test_iops_limit_spaces_requests(filter_dir, backing):
    """200 reads/s: 40 reads cannot finish in less than 39/200 s."""
    _, fd = backing
    with Stack("iops(read=200)", fd, filter_dir) as stack:
        start = time.monotonic()
        for i in range(40):
            stack.read(512, i * 512)
        elapsed = time.monotonic() - start
        stats = stack.stats(0)
    assert elapsed >= 39 / 200
    assert stats["reads"] == "40" and stats["writes"] == "0"


def test_bandwidth_limit_counts_bytes(filter_dir, backing):
    """wbt=1 is 1 MiB/s: 256 KiB after the first request takes >= 0.25 s."""
    _, fd = backing
    with Stack("bw(wbt=1)", fd, filter_dir) as stack:
        assert stack.stats(0)["write_limit"] == str(1 << 20)
        start = time.monotonic()
        for i in range(5):
            stack.write(bytes(65536), i * 65536)
        assert time.monotonic() - start >= 4 * 65536 / (1 << 20)


def test_aes_xts_matches_an_independent_implementation(filter_dir, backing):
    """The device holds standard AES-XTS: sector number as little-endian tweak."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    path, fd = backing
    key = bytes(range(64))
    data = os.urandom(4096)
    with Stack(f"aes_xts(key={key.hex()},sector=512)", fd, filter_dir) as stack:
        assert stack.alignment == 512
        stack.write(data, 8 * 512)
    stored = on_disk(path, 8 * 512, 4096)
    for i in range(8):
        tweak = (8 + i).to_bytes(16, "little")
        enc = Cipher(algorithms.AES(key), modes.XTS(tweak)).encryptor()
        assert stored[i * 512:(i + 1) * 512] == enc.update(data[i * 512:(i + 1) * 512])


def test_concurrent_unaligned_writes_to_shared_sectors_lose_nothing(filter_dir, backing):
    """Four threads keep rewriting their own 128-byte quarter of the same four
    512-byte XTS sectors: every write is a read-modify-write of a sector the
    others write too, and none may undo another's bytes."""
    import threading

    _, fd = backing
    rounds = 400
    pieces = {t: [((k % 4) * 512 + t * 128, os.urandom(128)) for k in range(rounds)]
              for t in range(4)}
    expected = bytearray(2048)
    for items in pieces.values():
        for off, data in items[-4:]:
            expected[off:off + 128] = data
    with Stack(f"aes_xts(key={bytes(range(32)).hex()})", fd, filter_dir) as stack:
        threads = [threading.Thread(target=lambda t=t: [stack.write(d, o) for o, d in pieces[t]])
                   for t in pieces]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert stack.read(2048, 0) == bytes(expected)


ALL_FILTERS = ["nop", "xor(key=0xa5)", "bitrev", f"aes_xts(key={bytes(range(64)).hex()})",
               "iops(read=100000,write=100000)", "bw(read=1G,write=1G)", "ccache(size=256K)",
               "dcache(size=256K)", "prefetch(window=16K,trigger=1)", "mirror"]


@pytest.mark.parametrize("spec", ALL_FILTERS)
def test_every_filter_round_trips_aligned_unaligned_and_after_reopen(filter_dir, backing, spec):
    _, fd = backing
    writes = [(0, os.urandom(65536)), (4096 * 3 + 17, os.urandom(999)),
              (65536 + 511, os.urandom(4097)), (131072, bytes(8192))]
    image = bytearray(262144)
    with Stack(spec, fd, filter_dir) as stack:
        image[:] = stack.read(len(image), 0)  # what a fresh volume reads as
        for offset, data in writes:
            stack.write(data, offset)
            image[offset:offset + len(data)] = data
        # Sequential 4K reads (prefetch and caches engage), then one big read.
        assert b"".join(stack.read(4096, o) for o in range(0, len(image), 4096)) == image
        assert stack.read(len(image), 0) == image
        assert stack.read(3, 4096 * 3 + 16) == bytes(image[4096 * 3 + 16:4096 * 3 + 19])
    with Stack(spec, fd, filter_dir) as stack:
        assert stack.read(len(image), 0) == image
