"""The registry lists every built-in filter and its metadata survives JSON."""

import json

import pytest

from iostack.filters.errors import UnknownFilterError
from iostack.filters.library import builtin_metadata, filter_names, get_filter
from iostack.filters.metadata import FilterMetadata


def test_builtin_filters_are_listed():
    assert filter_names() == ["noop", "compression", "encryption", "caching", "bandwidth",
                              "csv_select", "json_select", "parquet_select", "grep", "expiry"]


@pytest.mark.parametrize("metadata", builtin_metadata(), ids=lambda m: m.name)
def test_metadata_json_round_trip(metadata):
    wire = json.loads(json.dumps(metadata.to_json()))
    assert FilterMetadata.from_json(wire) == metadata


def test_metadata_stored_with_the_retired_needs_whole_stream_still_loads():
    # Vocabularies in Redis and uploaded filters' metadata written before it went carry it.
    wire = get_filter("compression").metadata.to_json() | {"needs_whole_stream": False}
    assert FilterMetadata.from_json(wire) == get_filter("compression").metadata


def test_lookup_is_case_insensitive():
    assert get_filter("COMPRESSION") is get_filter("compression")
    assert get_filter("Encryption").metadata.runs_before == ()
    assert "encryption" in get_filter("compression").metadata.runs_before


def test_unknown_filter_names_the_known_ones_and_a_suggestion():
    with pytest.raises(UnknownFilterError, match=r"unknown filter 'compresion'.*'compression'\?"):
        get_filter("compresion")


def test_caching_applies_to_get_and_transforms_nothing():
    spec = get_filter("caching")
    assert spec.metadata.methods == frozenset({"GET"})
    assert not spec.transforms_body
