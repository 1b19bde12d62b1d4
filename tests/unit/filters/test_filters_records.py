"""Record framing: byte-range splits at any offsets return every record exactly once."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.records import RecordBlocks, RecordTooLong, fetch_start

lines = st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=30)


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def records_of(data: bytes, start: int, end: int | None, chunk: int, block: int) -> list[bytes]:
    """What a reader of split [start, end] gets, fed as the middleware feeds it."""
    stream = chunked(data[fetch_start(start):], chunk)
    blocks = list(RecordBlocks(start, end, block_size=block).blocks(stream))
    assert all(b.endswith(b"\n") for b in blocks[:-1]), "blocks end at record boundaries"
    return b"".join(blocks).splitlines(keepends=True)


@settings(max_examples=300, deadline=None)
@given(lines, st.booleans(), st.data())
def test_splits_at_random_offsets_neither_lose_nor_repeat_records(body, trailing, data):
    text = b"\n".join(body) + (b"\n" if trailing and body else b"")
    cuts = sorted(set(data.draw(st.lists(st.integers(1, max(len(text), 1)), max_size=6))))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    chunk = data.draw(st.integers(1, 9))
    block = data.draw(st.integers(1, 40))
    got = []
    for start, stop in zip(bounds, bounds[1:], strict=False):
        if stop == start:  # an empty object has no splits
            continue
        got += records_of(text, start, stop - 1, chunk, block)
    assert got == text.splitlines(keepends=True)


def test_a_split_holding_no_record_start_is_empty():
    text = b"a-long-record\nb\n"
    assert records_of(text, 3, 8, chunk=4, block=100) == []


def test_the_straddling_record_is_finished_and_the_partial_one_skipped():
    text = b"aaa\nbbb\nccc\nddd\n"
    assert records_of(text, 2, 5, chunk=3, block=100) == [b"bbb\n"]
    assert records_of(text, 4, 4, chunk=1, block=100) == [b"bbb\n"]
    assert records_of(text, 3, 4, chunk=16, block=100) == [b"bbb\n"]  # byte 3 is a \n
    assert records_of(text, 0, None, chunk=5, block=100) == text.splitlines(keepends=True)


def test_blocks_hold_whole_records_even_when_one_is_longer_than_a_block():
    text = b"x" * 50 + b"\nshort\n"
    blocks = list(RecordBlocks(block_size=8).blocks(chunked(text, 7)))
    assert blocks == [b"x" * 50 + b"\n", b"short\n"]


def test_bad_ranges_are_refused():
    with pytest.raises(ValueError):
        RecordBlocks(5, 4)


def test_a_record_longer_than_max_record_is_refused_naming_the_limit():
    text = b"ok\n" + b"x" * 100 + b"\nlast\n"
    with pytest.raises(RecordTooLong, match=r"max_record limit \(64 bytes\)"):
        list(RecordBlocks(block_size=8, max_record=64).blocks(chunked(text, 16)))
    with pytest.raises(RecordTooLong):  # the last record, with no \n after it
        list(RecordBlocks(max_record=64).blocks(chunked(b"a\n" + b"y" * 65, 16)))
    with pytest.raises(RecordTooLong):  # the record straddling a range's end
        list(RecordBlocks(0, 3, max_record=64).blocks(chunked(b"a\n" + b"z" * 80 + b"\n", 16)))
    fits = b"x" * 63 + b"\n"
    assert list(RecordBlocks(block_size=8, max_record=64).blocks(chunked(fits * 3, 16))) == [
        fits, fits, fits]


@settings(max_examples=200, deadline=None)
@given(lines, st.integers(1, 40), st.integers(1, 14), st.data())
def test_max_record_refuses_exactly_the_objects_with_a_longer_record(body, block, cap, data):
    chunk = data.draw(st.integers(1, cap))  # exact for a cap of at least one chunk
    text = b"\n".join(body) + b"\n"
    # Records end at \n only (bytes.splitlines would also cut at \r).
    longest = max(len(line) + 1 for line in text.split(b"\n")[:-1])
    stream = chunked(text, chunk)
    if longest > cap:
        with pytest.raises(RecordTooLong):
            list(RecordBlocks(block_size=block, max_record=cap).blocks(stream))
    else:
        blocks = RecordBlocks(block_size=block, max_record=cap).blocks(stream)
        assert b"".join(blocks) == text


def test_a_line_with_no_newline_costs_linear_time():
    # The splitter re-joined and re-scanned all it held on every chunk: a 64 MiB line
    # in 64 KiB chunks took ~60 s of a shared worker; scanned once it takes ~0.1 s.
    line = b"x" * (64 << 20)
    started = time.process_time()
    blocks = list(RecordBlocks(block_size=1 << 20).blocks(chunked(line, 64 << 10)))
    assert blocks == [line]
    assert time.process_time() - started < 10
