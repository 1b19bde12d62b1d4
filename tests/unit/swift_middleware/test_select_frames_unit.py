"""The framed answers object servers send proxies for record selections."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iostack.swift_middleware.select.engine import SelectError
from iostack.swift_middleware.select.frames import (
    DATA,
    END,
    PADDING,
    IncompleteAnswer,
    error_frame,
    frame,
    parse_select_request,
    read_frames,
    select_request,
)


def cut(data: bytes, sizes: list[int]) -> list[bytes]:
    """``data`` in pieces of the given sizes (cycled), as a socket might deliver it."""
    pieces, at, i = [], 0, 0
    while at < len(data):
        size = sizes[i % len(sizes)]
        pieces.append(data[at:at + size])
        at, i = at + size, i + 1
    return pieces


@given(payloads=st.lists(st.binary(max_size=300), max_size=8),
       sizes=st.lists(st.integers(1, 50), min_size=1, max_size=5))
def test_data_survives_any_cutting_and_padding_is_dropped(payloads, sizes):
    stream = frame(PADDING, b"\0" * 20) + b"".join(
        frame(DATA, p) + frame(PADDING) for p in payloads) + frame(END)
    assert b"".join(read_frames(cut(stream, sizes))) == b"".join(payloads)


def test_an_error_frame_raises_with_its_status_after_the_data_before_it():
    chunks = read_frames([frame(DATA, b"a,b\n") + error_frame(422, "broken quote")])
    assert next(chunks) == b"a,b\n"
    with pytest.raises(SelectError) as caught:
        next(chunks)
    assert caught.value.status == 422 and "broken quote" in str(caught.value)


@pytest.mark.parametrize("stream", [b"", frame(DATA, b"x"), frame(DATA, b"xyz")[:-1],
                                    frame(DATA, b"x") + frame(END)[:4]])
def test_an_answer_without_its_end_is_incomplete(stream):
    with pytest.raises(IncompleteAnswer):
        b"".join(read_frames([stream]))


def test_unknown_frame_kinds_are_refused():
    with pytest.raises(IncompleteAnswer, match="unknown frame kind"):
        list(read_frames([frame(b"Q", b"?")]))


def test_select_requests_round_trip():
    text = select_request([("csv_select", {"columns": "a,b"}), ("grep", {"pattern": "x"})],
                          10, None)
    assert parse_select_request(text) == (
        [("csv_select", {"columns": "a,b"}), ("grep", {"pattern": "x"})], 10, None)


@pytest.mark.parametrize("text", ["", "{", '{"filters": [], "start": 0, "end": null}',
                                  '{"filters": [{"name": "grep"}], "start": 0, "end": null}',
                                  '{"filters": [{"name": "grep", "params": {}}], "start": 5, '
                                  '"end": 4}'])
def test_malformed_select_requests_are_refused(text):
    with pytest.raises(ValueError, match="X-Backend-Iostack-Select"):
        parse_select_request(text)
