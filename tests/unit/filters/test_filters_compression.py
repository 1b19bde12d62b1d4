"""compression: gzip/zstd frames, raw frames for incompressible data, integrity, parameters."""

from __future__ import annotations

import gzip
import os
import threading

import pytest
from filters_testlib import CountingSource, log_text, store_chain

from iostack.filters.base import UNCHANGED, BytesSource, FilterContext, read_all
from iostack.filters.builtin import compression
from iostack.filters.errors import IntegrityError, ParamError
from iostack.filters.library import get_filter

KIB = 1024
SPEC = get_filter("compression")
CTX = FilterContext("AUTH_t1", "logs", "obj")


def put(data: bytes, **params):
    stored, (sysmeta,) = store_chain([(SPEC, params)], CTX, data)
    return stored, sysmeta


def view(stored: bytes, sysmeta):
    return SPEC.open_view(BytesSource(stored), sysmeta, CTX)


@pytest.mark.parametrize("algorithm", ["gzip", "zstd"])
def test_redundant_text_shrinks_to_a_tenth(algorithm):
    data = log_text(2 * 1024 * KIB)
    stored, sysmeta = put(data, algorithm=algorithm)
    assert len(stored) < 0.10 * len(data)
    assert sysmeta["raw"] == "0" and "gave_up" not in sysmeta
    assert sysmeta["alg"] == algorithm and sysmeta["len"] == str(len(data))


def test_gzip_frames_are_real_gzip_members():
    data = log_text(300 * KIB)
    stored, sysmeta = put(data, algorithm="gzip", frame_size=64 * KIB)
    members = stored[: -int(sysmeta["trailer"])]
    # Concatenated members are one valid multi-member gzip file (RFC 1952).
    assert gzip.decompress(members) == data
    single, meta = put(data[:1000], algorithm="gzip")
    assert gzip.decompress(single[: -int(meta["trailer"])]) == data[:1000]


@pytest.mark.parametrize("algorithm", ["gzip", "zstd"])
def test_incompressible_data_is_stored_raw_and_the_encoder_gives_up(algorithm, monkeypatch):
    calls = []
    real = compression.CompressionEncoder._compress
    monkeypatch.setattr(compression.CompressionEncoder, "_compress",
                        lambda self, frame: calls.append(len(frame)) or real(self, frame))
    data = os.urandom(2 * 1024 * KIB)
    stored, sysmeta = put(data, algorithm=algorithm, frame_size=64 * KIB)
    frames = int(sysmeta["frames"])
    assert frames == 32 and sysmeta["raw"] == "32"
    assert sysmeta["gave_up"] == str(compression.GIVE_UP_AFTER)
    # Only the first few frames were even tried.
    assert len(calls) == compression.GIVE_UP_AFTER
    assert len(stored) == len(data) + int(sysmeta["trailer"])
    assert read_all(view(stored, sysmeta)) == data


def test_probe_skips_a_random_frame_without_a_full_compression(monkeypatch):
    full_passes = []
    encoder = SPEC.encoder({"algorithm": "zstd"}, CTX)
    real = encoder._codec.compress
    monkeypatch.setattr(encoder._codec, "compress", lambda d: full_passes.append(1) or real(d))
    b"".join(encoder.encode([os.urandom(256 * KIB), log_text(256 * KIB)]))
    assert len(full_passes) == 1  # the text frame only
    assert encoder.sysmeta()["raw"] == "1"


