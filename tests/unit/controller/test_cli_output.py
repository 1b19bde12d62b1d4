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
