"""The stored-object record's one home: its parsing, and readers that count on it."""

from __future__ import annotations

import json

import pytest

from iostack.filters.errors import IntegrityError
from iostack.stored_object import (
    CODE_KEY,
    PIPELINE_HEADER,
    RUNTIME_KEY,
    STORLET_KEY,
    AppliedFilter,
    dump_pipeline,
    is_sandboxed,
    load_pipeline,
)
from iostack.storlet_runtime.usage import referenced_versions

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
