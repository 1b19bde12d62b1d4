"""The controller API over HTTP, as a separate process, on the all-in-one's Redis and Swift."""

from __future__ import annotations

import json
import time
import urllib.request

import pytest
import redis

import iostack
from iostack.controller.client import ControllerClient, ControllerError
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import RequestInfo

pytestmark = pytest.mark.integration


def fails(call, *args, **kwargs) -> ControllerError:
    with pytest.raises(ControllerError) as info:
        call(*args, **kwargs)
    return info.value


def test_add_list_explain_delete(api):
    result = api.add_policies(
        "FOR TENANT:t1 DO SET compression WITH level=6 ON PROXY, SET encryption "
        "TO OBJECT_TYPE=DOCS, OBJECT_SIZE > 1M")
    (record,) = result["policies"]
    assert result["warnings"] == []  # t1 is known (config "tenants")
    assert [p["id"] for p in api.policies()] == [record["id"]]
    pipeline = api.explain("PUT", "/v1/AUTH_t1/docs/report.pdf", 2 << 20)["pipeline"]
    assert [(e["filter"], e["params"].get("level")) for e in pipeline] == \
        [("compression", 6), ("encryption", None)]
    small = api.explain("PUT", "/v1/AUTH_t1/docs/report.pdf", 1000)
    assert small["pipeline"] == []
    assert {n["reason"] for n in small["notes"]} == {"size 1000 is not > 1048576"}
    api.delete_policy(record["id"])
    assert api.policies() == []
    assert api.explain("PUT", "/v1/AUTH_t1/docs/report.pdf", 2 << 20)["pipeline"] == []


def test_a_failing_submission_changes_nothing_in_redis(api, controller):
    client = redis.Redis.from_url(controller["redis_url"])
    keys = KeySpace(controller["prefix"])
    api.add_policies("FOR TENANT t1 DO SET noop")
    before = {k: client.dump(k) for k in client.scan_iter(keys.prefix + "*")}
    error = fails(api.add_policies, "FOR TENANT t2 DO SET compression\n"
                                    "FOR CONTAINER t2/logs DO SET caching WITH head=1\n"
                                    "FOR TENANT t2 DO SET encryption")
    assert error.status == 400
    assert [d["line"] for d in error.diagnostics] == [2]
    assert "must be in [65536, 1073741824], got 1" in error.diagnostics[0]["message"]
    after = {k: client.dump(k) for k in client.scan_iter(keys.prefix + "*")}
    assert after == before
    client.close()


def test_precedence_merges_tenant_group_container_object(api):
    api.put("groups", "gold", {"tenants": ["t1"]})
    api.add_policies(
        "FOR G:gold DO SET compression WITH level=2, algorithm=gzip\n"
        "FOR TENANT t1 DO SET compression WITH level=4, SET caching\n"
        "FOR CONTAINER t1/logs DO SET compression WITH level=9\n"
        "FOR OBJECT t1/logs/raw.bin DO DELETE compression")
    (entry,) = api.explain("PUT", "/v1/AUTH_t1/logs/a.log", 10)["pipeline"]
    assert entry["params"]["algorithm"] == "gzip" and entry["params"]["level"] == 9
    assert [s["level"] for s in entry["sources"]] == ["group", "tenant", "container"]
    assert api.explain("PUT", "/v1/AUTH_t1/other/a.log", 10)["pipeline"][0]["params"][
        "level"] == 4
    assert api.explain("PUT", "/v1/AUTH_t1/logs/raw.bin", 10)["pipeline"] == []
    get = api.explain("GET", "/v1/AUTH_t1/logs/a.log")
    assert [e["filter"] for e in get["pipeline"]] == ["caching"]


def test_conflicts_are_rejected_and_a_runtime_filter_is_usable_at_once(api):
    unknown = fails(api.add_policies, "FOR TENANT t1 DO SET lz4 WITH level=1")
    assert "unknown filter 'lz4'" in str(unknown)
    api.put("filters", "lz4", {
        "description": "LZ4 frames", "methods": ["PUT"], "stages": ["proxy", "object"],
        "params": [{"name": "level", "type": "int", "minimum": 1, "maximum": 12}],
        "changes_size": True, "layout_group": "compression", "runs_before": ["encryption"]})
    api.add_policies("FOR TENANT t1 DO SET lz4 WITH level=1")
    conflict = fails(api.add_policies, "FOR TENANT t1 DO SET compression")
    assert conflict.status == 400
    assert "compression and lz4" in str(conflict) and "both define the stored bytes" in \
        str(conflict)
    wrong_method = fails(api.add_policies, "FOR TENANT t1 DO SET caching ON PUT")
    assert "caching applies to GET only" in str(wrong_method)
    in_use = fails(api.delete, "filters", "lz4")
    assert in_use.status == 409


