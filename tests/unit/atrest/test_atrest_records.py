"""Reading an object's stored form from its headers, and comparing it with today's pipeline."""

from __future__ import annotations

import json

import pytest

from iostack.atrest.inspect import (
    differences,
    inspect_json,
    stored_object,
    today_layers,
    written_under,
)
from iostack.atrest.scan import Target
from iostack.filters.errors import IntegrityError
from iostack.filters.library import builtin_metadata
from iostack.filters.metadata import FilterMetadata, Param

FILTERS = {m.name: m for m in builtin_metadata()}
ZSTD = {"algorithm": "zstd", "frame_size": 262144, "level": None}


def compressed_headers(**extra: str) -> dict[str, str]:
    record = [{"name": "compression", "params": ZSTD, "meta": {"alg": "zstd"}}]
    return {"Content-Length": "76", "Etag": "stored-md5", "Content-Type": "text/csv",
            "X-Object-Sysmeta-Iostack-Pipeline": json.dumps(record),
            "X-Object-Sysmeta-Iostack-Size": "12000",
            "X-Object-Sysmeta-Iostack-Etag": "tenant-md5",
            "X-Backend-Timestamp": "1795717198.61242", "X-Object-Meta-Owner": "alice",
            "X-Delete-At": "1900000000"} | extra


def explain(*entries: dict) -> dict:
    return {"pipeline": [{"stage": "proxy", "sandboxed": False} | e for e in entries]}


def test_a_filtered_object_reads_as_the_tenant_wrote_it_and_as_it_is_stored():
    found = stored_object("AUTH_t1", "logs", "a.csv", compressed_headers())
    assert (found.logical_bytes, found.stored_bytes, found.etag) == (12000, 76, "tenant-md5")
    assert found.user_meta == {"owner": "alice"} and found.delete_at == 1900000000
    assert [a.name for a in found.layers["proxy"]] == ["compression"]
    assert found.layers["object"] == [] and found.filtered and found.kind == "object"


def test_an_object_layer_record_gives_the_size_the_object_server_received():
    record = json.dumps([{"name": "compression", "params": ZSTD, "meta": {}}])
    found = stored_object("a", "c", "o", {"Content-Length": "50", "Etag": "x",
                                          "X-Object-Sysmeta-Iostack-Object-Pipeline": record,
                                          "X-Object-Sysmeta-Iostack-Object-Size": "900",
                                          "X-Object-Sysmeta-Iostack-Object-Etag": "t"})
    assert (found.logical_bytes, found.stored_bytes, found.etag) == (900, 50, "t")


def test_an_unfiltered_object_is_its_stored_form():
    found = stored_object("a", "c", "o", {"Content-Length": "10", "Etag": '"e"'})
    assert (found.logical_bytes, found.stored_bytes, found.etag, found.filtered) == \
        (10, 10, "e", False)


@pytest.mark.parametrize("headers, kind", [
    ({"X-Static-Large-Object": "True"}, "slo-manifest"),
    ({"X-Object-Manifest": "segs/"}, "dlo-manifest"),
    ({"X-Object-Sysmeta-Symlink-Target": "c/o"}, "symlink"),
])
def test_manifests_and_symlinks_are_never_stored_differently(headers, kind):
    found = stored_object("a", "c", "o", {"Content-Length": "0"} | headers)
    assert found.kind == kind
    assert differences(found, today_layers(explain({"filter": "compression", "params": {}}),
                                           FILTERS), FILTERS) == []


def test_a_damaged_record_is_an_integrity_error():
    with pytest.raises(IntegrityError):
        stored_object("a", "c", "o", {"X-Object-Sysmeta-Iostack-Pipeline": "{not json"})


def test_differences_name_the_layer_and_both_pipelines():
    found = stored_object("a", "c", "o", compressed_headers())
    same = today_layers(explain({"filter": "compression", "params": {"algorithm": "zstd"}},
                                {"filter": "bandwidth", "params": {"get": 1000}}), FILTERS)
    assert differences(found, same, FILTERS) == []  # defaults filled; bandwidth stores nothing
    gzip = today_layers(explain({"filter": "compression", "params": {"algorithm": "gzip"}}),
                        FILTERS)
    [reason] = differences(found, gzip, FILTERS)
    assert reason.startswith("proxy layer: stored with compression(algorithm=zstd")
    assert "today compression(algorithm=gzip" in reason
    on_object = today_layers(explain({"filter": "compression", "params": {}, "stage": "object"}),
                             FILTERS)
    assert len(differences(found, on_object, FILTERS)) == 2  # leaves one layer, joins the other


def test_secret_parameters_are_masked_and_never_compared():
    meta = FilterMetadata("vault", "uploaded", (Param("key", "secret"), Param("mode", "str")))
    record = [{"name": "vault", "params": {"key": "hunter2", "mode": "x"},
               "meta": {"iostack.runtime": "storlet", "iostack.storlet": "vault-1.py",
                        "iostack.code_sha256": "abc"}}]
    found = stored_object("a", "c", "o", {"Content-Length": "5",
                                          "X-Object-Sysmeta-Iostack-Pipeline": json.dumps(record),
                                          "X-Object-Sysmeta-Iostack-Size": "5"})
    filters = FILTERS | {"vault": meta}
    answer = explain({"filter": "vault", "params": {"key": "***", "mode": "x"},
                      "sandboxed": True})
    result = inspect_json(found, answer, filters, [])
    [item] = result["layers"]["proxy"]
    assert item["params"] == {"key": "***", "mode": "x"}
    assert item["sandboxed"] == {"storlet": "vault-1.py", "code_sha256": "abc"}
    assert "hunter2" not in json.dumps(result)
    assert result["today"]["differs"] is False


def test_the_version_written_under_is_the_last_one_before_the_timestamp():
    history = [{"version": 2, "time": 300.0}, {"version": 1, "time": 200.0},
               {"version": 0, "time": 100.0}]
    assert written_under(history, "0000000250.00000") == 1
    assert written_under(history, "0000000300.00000_0000000000000001") == 2
    assert written_under(history, "0000000050.00000") is None


@pytest.mark.parametrize("text, target", [
    (None, Target(None)),
    ("AUTH_t1", Target("AUTH_t1")),
    ("/v1/AUTH_t1/logs/", Target("AUTH_t1", "logs")),
    ("container:*/logs", Target(None, "logs")),
    ("AUTH_t1/logs/a/b.csv", Target("AUTH_t1", "logs", "a/b.csv")),
])
def test_targets(text, target):
    assert Target.parse(text) == target
