"""Parameter checking and the streaming helpers every filter relies on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from iostack.filters.base import BytesSource, FilterContext, reframe, split_exact
from iostack.filters.errors import FilterError, IntegrityError, ParamError
from iostack.filters.library import get_filter
from iostack.filters.metadata import FilterMetadata, Param, resolve_params

META = FilterMetadata(
    name="demo",
    description="parameter kinds",
    params=(
        Param("count", "int", default=3, minimum=1, maximum=10),
        Param("ratio", "float", default=0.5, minimum=0, maximum=1),
        Param("size", "size", default=1024, unit="bytes"),
        Param("on", "bool", default=False),
        Param("mode", "enum", default="fast", choices=("fast", "slow")),
        Param("label", "str", default=""),
    ),
)


def test_defaults_fill_missing_parameters():
    assert resolve_params(META, {}) == {
        "count": 3, "ratio": 0.5, "size": 1024, "on": False, "mode": "fast", "label": ""}


def test_strings_are_converted():
    got = resolve_params(META, {"count": "7", "ratio": "0.25", "size": "4096", "on": "TRUE",
                                "mode": "Slow", "label": "x"})
    assert got == {"count": 7, "ratio": 0.25, "size": 4096, "on": True, "mode": "slow",
                   "label": "x"}


@pytest.mark.parametrize(
    ("params", "param", "message"),
    [
        ({"count": 0}, "count", "0 is below the minimum 1"),
        ({"count": 11}, "count", "11 is above the maximum 10"),
        ({"count": 2.5}, "count", "expected an integer"),
        ({"count": True}, "count", "expected an integer"),
        ({"ratio": "half"}, "ratio", "expected a number"),
        ({"size": "1M"}, "size", r"expected an integer \(bytes\)"),
        ({"on": "maybe"}, "on", "expected true or false"),
        ({"mode": "medium"}, "mode", "expected one of fast, slow"),
        ({"label": 5}, "label", "expected a string"),
        ({"colour": "red"}, "colour", r"unknown parameter \(known: count, label, mode, on, "),
    ],
)
def test_bad_values_name_the_parameter_and_the_reason(params, param, message):
    with pytest.raises(ParamError, match=message) as caught:
        resolve_params(META, params)
    assert caught.value.param == param
    assert str(caught.value).startswith(f"filter 'demo', parameter '{param}': ")


def test_caching_spec_has_no_body_transform():
    spec = get_filter("caching")
    with pytest.raises(FilterError, match="does not transform"):
        spec.encoder({}, FilterContext("AUTH_t1"))
    with pytest.raises(FilterError, match="does not transform"):
        spec.open_view(BytesSource(b""), {}, FilterContext("AUTH_t1"))
    assert spec.validate({"head": "1048576"}) == {"head": 1048576}


def test_noop_is_the_identity_and_its_view_is_the_stored_object():
    spec = get_filter("noop")
    encoder = spec.encoder(None, FilterContext("AUTH_t1"))
    assert b"".join(encoder.encode([b"ab", b"", b"c"])) == b"abc"
    assert encoder.sysmeta() == {}
    stored = BytesSource(b"abc")
    assert spec.open_view(stored, {}, FilterContext("AUTH_t1")) is stored


def test_context_path():
    assert FilterContext("AUTH_t1", "c", "a/b").path == "/AUTH_t1/c/a/b"
    assert FilterContext("AUTH_t1").path == "/AUTH_t1"


@given(chunks=st.lists(st.binary(max_size=50), max_size=30), size=st.integers(1, 40))
def test_reframe_cuts_exact_pieces(chunks, size):
    pieces = list(reframe(chunks, size))
    assert b"".join(pieces) == b"".join(chunks)
    assert all(len(p) == size for p in pieces[:-1])
    assert all(0 < len(p) <= size for p in pieces)


def test_reframe_keeps_its_bytes_when_the_producer_reuses_its_buffer():
    def reused_buffer():
        buffer = bytearray(3)
        for value in (b"abc", b"def", b"ghi"):
            buffer[:] = value
            yield buffer  # a producer that overwrites what it yielded before

    assert list(reframe(reused_buffer(), 4)) == [b"abcd", b"efgh", b"i"]


def test_split_exact_refuses_short_and_long_streams():
    assert list(split_exact([b"abc", b"de"], [2, 3])) == [b"ab", b"cde"]
    with pytest.raises(IntegrityError, match="ended early"):
        list(split_exact([b"abc"], [2, 3]))
    with pytest.raises(IntegrityError, match="longer"):
        list(split_exact([b"abcdef"], [2, 3]))


def test_split_exact_cuts_across_chunks_and_passes_whole_chunks_through():
    whole = b"w" * 5
    pieces = list(split_exact([b"ab", b"cdefg", b"h", whole, b"ij"], [3, 5, 5, 2]))
    assert pieces == [b"abc", b"defgh", whole, b"ij"]
    assert pieces[2] is whole  # not copied


def test_split_exact_keeps_bytes_a_producer_overwrites():
    def reused_buffer():
        buffer = bytearray(3)
        for value in (b"abc", b"def", b"ghi"):
            buffer[:] = value
            yield buffer

    assert list(split_exact(reused_buffer(), [2, 4, 3])) == [b"ab", b"cdef", b"ghi"]