def test_mixed_body_keeps_compressing_text_after_a_random_stretch():
    data = os.urandom(128 * KIB) + log_text(512 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    assert sysmeta["raw"] == "2" and "gave_up" not in sysmeta
    assert len(stored) < 128 * KIB + 64 * KIB
    assert read_all(view(stored, sysmeta)) == data


def without_inline_index(sysmeta):
    """Sysmeta as for an object whose index is too big for sysmeta: it lives only in the trailer."""
    return {k: v for k, v in sysmeta.items() if k != "index"}


def test_a_small_index_rides_in_sysmeta_so_a_range_reads_one_frame():
    data = log_text(1024 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    assert "index" in sysmeta
    lower = CountingSource(BytesSource(stored))
    v = SPEC.open_view(lower, sysmeta, CTX)
    assert read_all(v, 5 * 64 * KIB + 3, 5 * 64 * KIB + 4) == data[5 * 64 * KIB + 3 :][:1]
    assert len(lower.reads) == 1
    start, end = lower.reads[0]
    assert end - start < 64 * KIB


def test_an_index_too_big_for_sysmeta_stays_in_the_trailer_only():
    data = log_text(9 * 1024 * KIB)
    _, sysmeta = put(data, frame_size=64 * KIB)  # 144 frames
    assert int(sysmeta["trailer"]) > 1024 and "index" not in sysmeta


def test_a_damaged_inline_index_is_an_integrity_error():
    data = log_text(200 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    index = sysmeta["index"]
    damaged = index[:10] + ("A" if index[10] != "A" else "B") + index[11:]
    with pytest.raises(IntegrityError, match="index"):
        read_all(view(stored, sysmeta | {"index": damaged}))
    with pytest.raises(IntegrityError, match="base64"):
        read_all(view(stored, sysmeta | {"index": "not base64!"}))


def test_range_read_fetches_the_trailer_and_only_the_needed_frames():
    data = log_text(1024 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    sysmeta = without_inline_index(sysmeta)
    lower = CountingSource(BytesSource(stored))
    v = SPEC.open_view(lower, sysmeta, CTX)
    assert v.length == len(data) and lower.reads == []  # HEAD needs no read
    assert read_all(v, 5 * 64 * KIB + 3, 5 * 64 * KIB + 4) == data[5 * 64 * KIB + 3 :][:1]
    trailer_start = len(stored) - int(sysmeta["trailer"])
    assert lower.reads[0] == (trailer_start, len(stored))
    assert len(lower.reads) == 2
    start, end = lower.reads[1]
    assert end - start < 64 * KIB  # one compressed frame, not the object
    read_all(v, 0, 10)
    assert len(lower.reads) == 3  # the index is parsed once per view


def flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x01]) + data[position + 1 :]


@pytest.mark.parametrize("what", ["compressed frame", "raw frame", "trailer"])
def test_corruption_is_an_integrity_error(what):
    data = log_text(64 * KIB) + os.urandom(64 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    trailer_start = len(stored) - int(sysmeta["trailer"])
    position = {"compressed frame": 100, "raw frame": trailer_start - 100,
                "trailer": trailer_start + 20}[what]
    with pytest.raises(IntegrityError):
        read_all(view(flip(stored, position), without_inline_index(sysmeta)))


def test_truncated_object_and_bad_sysmeta_are_integrity_errors():
    data = log_text(200 * KIB)
    stored, sysmeta = put(data, frame_size=64 * KIB)
    with pytest.raises(IntegrityError, match="index"):
        read_all(view(stored[:-1], sysmeta))
    with pytest.raises(IntegrityError, match="index"):
        read_all(view(stored[:50] + stored[60:], sysmeta))
    with pytest.raises(IntegrityError, match="does not match"):
        read_all(view(stored, sysmeta | {"len": str(len(data) + 1)}))
    with pytest.raises(IntegrityError, match="algorithm"):
        view(stored, sysmeta | {"alg": "lzma"})
    with pytest.raises(IntegrityError, match="'trailer'"):
        view(stored, {k: v for k, v in sysmeta.items() if k != "trailer"})
    with pytest.raises(IntegrityError, match="does not fit"):
        view(stored, sysmeta | {"trailer": str(len(stored) + 1)})


@pytest.mark.parametrize(
    ("params", "param", "message"),
    [
        ({"algorithm": "lz4"}, "algorithm", "expected one of gzip, zstd"),
        ({"algorithm": "gzip", "level": 12}, "level", "gzip accepts 1-9, got 12"),
        ({"level": 0}, "level", "below the minimum 1"),
        ({"level": "fast"}, "level", "expected an integer"),
        ({"frame_size": 1024}, "frame_size", r"below the minimum 65536 \(bytes\)"),
        ({"frame_size": 64 * 1024 * KIB}, "frame_size", "above the maximum"),
        ({"ratio": 3}, "ratio", "unknown parameter"),
    ],
)
def test_bad_parameters_say_which_and_why(params, param, message):
    with pytest.raises(ParamError, match=message) as caught:
        SPEC.encoder(params, CTX)
    assert caught.value.param == param and caught.value.filter_name == "compression"


def test_policy_time_validation_applies_the_same_rules():
    with pytest.raises(ParamError, match="gzip accepts 1-9, got 12"):
        SPEC.validate({"algorithm": "gzip", "level": 12})
    assert SPEC.validate({"algorithm": "zstd", "level": 12})["level"] == 12
    # No level: the algorithm's default, filled in so that explain shows what runs.
    assert SPEC.validate({}) == {"algorithm": "zstd", "level": 3, "frame_size": 256 * KIB}
    assert SPEC.validate({"algorithm": "gzip"})["level"] == 6


def test_parameters_from_strings_are_accepted():
    encoder = SPEC.encoder({"algorithm": "GZIP", "level": "9", "frame_size": "131072"}, CTX)
    b"".join(encoder.encode([b"abc" * 1000]))
    sysmeta = encoder.sysmeta()
    assert (sysmeta["alg"], sysmeta["level"], sysmeta["frame"]) == ("gzip", "9", "131072")


def test_sysmeta_before_the_end_of_the_body_is_refused():
    encoder = SPEC.encoder({}, CTX)
    with pytest.raises(Exception, match="before the body was encoded"):
        encoder.sysmeta()


@pytest.mark.parametrize("algorithm", ["gzip", "zstd"])
def test_encoders_in_parallel_threads_do_not_share_codec_state(algorithm):
    # The middleware runs filters in a thread pool: each encoder has its own codec objects.
    bodies = [log_text(400 * KIB, seed=i) + os.urandom(100 * KIB) for i in range(4)]
    results: dict[int, bytes] = {}

    def work(i: int) -> None:
        stored, sysmeta = put(bodies[i], algorithm=algorithm, frame_size=64 * KIB)
        results[i] = read_all(view(stored, sysmeta))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [results[i] for i in range(4)] == bodies


def test_zstd_compressors_are_lent_to_one_encoder_at_a_time_and_reused():
    first = SPEC.encoder({"algorithm": "zstd", "level": 7}, CTX)
    second = SPEC.encoder({"algorithm": "zstd", "level": 7}, CTX)
    assert first._codec._compressor is not second._codec._compressor  # both in use
    data = log_text(300 * KIB)
    stored = b"".join(first.encode([data]))
    third = SPEC.encoder({"algorithm": "zstd", "level": 7}, CTX)
    assert third._codec._compressor is first._codec._compressor  # given back, lent again
    assert read_all(view(b"".join(third.encode([data])), third.sysmeta())) == data
    assert read_all(view(stored, first.sysmeta())) == data
    abandoned = SPEC.encoder({"algorithm": "zstd", "level": 7}, CTX)
    stream = abandoned.encode(iter([data]))
    next(stream)
    stream.close()  # an upload that stops half-way gives its compressor back too
    assert SPEC.encoder({"algorithm": "zstd", "level": 7}, CTX)._codec._compressor \
        is abandoned._codec._compressor


class Reads:
    """A body as 10 KB chunks, counting how many were taken."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.taken = 0

    def __iter__(self):
        for at in range(0, len(self.data), 10_000):
            self.taken += 1
            yield self.data[at:at + 10_000]


@pytest.mark.parametrize("algorithm", ["gzip", "zstd"])
def test_a_body_whose_first_frames_do_not_compress_is_kept_unchanged(algorithm):
    data = os.urandom(2 * 1024 * KIB)
    encoder = SPEC.encoder({"algorithm": algorithm, "frame_size": 64 * KIB}, CTX)
    sample = Reads(data)
    assert encoder.keeps_unchanged(sample)
    # It looked at the frames the encoder would have tried, and no further.
    assert sample.taken * 10_000 < (compression.GIVE_UP_AFTER + 1) * 64 * KIB
    sysmeta = encoder.sysmeta()  # known before encoding: it goes with the headers
    assert sysmeta[UNCHANGED] == "1" and sysmeta["alg"] == algorithm
    assert b"".join(encoder.encode(iter([data[:100], data[100:]]))) == data
    assert encoder.sysmeta() == sysmeta
    assert SPEC.stored_unchanged(sysmeta)
    assert read_all(view(data, sysmeta), 5, 70_000) == data[5:70_000]


def test_a_body_that_compresses_is_encoded_and_read_no_further_than_it_takes():
    data = log_text(1024 * KIB)
    encoder = SPEC.encoder({"frame_size": 64 * KIB}, CTX)
    sample = Reads(data)
    assert not encoder.keeps_unchanged(sample)
    assert sample.taken * 10_000 < 2 * 64 * KIB  # the first frame told
    stored = b"".join(encoder.encode(iter([data])))
    sysmeta = encoder.sysmeta()
    assert UNCHANGED not in sysmeta and not SPEC.stored_unchanged(sysmeta)
    assert len(stored) < len(data) // 5 and read_all(view(stored, sysmeta)) == data


def test_compressible_data_after_the_sample_still_ends_up_raw_as_when_giving_up():
    # The same choice the encoder makes when it gives up, four frames sooner.
    data = os.urandom(4 * 64 * KIB) + log_text(256 * KIB)
    assert SPEC.encoder({"frame_size": 64 * KIB}, CTX).keeps_unchanged(Reads(data))
    stored, sysmeta = put(data, frame_size=64 * KIB)
    assert sysmeta["gave_up"] == str(compression.GIVE_UP_AFTER)
    assert len(stored) > len(data)


@pytest.mark.parametrize(("data", "kept"), [
    (b"", True),
    (os.urandom(1000), True),  # a short body is compressed whole to find out
    (os.urandom(100 * KIB), True),
    (log_text(1000), False),
    (os.urandom(64 * KIB) + log_text(64 * KIB), False),  # the second frame compresses
])
def test_short_bodies_are_judged_whole(data, kept):
    assert SPEC.encoder({"frame_size": 64 * KIB}, CTX).keeps_unchanged(Reads(data)) is kept
