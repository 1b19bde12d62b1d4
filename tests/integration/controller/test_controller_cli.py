"""The ``iostack`` CLI against a real controller process and the all-in-one's Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_validate_exit_status_and_messages(cli, api):
    ok = cli("policy", "validate", "FOR TENANT t1 DO SET compression")
    assert ok.returncode == 0 and ok.stdout.strip() == "valid: 1 statement"
    bad = cli("policy", "validate", "FOR TENANT t1 DO SET COMPRESION")
    assert bad.returncode == 1
    assert bad.stderr.strip() == \
        "line 1, column 22: unknown filter 'COMPRESION' (did you mean COMPRESSION?)"
    assert api.policies() == []


def test_add_list_explain_rm(cli, api, tmp_path):
    policies = tmp_path / "policies.txt"
    policies.write_text("# demo\nFOR TENANT t1 DO SET compression WITH level=5\n"
                        "FOR CONTAINER t1/logs DO SET compression WITH algorithm=gzip\n")
    added = cli("policy", "add", "-f", str(policies), "--json")
    assert added.returncode == 0, added.stderr
    ids = [p["id"] for p in json.loads(added.stdout)["policies"]]
    listed = cli("policy", "list")
    assert listed.returncode == 0
    assert listed.stdout.splitlines()[0].split() == ["ID", "STATUS", "TARGETS", "ACTIONS", "ACTOR",
                                                       "TEXT"]
    assert all(pid in listed.stdout for pid in ids)
    explained = cli("policy", "explain", "PUT", "/v1/AUTH_t1/logs/a.log", "--size", "2M",
                    "--header", "X-Object-Meta-Class:hot")
    assert explained.returncode == 0
    assert "PUT /v1/AUTH_t1/logs/a.log (2097152 bytes)" in explained.stdout
    row = next(line for line in explained.stdout.splitlines() if "compression" in line)
    assert "algorithm=gzip" in row and "level=5" in row
    as_json = json.loads(cli("policy", "explain", "PUT", "/v1/AUTH_t1/logs/a.log",
                             "--json").stdout)
    assert as_json["pipeline"][0]["params"]["level"] == 5
    removed = cli("policy", "rm", *ids)
    assert removed.returncode == 0 and removed.stdout.count("removed") == 2
    missing = cli("policy", "rm", ids[0])
    assert missing.returncode == 1 and f"no policy '{ids[0]}'" in missing.stderr


def test_atomic_failure_through_the_cli(cli, api):
    result = cli("policy", "add", "FOR TENANT t1 DO SET noop; FOR TENANT t1 DO SET nope")
    assert result.returncode == 1 and "line 1, column 49: unknown filter 'nope'" in result.stderr
    assert result.stderr.splitlines()[-1] == "nothing was stored"
    assert api.policies() == []


def test_policy_show_shows_the_warnings_stored_with_it(cli, api):
    added = cli("policy", "add", "--json", "FOR TENANT t1 DO SET bandwidth WITH get=30Mbps")
    assert added.returncode == 0, added.stderr
    assert "warning: line 1, column 41: get=30Mbps is in bits: taken as 3,750,000 bytes/s" \
        in added.stderr
    (record,) = json.loads(added.stdout)["policies"]
    shown = cli("policy", "show", record["id"])
    assert shown.returncode == 0, shown.stderr
    assert "warning: line 1, column 41: get=30Mbps is in bits" in shown.stdout
    api.delete_policy(record["id"])


def test_registry_verbs(cli, api, tmp_path):
    meta = tmp_path / "rot13.json"
    meta.write_text(json.dumps({"name": "rot13", "description": "toy", "methods": ["GET"]}))
    # The code must pass its check in a sandbox (it speaks IOStack's protocol itself).
    code = Path(__file__).parents[1] / "storlet_runtime" / "zlib_filter.py"
    registered = cli("filter", "register", str(meta), "--code", str(code))
    assert registered.returncode == 0, registered.stderr
    listed = cli("filter", "list")
    assert any(line.split()[:5] == ["rot13", "object", "GET", "proxy", "storlet"]
               for line in listed.stdout.splitlines())
    assert cli("metric", "add", "ERRORS_SEC", "--kind", "number").returncode == 0
    assert cli("group", "set", "silver", "t1", "t2").returncode == 0
    assert cli("class", "set", "FAST", "SET rot13").returncode == 0
    assert cli("objtype", "set", "PARQUET", r"\.parquet$").returncode == 0
    added = cli("policy", "add", "FOR G:silver WHEN ERRORS_SEC > 5 DO SET FAST "
                                 "TO OBJECT_TYPE=PARQUET")
    assert added.returncode == 0, added.stderr
    assert "stored" in cli("policy", "list").stdout
    assert json.loads(cli("group", "list", "--json").stdout)["silver"] == ["AUTH_t1", "AUTH_t2"]
    refused = cli("filter", "rm", "rot13")
    assert refused.returncode == 1 and "used by policies" in refused.stderr


def test_the_cli_finds_the_all_in_one_by_itself(cli, aio):
    # No --url/--token and no IOSTACK_URL/IOSTACK_TOKEN: aio.json of the stack is used.
    found = cli("policy", "validate", "FOR TENANT t1 DO SET noop",
                env_extra={"IOSTACK_URL": "", "IOSTACK_TOKEN": "",
                           "IOSTACK_STATE_DIR": aio["state_dir"]})
    assert found.returncode == 0, found.stderr
    missing = cli("policy", "list", env_extra={"IOSTACK_URL": "", "IOSTACK_TOKEN": "",
                                               "IOSTACK_STATE_DIR": "/nonexistent"})
    assert missing.returncode == 3 and "no all-in-one found" in missing.stderr


def test_history_diff_and_rollback_through_the_cli(cli, api):
    start = api.history(1)["history"][0]["version"] if api.history(1)["history"] else None
    assert cli("policy", "add", "FOR TENANT t1 DO SET noop").returncode == 0
    version = api.history(1)["history"][0]["version"]
    assert start is None or version > start
    assert cli("policy", "add", "FOR CONTAINER t1/logs DO SET compression WITH level=4"
               ).returncode == 0
    shown = cli("policy", "history", "--limit", "2")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0].split() == ["VERSION", "WHEN", "WHO", "CHANGE", "POLICIES"]
    assert lines[1].split()[0] == str(version + 1) and "admin" in lines[1]
    assert "+P" in lines[1] and "compression WITH level=4" in lines[1]
    diff = cli("policy", "diff", str(version), str(version + 1))
    assert diff.returncode == 0
    assert "+ FOR CONTAINER t1/logs DO SET compression WITH level=4" in diff.stdout
    assert "+ container AUTH_t1/logs: SET compression(level=4)" in diff.stdout
    dry = cli("policy", "rollback", str(version), "--dry-run")
    assert dry.returncode == 0 and "dry run" in dry.stdout
    assert len(api.policies()) == 2
    back = cli("policy", "rollback", str(version))
    assert back.returncode == 0, back.stderr
    assert "removed P" in back.stdout and "compression" in back.stdout
    assert [p["text"] for p in api.policies()] == ["FOR TENANT t1 DO SET noop"]
    newest = api.history(1)["history"][0]
    assert newest["op"] == "rollback" and newest["note"] == f"rollback to version {version}"
    missing = cli("policy", "rollback", "9999")
    assert missing.returncode == 1 and "no policy history version 9999" in missing.stderr
    assert missing.stderr.splitlines()[-1] == "nothing was changed"
