"""What the CLI prints for ``metrics watch`` (table and ``--json``) and ``policy show``."""

from __future__ import annotations

import argparse
import json

from iostack.controller import cli
from iostack.controller.formatting import monitoring_view, policy_detail

SNAPSHOT = {
    "interval": 1_700_000_000.0, "seconds": 2.0, "received": 12, "late": 0, "lost": 0,
    "connected": True, "actors": {},
    # One proxy on :8080 with two workers, and one on :8081 with one.
    "sources": {"proxy": ["proxy-127.0.0.1:8080-101", "proxy-127.0.0.1:8080-102",
                          "proxy-127.0.0.1:8081-201"]},
    "targets": {"AUTH_t1": {"PUTS_SEC": 3.0}},
}


def test_watch_counts_proxies_by_address_and_workers_apart():
    header = monitoring_view(SNAPSHOT).splitlines()[0]
    assert "proxies 2 (3 workers)" in header
    one = SNAPSHOT | {"sources": {"proxy": ["proxy-127.0.0.1:8080-101",
                                            "proxy-127.0.0.1:8080-102"]}}
    assert "proxies 1 (2 workers)" in monitoring_view(one)


class FakeClient:
    def monitoring(self):
        return SNAPSHOT


def test_watch_json_prints_one_json_document_per_refresh(capsys):
    args = argparse.Namespace(json=True, count=2, every=0)
    assert cli.metric_watch(FakeClient(), args) is None
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line) for line in lines] == [SNAPSHOT, SNAPSHOT]


def test_policy_show_prints_the_stored_warnings():
    record = {"id": "P1", "status": "active", "created": "2026-11-26T18:00:00Z",
              "text": "FOR TENANT t1 DO SET bandwidth WITH get=30", "rules": [],
              "warnings": [{"line": 1, "column": 41, "message": "get=30 has no unit"}]}
    assert "warning: line 1, column 41: get=30 has no unit" in policy_detail(record)


def registry_view() -> dict[str, dict]:
    """The registry's filters as ``GET /v1/filters`` lists them: library and block ones."""
    from iostack.controller.builtins import builtin_filters

    return {m.name: m.to_json() for m in builtin_filters()}


def test_filter_list_has_one_vocabulary_with_a_kind_column():
    from iostack.controller.formatting import filter_rows

    lines = filter_rows(registry_view()).splitlines()
    assert lines[0].split()[:6] == ["NAME", "KIND", "METHODS", "STAGES", "RUNTIME", "DESCRIPTION"]
    kinds = {line.split()[0]: line.split()[1] for line in lines[1:]}
    assert (kinds["noop"], kinds["nop"], kinds["bandwidth"], kinds["bw"]) == \
        ("object", "block", "object", "block")
    assert kinds["iops"] == "block" and kinds["csv_select"] == "object"
    rows = lines[1:]
    first_block = next(i for i, row in enumerate(rows) if row.split()[1] == "block")
    assert all(row.split()[1] == "block" for row in rows[first_block:])  # object ones first
    nop = next(row for row in rows if row.split()[0] == "nop")
    assert "volume stack" in nop and "proxy" not in nop


def test_filter_show_gives_sizes_and_rates_in_human_units():
    from iostack.controller.formatting import filter_detail

    filters = registry_view()
    compression = filter_detail(filters["compression"])
    assert "256 KiB" in compression and "8 MiB" in compression and "object filter" in compression
    bw = filter_detail(filters["bw"])
    assert bw.startswith("bw (block filter)") and "volume stacks" in bw
    assert "0 B/s" in bw
    bandwidth = filter_detail(filters["bandwidth"])
    assert "0 ops/s" in bandwidth and "2 s" in bandwidth


def test_qos_status_says_what_an_unset_capacity_means():
    from iostack.controller.formatting import qos_view

    unset = qos_view({"capacity": {"get": 0, "put": 0}, "scopes": {}}).splitlines()[0]
    assert unset == ("capacity: get not set, put not set (only caps are enforced; "
                     "qos_capacity_get/put honour minimums and share spare capacity)")
    assert qos_view({"capacity": {"get": 1e8, "put": 0}, "scopes": {}}).splitlines()[0] == \
        "capacity: get 100 MB/s, put not set"
