"""EncodingInput: the proxy's reads of the encoded body, in the sizes it asks for."""

from __future__ import annotations

import io

import pytest
from swift.common.swob import Request

from iostack.swift_middleware.enforce.encode import EncodingInput
from iostack.swift_middleware.enforce.record import AppliedFilter


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
