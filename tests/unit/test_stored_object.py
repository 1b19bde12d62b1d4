"""The stored-object record's one home: its parsing, and readers that count on it."""

from __future__ import annotations

import json

import pytest

from iostack import __version__
from iostack.filters.errors import FilterUnavailable, IntegrityError
from iostack.stored_object import (
    CODE_KEY,
    OBJECT_LAYER,
    PIPELINE_HEADER,
    RECORD_FORMAT,
    RUNTIME_KEY,
    STORLET_KEY,
    TENANT_LAYER,
    AppliedFilter,
    NewerRecordError,
    dump_pipeline,
    is_sandboxed,
    load_pipeline,
    read_pipeline,
    record_headers,
)
from iostack.storlet_runtime.tools.version_usage import referenced_versions

SANDBOXED = {RUNTIME_KEY: "storlet", STORLET_KEY: "rot13-1.0.py", CODE_KEY: "ab" * 32}


def test_a_record_reads_back_as_written():
    applied = [AppliedFilter("compression", {"level": 3}, {"alg": "zstd"}),
               AppliedFilter("rot13", {}, SANDBOXED)]
    loaded = load_pipeline(dump_pipeline(applied))
    assert loaded == applied
    assert [is_sandboxed(a.meta) for a in loaded] == [False, True]


@pytest.mark.parametrize("text", ["not json", "{}", '[{"params": {}}]',
                                  '[{"name": "x", "meta": {"k": 1}}]'])
def test_a_damaged_record_is_an_integrity_error(text):
    with pytest.raises(IntegrityError, match="object sysmeta"):
        load_pipeline(text)


def test_the_versions_an_object_needs_come_from_its_record():
    record = json.dumps([{"name": "rot13", "params": {}, "meta": SANDBOXED},
                         {"name": "other", "params": {}, "meta": {
                             **SANDBOXED, STORLET_KEY: "other.py", CODE_KEY: "cd" * 32}}])
    metadata = {PIPELINE_HEADER.lower(): record, "content-type": "text/plain"}
    assert referenced_versions(metadata, {"rot13-1.0.py"}) == {"ab" * 32}
    assert referenced_versions(metadata, {"absent.py"}) == set()
    assert referenced_versions({PIPELINE_HEADER: "[not json"}, {"rot13-1.0.py"}) == set()
    assert referenced_versions({}, {"rot13-1.0.py"}) == set()


def test_a_record_reads_when_its_format_is_known_or_absent():
    applied = [AppliedFilter("compression", {"level": 3}, {"alg": "zstd"})]
    headers = record_headers(OBJECT_LAYER, applied)
    assert headers[OBJECT_LAYER.format_header] == f"{RECORD_FORMAT} iostack/{__version__}"
    lower = {name.lower(): value for name, value in headers.items()}
    assert read_pipeline(lower, OBJECT_LAYER) == applied  # header names in any case
    assert read_pipeline({OBJECT_LAYER.pipeline_header: headers[OBJECT_LAYER.pipeline_header]},
                         OBJECT_LAYER) == applied  # written before formats were recorded


def test_a_newer_format_is_refused_naming_it_and_a_damaged_one_is_an_integrity_error():
    headers = record_headers(TENANT_LAYER, [])
    headers[TENANT_LAYER.format_header] = f"{RECORD_FORMAT + 1} iostack/3.0.0"
    with pytest.raises(NewerRecordError, match=f"format {RECORD_FORMAT + 1}, written by "
                                               "iostack/3.0.0") as refused:
        read_pipeline(headers, TENANT_LAYER)
    assert isinstance(refused.value, FilterUnavailable)  # a 503 where it meets a request
    for damaged in ("", "v2", "-1 x"):
        headers[TENANT_LAYER.format_header] = damaged
        with pytest.raises(IntegrityError, match="bad X-Object-Sysmeta-Iostack-Format"):
            read_pipeline(headers, TENANT_LAYER)
