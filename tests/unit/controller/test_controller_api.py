"""The REST API through Flask's test client, on a real Redis (private key prefix)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import redis

import iostack
from iostack.controller.app import create_app
from iostack.controller.openapi import openapi_document
from iostack.ports import wait_until


def test_health_and_openapi_need_no_token(client):
    assert client.get("/v1/health").json == {"status": "ok", "version": iostack.__version__}
    assert client.get("/v1/openapi.json").json["openapi"].startswith("3.")


def test_openapi_documents_exactly_the_routes(client):
    app = client.application
    routes = set()
    for rule in app.url_map.iter_rules():
        if not rule.rule.startswith("/v1"):
            continue
        path = rule.rule.replace("<", "{").replace(">", "}")
        methods = rule.methods - {"HEAD", "OPTIONS"}
        if "{any(" in path:  # one registry route stands for each kind
            prefix, rest = path.split("{any(", 1)
            kinds, rest = rest.split("):kind}", 1)
            for kind in kinds.split(", "):
                routes |= {(f"{prefix}{kind}{rest}", m.lower()) for m in methods}
        else:
            routes |= {(path.replace("{int:", "{").replace("{path:", "{"), m.lower())
                       for m in methods}
    documented = {(path, method) for path, ops in openapi_document()["paths"].items()
                  for method in ops}
    assert routes == documented


@pytest.mark.parametrize("method, path", [
    ("get", "/v1/policies"), ("post", "/v1/policies"), ("delete", "/v1/policies/P1"),
    ("get", "/v1/filters"), ("put", "/v1/metrics/X"), ("post", "/v1/explain"),
])
def test_everything_else_needs_the_token(client, method, path):
    body = {"method": "GET", "path": "/v1/AUTH_t1/c/o", "text": "FOR ALL DO SET noop"}
    response = getattr(client, method)(path, json=body)
    assert response.status_code == 401
    assert response.json["error"].startswith("authentication required")
    response = getattr(client, method)(path, json=body, headers={"X-Auth-Token": "wrong" * 8})
    assert response.status_code == 401


def test_bearer_header_is_accepted(client, admin):
    response = client.get("/v1/policies",
                          headers={"Authorization": "Bearer " + admin["X-Auth-Token"]})
    assert response.status_code == 200


def test_policy_life_cycle(client, admin):
    bad = client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET COMPRESION"},
                      headers=admin)
    assert bad.status_code == 400
    assert bad.json["diagnostics"] == [{"line": 1, "column": 22, "message":
                                        "unknown filter 'COMPRESION' (did you mean COMPRESSION?)"}]
    added = client.post("/v1/policies", data="FOR TENANT t1 DO SET compression WITH level=5",
                        content_type="text/plain", headers=admin)
    assert added.status_code == 201
    pid = added.json["policies"][0]["id"]
    assert [p["id"] for p in client.get("/v1/policies", headers=admin).json["policies"]] == [pid]
    assert client.get(f"/v1/policies/{pid}", headers=admin).json["actions"][0]["params"] == \
        {"level": 5}
    explained = client.post("/v1/explain", headers=admin, json={
        "method": "PUT", "path": "/v1/AUTH_t1/c/o.txt", "size": 10})
    assert [e["filter"] for e in explained.json["pipeline"]] == ["compression"]
    assert client.delete(f"/v1/policies/{pid}", headers=admin).status_code == 200
    assert client.get(f"/v1/policies/{pid}", headers=admin).status_code == 404
    assert client.delete(f"/v1/policies/{pid}", headers=admin).json["error"] == \
        f"no policy '{pid}'"


def test_explain_shows_the_defaults_a_filter_applies(client, admin):
    for text in ("FOR CONTAINER t1/z DO SET compression",
                 "FOR CONTAINER t1/g DO SET compression WITH algorithm=gzip"):
        assert client.post("/v1/policies", headers=admin, json={"text": text}).status_code == 201
    levels = [client.post("/v1/explain", headers=admin, json={"method": "PUT", "path": path})
              .json["pipeline"][0]["params"]["level"] for path in ("/v1/AUTH_t1/z/o",
                                                                  "/v1/AUTH_t1/g/o")]
    assert levels == [3, 6]  # zstd's and gzip's own defaults, not "level: null"


def test_positional_params_compile_to_the_filters_names(client, admin):
    added = client.post("/v1/policies", headers=admin, json={
        "text": "FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=30MBps, put=10MBps"})
    assert added.status_code == 201, added.json
    explained = client.post("/v1/explain", headers=admin, json={
        "method": "GET", "path": "/v1/AUTH_T2/c/o"})
    (entry,) = explained.json["pipeline"]
    assert (entry["filter"], entry["params"]["get"], entry["params"]["put"]) == \
        ("bandwidth", 30_000_000, 10_000_000)
    bad = client.post("/v1/policies", headers=admin, json={
        "text": "FOR TENANT T2 DO SET BANDWIDTH WITH PARAM9=1MBps"})
    assert bad.status_code == 400
    (diagnostic,) = bad.json["diagnostics"]
    assert (diagnostic["line"], diagnostic["column"]) == (1, 37)
    assert diagnostic["message"].startswith("PARAM9: bandwidth declares 6 parameters")


def test_validate_and_dry_run_change_nothing(client, admin):
    ok = client.post("/v1/policies/validate", json={"text": "FOR TENANT t1 DO SET noop"},
                     headers=admin)
    assert ok.status_code == 200 and ok.json["valid"] is True
    dry = client.post("/v1/policies?dry_run=true", json={"text": "FOR TENANT t1 DO SET noop"},
                      headers=admin)
    assert dry.status_code == 200 and dry.json["dry_run"] is True
    assert client.get("/v1/policies", headers=admin).json["policies"] == []


def test_registries_round_trip_and_refuse_in_use_deletes(client, admin):
    meta = {"description": "upper-cases text", "methods": ["GET"], "stages": ["proxy"],
            "params": [{"name": "limit", "type": "size", "maximum": 1048576}]}
    assert client.put("/v1/filters/upper", json=meta, headers=admin).status_code == 201
    assert client.put("/v1/metrics/errors_sec", json={"kind": "number"},
                      headers=admin).status_code == 201
    assert client.put("/v1/groups/gold", json={"tenants": ["t1"]}, headers=admin).json == \
        {"name": "gold", "tenants": ["AUTH_t1"]}
    assert client.put("/v1/object_types/parquet", json={"patterns": [r"\.parquet$"]},
                      headers=admin).status_code == 201
    assert client.put("/v1/classes/turbo", json={"actions": "SET upper WITH limit=1K"},
                      headers=admin).status_code == 201
    added = client.post("/v1/policies", headers=admin, json={
        "text": "FOR G:gold WHEN ERRORS_SEC > 1 DO SET TURBO TO OBJECT_TYPE=PARQUET"})
    assert added.status_code == 201, added.json
    for kind, name in [("filters", "upper"), ("metrics", "ERRORS_SEC"), ("groups", "gold"),
                       ("object_types", "parquet")]:
        refused = client.delete(f"/v1/{kind}/{name}", headers=admin)
        assert refused.status_code == 409, (kind, refused.json)
        assert "used by policies P1" in refused.json["error"]
    listed = client.get("/v1/filters", headers=admin).json["filters"]
    assert listed["upper"]["extra"]["origin"] == "admin"
    assert "compression" in listed


@pytest.mark.parametrize("path, body, message", [
    ("/v1/filters/Bad", {"description": "x"}, "filter names are lower-case"),
    ("/v1/filters/x", {"description": "x", "methods": ["FETCH"]}, "unknown methods"),
    ("/v1/filters/x", {"description": "x", "params": [{"name": "a", "type": "blob"}]},
     "unknown type 'blob'"),
    ("/v1/metrics/m", {"kind": "furlongs"}, "kind must be one of"),
    ("/v1/classes/c", {"actions": "SET nothing"}, "unknown filter 'nothing'"),
    ("/v1/classes/compression", {"actions": "SET noop"}, "would hide the filter"),
    ("/v1/groups/g", {"tenants": "t1"}, "field 'tenants' must be a list"),
    ("/v1/object_types/t", {"patterns": ["(unclosed"]}, "bad pattern '(unclosed'"),
    # Python's re takes a backreference; the data path's RE2 cannot run it.
    ("/v1/object_types/t", {"patterns": [r"(a)\1"]},
     r"bad pattern '(a)\\1': not a valid RE2 regular expression: invalid escape sequence"),
    ("/v1/object_types/t", {}, "missing field 'patterns'"),
])
def test_bad_registrations_are_rejected_with_a_reason(client, admin, path, body, message):
    response = client.put(path, json=body, headers=admin)
    assert response.status_code == 400
    assert message in response.json["error"]


def test_bad_bodies(client, admin):
    assert client.post("/v1/policies", data="not json", content_type="application/json",
                       headers=admin).json["error"] == "the body must be a JSON object"
    huge = client.post("/v1/policies", json={"text": "x" * 10000}, headers=admin)
    assert huge.status_code == 413 and huge.json["status"] == 413
    bad = client.post("/v1/explain", json={"method": "PUT", "path": "/nope"}, headers=admin)
    assert bad.status_code == 400 and "not a Swift path" in bad.json["error"]
    assert client.get("/v1/nothing", headers=admin).status_code == 404


def test_secret_parameters_are_never_shown(client, admin):
    meta = {"description": "x", "params": [{"name": "key", "type": "secret"}]}
    client.put("/v1/filters/vault", json=meta, headers=admin)
    added = client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET vault WITH "
                                                      "key='s3cr3t'"}, headers=admin)
    assert "s3cr3t" not in added.get_data(as_text=True)
    listing = client.get("/v1/policies", headers=admin).get_data(as_text=True)
    explained = client.post("/v1/explain", headers=admin, json={
        "method": "PUT", "path": "/v1/AUTH_t1/c/o"}).get_data(as_text=True)
    assert "s3cr3t" not in listing and "s3cr3t" not in explained and "***" in explained


def test_filter_code_upload_makes_it_a_sandboxed_filter(client, admin, tmp_path):
    client.put("/v1/filters/upper", json={"description": "x", "methods": ["GET"]}, headers=admin)
    code = b"class Upper:\n    pass\n"
    uploaded = client.put("/v1/filters/upper/code", data=code,
                          content_type="application/octet-stream", headers=admin)
    assert uploaded.status_code == 201
    assert uploaded.json["extra"]["runtime"] == "storlet"
    assert client.get("/v1/filters/upper/code", headers=admin).data == code
    client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET upper"}, headers=admin)
    explained = client.post("/v1/explain", headers=admin,
                            json={"method": "GET", "path": "/v1/AUTH_t1/c/o"})
    assert explained.json["pipeline"][0]["sandboxed"] is True
    assert client.put("/v1/filters/none/code", data=code, headers=admin).status_code == 404


def test_missing_admin_token_refuses_to_start(app_config):
    with pytest.raises(ValueError, match="admin_token must be set"):
        create_app(app_config | {"admin_token": ""})


def test_redis_down_is_a_503(app_config):
    app = create_app(app_config | {"redis_url": "redis://127.0.0.1:1/0"})
    client = app.test_client()
    assert client.get("/v1/health").status_code == 503
    response = client.get("/v1/policies", headers={"X-Auth-Token": app_config["admin_token"]})
    assert response.status_code == 503 and "Redis" in response.json["error"]


def test_a_policy_change_without_a_writable_master_is_a_503_naming_why(
        app_config, redis_server, admin):
    """A replica only (the master gone, no failover yet): the change answers 503 saying
    there is no writable master, and nothing of it is applied anywhere."""
    import secrets

    from iostack.controller.registry import Registries
    from iostack.policy.redis_keys import KeySpace

    password = secrets.token_hex(16)
    master = redis_server(f"requirepass {password}")
    port = master.rsplit(":", 1)[1].split("/")[0]
    replica = redis_server(f"requirepass {password}", f"masterauth {password}",
                           f"replicaof 127.0.0.1 {port}")
    master_url, replica_url = (u.replace("redis://", f"redis://:{password}@")
                               for u in (master, replica))
    keys = KeySpace(app_config["key_prefix"])
    registries = Registries(redis.Redis.from_url(master_url, decode_responses=True), keys)
    registries.seed()
    registries.add_tenant("t1")
    replica_client = redis.Redis.from_url(replica_url, decode_responses=True)
    assert wait_until(lambda: replica_client.exists(keys.marker), 10)
    version = replica_client.get(keys.version)
    app = create_app(app_config | {"redis_url": replica_url})
    response = app.test_client().post("/v1/policies", headers=admin,
                                      json={"text": "FOR TENANT t1 DO SET encryption"})
    assert response.status_code == 503, response.json
    assert "no writable master" in response.json["error"]
    assert "nothing was changed" in response.json["error"]
    assert replica_client.hlen(keys.policies) == 0
    assert replica_client.get(keys.version) == version


def test_explain_a_volume(client, admin):
    client.put("/v1/filters/xor", headers=admin, json={
        "description": "x", "params": [{"name": "key", "type": "int"}],
        "extra": {"domain": "block"}})
    client.post("/v1/policies", headers=admin, json={"text": "FOR VOLUME v1 DO SET xor WITH "
                                                             "key=7"})
    result = client.post("/v1/explain", headers=admin, json={"volume": "v1"}).json
    assert result["request"] == {"volume": "v1", "storage_group": None}
    assert [(e["filter"], e["params"]) for e in result["pipeline"]] == [("xor", {"key": 7})]


def test_a_volume_stack_for_the_bridge_keeps_secrets_explain_masks_them(client, admin):
    """Security regression (issue 17): the bridge built volumes from explain, which
    masks secret parameters, so an AES_XTS policy reached it as key=***. The
    bridge's own route gives them in clear, to administrators only."""
    from iostack.block_bridge.catalog import block_filters

    aes = next(m for m in block_filters() if m.name == "aes_xts")
    client.put("/v1/filters/aes_xts", headers=admin, json=aes.to_json())
    key = bytes(range(32)).hex()
    added = client.post("/v1/policies", headers=admin,
                        json={"text": f"FOR VOLUME v1 DO SET AES_XTS WITH key=\"{key}\""})
    assert added.status_code == 201, added.json
    explained = client.post("/v1/explain", headers=admin, json={"volume": "v1"}).json
    assert explained["pipeline"][0]["params"]["key"] == "***"
    stack = client.get("/v1/volumes/v1/stack", headers=admin)
    assert stack.headers["Cache-Control"] == "no-store"
    assert [(e["filter"], e["params"]) for e in stack.json["pipeline"]] == [
        ("aes_xts", {"key": key, "sector": 512})]
    assert client.get("/v1/volumes/v1/stack").status_code == 401
    wrong = client.get("/v1/volumes/v1/stack", headers={"X-Auth-Token": "t" * 40})
    assert wrong.status_code == 401