def test_auth_failures(controller, api):
    url = controller["url"]
    for token in (None, "not-the-token"):
        error = fails(ControllerClient(url, token).policies)
        assert error.status == 401
    aio = controller["aio"]
    tenant = aio["tenants"]["t1"]
    req = urllib.request.Request(aio["auth_url"], headers={"X-Auth-User": tenant["user"],
                                                           "X-Auth-Key": tenant["key"]})
    with urllib.request.urlopen(req, timeout=10) as resp:  # loopback aio
        swift_token = resp.headers["X-Auth-Token"]
    api.add_policies("FOR TENANT t1 DO SET noop\nFOR TENANT t2 DO SET caching")
    as_tenant = ControllerClient(url, swift_token)
    mine = as_tenant.tenant_policies(tenant["account"])
    assert [p["text"] for p in mine["policies"]] == ["FOR TENANT t1 DO SET noop"]
    other = aio["tenants"]["t2"]["account"]
    assert fails(as_tenant.tenant_policies, other).status == 401
    assert fails(as_tenant.policies).status == 401  # a Swift token is never an admin token
    assert fails(as_tenant.add_policies, "FOR ALL DO SET noop").status == 401


def test_oversized_and_malformed_bodies(controller, api):
    error = fails(api.add_policies, "FOR TENANT t1 DO SET noop\n" * 60000)
    assert error.status == 413
    error = fails(api.request, "POST", "/policies", raw=b"{nope", content_type="application/json")
    assert (error.status, str(error)) == (400, "the body must be a JSON object")
    openapi = api.request("GET", "/openapi.json")
    assert "/v1/explain" in openapi["paths"]


def test_data_path_reader_sees_changes_within_a_second(api, controller):
    reader = PolicyReader(controller["redis_url"], prefix=controller["prefix"])
    try:
        assert reader.wait_subscribed(5)
        request = RequestInfo.from_path("PUT", "/v1/AUTH_t2/c/o", size=5)
        assert reader.resolve(request).pipeline == []
        api.add_policies("FOR TENANT t2 DO SET compression WITH level=3")
        start = time.monotonic()
        while not reader.resolve(request).pipeline:
            assert time.monotonic() - start < 1.0, "the change did not reach the reader in 1 s"
            time.sleep(0.02)
        assert reader.resolve(request).pipeline[0].as_tuple()[0] == "compression"
    finally:
        reader.close()


def test_the_all_in_one_controller_answers(aio):
    with urllib.request.urlopen(aio["controller_url"] + "/v1/health", timeout=5) as resp:
        assert json.load(resp) == {"status": "ok", "version": iostack.__version__}
    client = ControllerClient(aio["controller_url"], aio["admin_token"])
    assert "compression" in client.registry("filters")
    assert client.validate("FOR TENANT t1 DO SET compression")["valid"] is True
    assert fails(ControllerClient(aio["controller_url"], "wrong-token").policies).status == 401


def test_paper_positional_params_and_a_quoted_digit_regex_over_http(api):
    api.add_policies('FOR TENANT t2 DO SET BANDWIDTH WITH PARAM1=30MBps, put=10MBps\n'
                     'FOR CONTAINER t1/c DO SET compression TO OBJECT_NAME=~"^\\d+$"')
    (bandwidth,) = api.explain("GET", "/v1/AUTH_t2/c/o", None)["pipeline"]
    assert (bandwidth["params"]["get"], bandwidth["params"]["put"]) == (30_000_000, 10_000_000)
    assert [e["filter"] for e in api.explain("PUT", "/v1/AUTH_t1/c/2024", 10)["pipeline"]] == \
        ["compression"]
    assert api.explain("PUT", "/v1/AUTH_t1/c/ddd", 10)["pipeline"] == []
    regex = fails(api.add_policies, 'FOR CONTAINER t1/c DO SET compression '
                                    'TO OBJECT_NAME=~"(a)\\1"')
    assert regex.status == 400
    assert [(d["line"], d["column"]) for d in regex.diagnostics] == [(1, 55)]
    assert "invalid escape sequence" in regex.diagnostics[0]["message"]
    param = fails(api.add_policies, "FOR TENANT t2 DO SET noop\n"
                                    "FOR TENANT t2 DO SET BANDWIDTH WITH PARAM7=1MBps")
    assert [(d["line"], d["column"]) for d in param.diagnostics] == [(2, 37)]
    assert "PARAM7: bandwidth declares 6 parameters" in param.diagnostics[0]["message"]


def test_explain_shows_where_writes_land_and_warns_on_weaker_segments(api):
    api.add_policies("FOR CONTAINER t1/media DO SET encryption")
    part = api.explain("PUT", "/v1/AUTH_t1/media+segments/film.mkv/UPLOAD1/2", 5 << 20)
    assert part["request"]["policy_paths"] == [["media", "film.mkv"],
                                               ["media+segments", "film.mkv/UPLOAD1/2"]]
    assert [e["filter"] for e in part["pipeline"]] == ["encryption"]
    version = api.explain("PUT", "/v1/AUTH_t1/%00versions%00media/%00film.mkv%001.5", 10)
    assert [e["filter"] for e in version["pipeline"]] == ["encryption"]
    dlo = api.explain("PUT", "/v1/AUTH_t1/media/film.mkv", 0,
                      {"X-Object-Manifest": "plain-segments/film/"})
    (warning,) = dlo["warnings"]
    assert "'plain-segments'" in warning and "encryption" in warning
    same = api.explain("PUT", "/v1/AUTH_t1/media/film.mkv", 0,
                       {"X-Object-Manifest": "media/film-segments/"})
    assert same["warnings"] == []
