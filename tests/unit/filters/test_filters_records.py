"""Record framing: byte-range splits at any offsets return every record exactly once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.records import RecordBlocks, fetch_start

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