def test_metrics_routes_without_a_metric_loop_and_with_one(client, admin):
    from iostack.monitoring.aggregator import Aggregator

    assert client.get("/v1/monitoring", headers=admin).status_code == 503
    assert client.get("/v1/metrics/PUTS_SEC/t1", headers=admin).status_code == 503
    assert client.get("/v1/metrics/NO_SUCH/t1", headers=admin).status_code == 404

    class Loop:  # what the routes read of a ControlLoop
        aggregator = Aggregator()

    client.application.extensions["iostack"].control_loop = Loop()
    Loop.aggregator.add("k", {"source": "p", "stage": "proxy", "start": 1.0, "interval": 1.0,
                              "samples": [{"account": "AUTH_t1", "container": "logs",
                                           "ops": {"PUT": 4}}]})
    Loop.aggregator.tick()
    series = client.get("/v1/metrics/puts_sec/t1/logs?last=3", headers=admin).json
    assert series["metric"] == "PUTS_SEC" and series["values"] == [{"start": 1.0, "value": 4.0}]
    bad_stage = client.get("/v1/metrics/PUTS_SEC/t1?stage=container", headers=admin)
    assert bad_stage.status_code == 400 and "stage" in bad_stage.json["error"]


def test_filter_code_that_fails_its_check_is_refused_naming_why_and_nothing_is_stored(
        app_config, redis_client):
    # A stand-in for the sandbox check (the real one: tests/integration/storlet_runtime).
    script = ("import json, sys; code = sys.stdin.buffer.read(); "
              "sys.exit(0) if b'good' in code else "
              "(print(json.dumps({'error': 'encode failed: ' + ' '.join(sys.argv[1:])})), "
              "sys.exit(1))")
    app = create_app({**app_config, "code_check": [sys.executable, "-c", script]})
    app.extensions["iostack"].registries.seed()
    client, admin = app.test_client(), {"X-Auth-Token": app_config["admin_token"]}
    client.put("/v1/filters/mine", headers=admin, json={
        "description": "x", "extra": {"storlet": "mine.py", "storlet_main": "mine.Mine"}})
    refused = client.put("/v1/filters/mine/code", data=b"bad", headers=admin,
                         content_type="application/octet-stream")
    assert refused.status_code == 400
    assert "failed its check in a sandbox: encode failed: mine.py mine.Mine" \
        in refused.json["error"]
    assert client.get("/v1/filters/mine/code", headers=admin).status_code == 404
    assert "code_sha256" not in client.get("/v1/filters/mine", headers=admin).json["extra"]
    assert not (Path(app_config["state_dir"]) / "filter-code" / "mine").exists()
    assert client.put("/v1/filters/mine/code", data=b"good", headers=admin,
                      content_type="application/octet-stream").status_code == 201
