"""Every body-transforming filter, and the compression+encryption chain, against plain bytes.

Round trips at frame boundaries, every Range shape through the views, a large
streamed body in bounded memory, and hypothesis-generated bodies and ranges.
"""

from __future__ import annotations

import os
import tracemalloc

import pytest
from filters_testlib import (
    FileSource,
    chunked,
    encode_chain,
    log_text,
    open_chain,
    sha256_of,
    store_chain,
    streamed_body,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iostack.filters.base import BytesSource, read_all
from iostack.filters.library import get_filter

KIB = 1024

# name -> (stages, F: the frame size on the original bytes)
CONFIGS = {
    "noop": ([("noop", {})], 64 * KIB),
    "gzip": ([("compression", {"algorithm": "gzip", "frame_size": 64 * KIB})], 64 * KIB),
    "zstd": ([("compression", {"algorithm": "zstd", "frame_size": 64 * KIB})], 64 * KIB),
    "encryption": ([("encryption", {"frame_size": 4 * KIB})], 4 * KIB),
    "zstd+encryption": (
        [("compression", {"algorithm": "zstd", "frame_size": 64 * KIB}),
         ("encryption", {"frame_size": 4 * KIB})],
        64 * KIB,
    ),
}


def stages_of(name):
    stages, frame = CONFIGS[name]
    return [(get_filter(filter_name), params) for filter_name, params in stages], frame


def mixed_body(size: int) -> bytes:
    """Alternating compressible and incompressible stretches."""
    text = log_text(size)
    noise = os.urandom(size)
    return b"".join(
        (text if (i // (24 * KIB)) % 2 == 0 else noise)[i : i + 24 * KIB]
        for i in range(0, size, 24 * KIB)
    )


@pytest.fixture(params=sorted(CONFIGS))
def config(request):
    return stages_of(request.param)


@pytest.mark.parametrize("kind", ["text", "random"])
@pytest.mark.parametrize("size_of", ["0", "1", "F-1", "F", "F+1", "3F+17"])
def test_round_trip_at_frame_boundaries(config, context, size_of, kind):
    stages, frame = config
    size = eval_size(size_of, frame)
    data = log_text(size) if kind == "text" else os.urandom(size)
    stored, sysmetas = store_chain(stages, context, data, chunk=7_777)
    view = open_chain(stages, BytesSource(stored), sysmetas, context)
    assert view.length == size
    assert read_all(view) == data


def eval_size(expr: str, frame: int) -> int:
    sizes = {"0": 0, "1": 1, "F-1": frame - 1, "F": frame, "F+1": frame + 1,
             "3F+17": 3 * frame + 17}
    return sizes[expr]


def range_cases(length: int, frame: int):
    return {
        "first byte": (0, 1),
        "last byte": (length - 1, length),
        "suffix 1": (length - 1, length),
        "suffix 500": (length - 500, length),
        "suffix over a frame": (length - frame - 3, length),
        "spanning two frames": (frame - 10, frame + 10),
        "spanning three frames": (frame - 1, 2 * frame + 1),
        "exactly one frame": (frame, 2 * frame),
        "inside a frame": (frame + 5, frame + 6),
        "whole": (0, length),
        "empty": (frame, frame),
    }


def test_every_range_shape_through_the_view(config, context):
    stages, frame = config
    data = mixed_body(3 * frame + 17)
    stored, sysmetas = store_chain(stages, context, data)
    view = open_chain(stages, BytesSource(stored), sysmetas, context)
    for name, (start, end) in range_cases(len(data), frame).items():
        assert read_all(view, start, end) == data[start:end], name


def test_reads_outside_the_object_are_refused(config, context):
    stages, _ = config
    data = log_text(1000)
    stored, sysmetas = store_chain(stages, context, data)
    view = open_chain(stages, BytesSource(stored), sysmetas, context)
    for start, end in [(-1, 5), (0, 1001), (10, 5)]:
        with pytest.raises(ValueError, match="outside"):
            read_all(view, start, end)


def test_sysmeta_is_small_strings(config, context):
    stages, _ = config
    _, sysmetas = store_chain(stages, context, mixed_body(300 * KIB))
    for sysmeta in sysmetas:
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in sysmeta.items())
        assert sum(len(k) + len(v) for k, v in sysmeta.items()) < 1024


@pytest.mark.parametrize("kind", ["text", "random"])
def test_large_body_streams_in_bounded_memory(config, context, tmp_path, kind):
    stages, frame = config
    total = 20 * 1024 * KIB + 12_345
    stored_path = tmp_path / "stored"
    tracemalloc.start()
    try:
        stream, encoders = encode_chain(stages, context, streamed_body(total, kind))
        with open(stored_path, "wb") as out:
            for chunk in stream:
                out.write(chunk)
        view = open_chain(stages, FileSource(str(stored_path)), [e.sysmeta() for e in encoders],
                          context)
        assert view.length == total
        got = sha256_of(view.read(0, total))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert got == sha256_of(streamed_body(total, kind))
    # A few chunks and frames in flight, never the 20 MiB body.
    assert peak < 8 * 1024 * KIB, f"peak {peak} bytes"
    tail = total - frame - 100
    assert read_all(view, tail, total) == bytes_from(streamed_body(total, kind), tail)


def bytes_from(chunks, offset: int) -> bytes:
    """The bytes of a stream from ``offset`` on, without joining the whole stream."""
    kept, position = [], 0
    for chunk in chunks:
        if position + len(chunk) > offset:
            kept.append(chunk[max(offset - position, 0) :])
        position += len(chunk)
    return b"".join(kept)


body_strategy = st.one_of(
    st.binary(max_size=3000),
    st.lists(st.tuples(st.binary(min_size=1, max_size=40), st.integers(1, 3000)), max_size=60)
    .map(lambda parts: b"".join(piece * count for piece, count in parts)),
    st.integers(0, 200 * KIB).map(os.urandom),
)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=body_strategy, cuts=st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), max_size=6),
       write_chunk=st.integers(1, 100_000))
def test_random_bodies_and_ranges_match_the_plain_bytes(name, context, data, cuts, write_chunk):
    stages, _ = stages_of(name)
    stream, encoders = encode_chain(stages, context, chunked(data, write_chunk))
    stored = b"".join(stream)
    view = open_chain(stages, BytesSource(stored, chunk_size=999), [e.sysmeta() for e in encoders],
                      context)
    assert view.length == len(data)
    assert read_all(view) == data
    for a, b in cuts:
        start, end = sorted((int(a * len(data)), int(b * len(data))))
        assert read_all(view, start, end) == data[start:end]
