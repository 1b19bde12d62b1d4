"""The selection engine and the object stage's framing, over an in-memory object."""

from __future__ import annotations

import struct
import time

import pytest
from swift.common.swob import Response

from iostack.filters.base import FilterContext
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.filters.records import BLOCK_SIZE
from iostack.swift_middleware.select.engine import Answer, SelectError, Selecting, off_hub
from iostack.swift_middleware.select.frames import PADDING, frame, read_frames
from iostack.swift_middleware.select.object import _framed

CONTEXT = FilterContext(account="AUTH_t1", container="logs", obj="a.log")
PAD = frame(PADDING, b"\0" * 16)


def fetcher(body: bytes, status: int = 200):
    def fetch(byte_range: str | None) -> Response:
        start = int(byte_range.split("=")[1].split("-")[0]) if byte_range else 0
        return Response(status=status, app_iter=[body[start:][i:i + 65536]
                                                 for i in range(0, len(body) - start, 65536)])
    return fetch


def grep(pattern: str):
    return get_filter("grep").selection({"pattern": pattern}, CONTEXT)


def test_a_quiet_selection_yields_keepalives_and_frames_them_as_padding():
    # Three blocks of lines that do not match, then one that does.
    filler = b"nothing to see here\n" * (BLOCK_SIZE // 20 + 1)
    body = filler * 3 + b"the match\n"
    selecting = Selecting(fetcher(body), "/a.log", [grep("match")], ["grep"],
                          max_first_line=1 << 20, keepalive=0.0)
    answer = selecting.run(0, None)
    assert isinstance(answer, Answer)
    chunks = list(answer.chunks)
    assert [c for c in chunks if c] == [b"the match\n"]
    assert chunks.count(b"") >= 2 and chunks[-1] == b"the match\n"

    selecting = Selecting(fetcher(body), "/a.log", [grep("match")], ["grep"],
                          max_first_line=1 << 20, keepalive=0.0)
    framed = list(_framed(selecting, 0, None, PAD))
    assert framed.count(PAD) >= 3  # one before anything, at least two for the quiet blocks
    assert b"".join(read_frames(framed)) == b"the match\n"


def test_without_keepalive_quiet_blocks_yield_nothing():
    body = b"nothing\n" * (BLOCK_SIZE // 4) + b"the match\n"
    answer = Selecting(fetcher(body), "/a.log", [grep("match")], ["grep"], 1 << 20).run(0, None)
    assert list(answer.chunks) == [b"the match\n"]


def test_the_objects_own_failure_is_passed_on():
    answer = Selecting(fetcher(b"", status=404), "/a.log", [grep("x")], ["grep"],
                       1 << 20).run(0, None)
    assert isinstance(answer, Response) and answer.status_int == 404


def test_object_stage_errors_travel_as_error_frames_with_their_status():
    csv = get_filter("csv_select").selection({"columns": "nope"}, CONTEXT)
    selecting = Selecting(fetcher(b"a,b\n1,2\n"), "/a.csv", [csv], ["csv_select"], 1 << 20)
    with pytest.raises(SelectError) as caught:
        b"".join(read_frames(_framed(selecting, 0, None, PAD)))
    assert caught.value.status == 400 and "no column 'nope'" in str(caught.value)


def test_a_record_longer_than_allowed_before_the_first_line_ends_is_422():
    csv = get_filter("csv_select").selection({}, CONTEXT)
    selecting = Selecting(fetcher(b"x" * 300), "/a.csv", [csv], ["csv_select"], 100)
    framed = list(_framed(selecting, 0, None, PAD))
    kind, length = struct.unpack(">cQ", framed[1][:9])
    assert kind == b"E"
    with pytest.raises(SelectError) as caught:
        list(read_frames(framed))
    assert caught.value.status == 422 and "longer than 100 bytes" in str(caught.value)


@pytest.mark.parametrize("start", [0, 5])
def test_a_record_over_max_record_is_422_naming_the_limit(start):
    body = b"line one\n" + b"y" * 300_000 + b"\nlast\n"
    selecting = Selecting(fetcher(body), "/a.log", [grep("y")], ["grep"], 1 << 20,
                          max_record=200_000)
    with pytest.raises(SelectError) as caught:
        selecting.run(start, None)
    assert caught.value.status == 422
    assert "max_record limit (200000 bytes)" in str(caught.value)
    fits = Selecting(fetcher(body), "/a.log", [grep("last")], ["grep"], 1 << 20,
                     max_record=400_000).run(start, None)
    assert b"".join(fits.chunks) == b"last\n"


def test_one_long_call_off_the_hub_yields_keepalives_until_it_returns():
    def slow(value: int) -> int:
        time.sleep(0.5)  # a native thread: the hub goes on meanwhile
        return value * 2

    steps = off_hub(0.05, slow, 21)
    yielded = []
    with pytest.raises(StopIteration) as done:
        while True:
            yielded.append(next(steps))
    assert done.value.value == 42
    assert set(yielded) == {b""} and len(yielded) >= 3
    quiet = off_hub(None, slow, 1)
    with pytest.raises(StopIteration) as done:
        next(quiet)
    assert done.value.value == 2


class SlowFailure:
    """A selection whose first block takes a while, then is unreadable."""

    skips_first_record = needs_first_record = random_access = False
    content_type = "text/csv"

    def begin(self, first_record: bytes | None, at_start: bool) -> bytes:
        return b"header\n"

    def select(self, block: bytes) -> bytes:
        time.sleep(0.4)  # a native thread: keepalives go on meanwhile
        raise FilterError("unreadable")

    def end(self) -> bytes:
        return b""


def test_a_slow_failing_first_block_sends_keepalives_then_an_error_and_no_data():
    selecting = Selecting(fetcher(b"a\nb\n"), "/a.csv", [SlowFailure()], ["x"], 1 << 20,
                          keepalive=0.05)
    framed = list(_framed(selecting, 0, None, PAD))
    assert framed.count(PAD) >= 3  # the proxy's read timeout hears from us
    kinds = [struct.unpack(">cQ", f[:9])[0] for f in framed]
    assert b"D" not in kinds and kinds[-1] == b"E"  # the header was held back
    with pytest.raises(SelectError) as caught:
        list(read_frames(framed))
    assert caught.value.status == 422 and "unreadable" in str(caught.value)
