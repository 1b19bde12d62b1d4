"""EncodingInput and BodyLookahead: the proxy's reads of a PUT body, in the sizes it asks for."""

from __future__ import annotations

import io

import eventlet
import pytest
from swift.common.swob import HTTPException, Request

from iostack.stored_object import AppliedFilter
from iostack.swift_middleware.enforce.encode import BodyLookahead, EncodingInput


class Reframe:
    """An encoder whose chunks are ``size`` bytes, whatever the client sent."""

    def __init__(self, size: int) -> None:
        self.size = size

    def encode(self, chunks):
        data = b"".join(chunks)
        for at in range(0, len(data), self.size):
            yield data[at:at + self.size]

    def sysmeta(self):
        return {}


def encoding_input(body: bytes, chunk: int) -> EncodingInput:
    request = Request.blank("/v1/a/c/o", method="PUT", body=body)
    encoders = [(AppliedFilter("reframe", {}, {}), Reframe(chunk))]
    return EncodingInput(request, encoders, client_input=io.BytesIO(body),
                         expected_length=len(body), hash_body=False)


@pytest.mark.parametrize("chunk", [1, 7, 64, 65, 200])
@pytest.mark.parametrize("size", [1, 10, 64, 100])
def test_reads_of_any_size_return_the_encoded_bytes_in_order(chunk, size):
    body = bytes(range(256)) * 3
    stream = encoding_input(body, chunk)
    pieces = []
    while piece := stream.read(size):
        assert len(piece) <= size
        assert isinstance(piece, bytes)
        pieces.append(piece)
    assert b"".join(pieces) == body
    assert stream.done and stream.read(size) == b"" and stream.read() == b""


def test_a_partial_read_keeps_the_rest_for_the_next_reads():
    stream = encoding_input(b"x" * 100 + b"y" * 30, 100)
    first = stream.read(100)
    assert first == b"x" * 100
    assert stream.read(10) == b"y" * 10
    assert stream.read() == b"y" * 20


def lookahead(body: bytes, timeout: float = 5.0, client_input=None) -> BodyLookahead:
    request = Request.blank("/v1/a/c/o", method="PUT", body=body)
    if client_input is not None:
        request.environ["wsgi.input"] = client_input
    return BodyLookahead(request, timeout)


def test_bytes_read_ahead_are_replayed_to_each_look_and_then_to_the_reader():
    body = bytes(range(256)) * 1000  # 256000 bytes: four 64 KiB reads
    ahead = lookahead(body)
    first = ahead.chunks()
    assert next(first) == body[:65536]
    assert b"".join([next(first), next(first)]) == body[65536:3 * 65536]
    second = ahead.chunks()  # starts again from the beginning, reads on after the kept
    assert b"".join(second) == body
    pieces = []
    while piece := ahead.read(50000):
        assert len(piece) <= 50000
        pieces.append(piece)
    assert b"".join(pieces) == body and ahead.read(10) == b""


def test_a_reader_takes_the_rest_of_the_body_after_what_was_read_ahead():
    body = b"a" * 70000 + b"b" * 30000
    ahead = lookahead(body)
    next(ahead.chunks())
    assert ahead.read(0) == b""
    assert ahead.read() == body  # everything: the kept chunk, then the client's rest
    ahead = lookahead(body)
    next(ahead.chunks())
    assert ahead.read(65536) == body[:65536] and ahead.read(65536) == body[65536:]


class Failing(io.RawIOBase):
    def read(self, size=-1):
        raise ValueError("invalid chunk size")  # as eventlet's ChunkReadError


class Stalling(io.RawIOBase):
    def read(self, size=-1):
        eventlet.sleep(10)
        return b"late"


@pytest.mark.parametrize(("client_input", "status"), [(Failing(), 499), (Stalling(), 408)])
def test_a_client_that_breaks_off_or_stalls_gets_swifts_answer(client_input, status):
    ahead = lookahead(b"", timeout=0.05, client_input=client_input)
    with pytest.raises(HTTPException) as raised:
        next(ahead.chunks())
    assert raised.value.status_int == status
