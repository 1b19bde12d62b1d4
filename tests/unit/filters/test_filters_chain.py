"""compression then encryption, read back through stacked views, fetching only needed frames."""

from __future__ import annotations

import os

from filters_testlib import CountingSource, chunked, encode_chain, log_text, open_chain

from iostack.filters.base import BytesSource, read_all
from iostack.filters.builtin.encryption import TAG_BYTES
from iostack.filters.library import get_filter

KIB = 1024
CF = 64 * KIB  # compression frame (original bytes)
EF = 4 * KIB  # encryption frame (compressed bytes)
EB = EF + TAG_BYTES


def write_chain(context, data: bytes):
    stages = [(get_filter("compression"), {"algorithm": "zstd", "frame_size": CF}),
              (get_filter("encryption"), {"frame_size": EF})]
    compressed = []
    encoders = [spec.encoder(params, context) for spec, params in stages]

    def tee(stream):
        for chunk in stream:
            compressed.append(chunk)
            yield chunk

    stored = b"".join(encoders[1].encode(tee(encoders[0].encode(chunked(data, 50_000)))))
    return stages, stored, b"".join(compressed), [e.sysmeta() for e in encoders]


def blocks_covering(start: int, end: int, stored_length: int) -> tuple[int, int]:
    return (start // EF) * EB, min(-(-end // EF) * EB, stored_length)


def test_range_read_decrypts_and_decompresses_only_needed_frames(context):
    data = b"".join(log_text(32 * KIB, seed=i) + os.urandom(32 * KIB) for i in range(32))
    stages, stored, compressed, sysmetas = write_chain(context, data)
    bottom = CountingSource(BytesSource(stored))
    decrypted = CountingSource(get_filter("encryption").open_view(bottom, sysmetas[1], context))
    original = get_filter("compression").open_view(decrypted, sysmetas[0], context)
    assert original.length == len(data)

    offset = 17 * CF + 1234
    assert read_all(original, offset, offset + 1) == data[offset : offset + 1]

    # The compression view found its index in sysmeta and asked the decrypted stream
    # for one frame only ...
    assert "index" in sysmetas[0]
    comp_index = get_filter("compression").open_view(BytesSource(compressed), sysmetas[0],
                                                     context)._load_index()
    frame = (comp_index.offsets[17], comp_index.offsets[18])
    assert decrypted.reads == [frame]
    # ... and the encryption view fetched exactly the encrypted frames covering it.
    assert bottom.reads == [blocks_covering(*frame, len(stored))]
    assert bottom.bytes_read < len(stored) / 10


def test_chain_round_trip_and_ranges_across_frames(context):
    data = log_text(300 * KIB) + os.urandom(100 * KIB)
    stages, stored, _, sysmetas = write_chain(context, data)
    view = open_chain(stages, BytesSource(stored), sysmetas, context)
    assert read_all(view) == data
    for start, end in [(0, 1), (len(data) - 1, len(data)), (CF - 3, 3 * CF + 3),
                       (len(data) - 70_000, len(data))]:
        assert read_all(view, start, end) == data[start:end]


def test_compression_before_encryption_actually_shrinks_the_stored_object(context):
    data = log_text(1024 * KIB)
    _, stored, _, _ = write_chain(context, data)
    assert len(stored) < len(data) / 5
    # Encrypting first would leave nothing to compress: the metadata orders them.
    assert "encryption" in get_filter("compression").metadata.runs_before


def test_chain_encoders_stream_without_prebuilding(context):
    # Small encryption frames: a default (256 KiB) one holds ~16 compressed frames.
    stages = [(get_filter("compression"), {}), (get_filter("encryption"), {"frame_size": 64 * KIB})]
    pulled = []

    def body():
        for i in range(8):
            pulled.append(i)
            yield log_text(256 * KIB, seed=i)

    stream, _ = encode_chain(stages, context, body())
    next(stream)
    # The first stored bytes leave before the body has been read to the end.
    assert len(pulled) < 8
