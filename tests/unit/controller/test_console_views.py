"""The console's pages through Flask's test client on a real Redis: login, sessions, CSRF,
headers, scope and the fragments the browser tests rely on (those run in Chromium)."""

from __future__ import annotations

import json
import re
import time
import types

import pytest

import iostack
from iostack.controller.auth import Principal
from iostack.controller.ui.views import marked_source
from iostack.monitoring.aggregator import Aggregator

ADMIN_TOKEN = "admin-token-for-tests-0123456789"  # the unit conftest's app_config


@pytest.fixture
def app(client):
    return client.application


def log_in(client, token: str = ADMIN_TOKEN, account: str = "") -> str:
    response = client.post("/ui/login", data={"token": token, "account": account})
    assert response.status_code == 303, response.get_data(as_text=True)
    page = client.get("/ui/policies").get_data(as_text=True)
    return re.search(r'name="csrf-token" content="([^"]+)"', page).group(1)


def test_pages_need_a_login_and_a_bad_token_is_refused(client):
    assert client.get("/ui/policies").headers["Location"].endswith("/ui/login")
    fragment = client.get("/ui/metrics/data", headers={"HX-Request": "true"})
    assert fragment.status_code == 401 and fragment.headers["HX-Redirect"].endswith("/ui/login")
    refused = client.post("/ui/login", data={"token": "x" * 20})
    assert refused.status_code == 401 and "Set-Cookie" not in refused.headers


def test_session_cookie_is_random_httponly_strict_and_ends_at_logout(client, redis_client, keys):
    response = client.post("/ui/login", data={"token": ADMIN_TOKEN})
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/ui" in cookie
    assert ADMIN_TOKEN not in cookie
    # Redis holds a hash of the cookie, never the cookie itself.
    value = re.search(r"iostack_console=([^;]+)", cookie).group(1)
    stored = list(redis_client.scan_iter(keys.ui_sessions + "*"))
    assert len(stored) == 1 and value not in stored[0]
    assert redis_client.ttl(stored[0]) > 3600
    csrf = re.search(r'name="csrf-token" content="([^"]+)"',
                     client.get("/ui/policies").get_data(as_text=True)).group(1)
    client.post("/ui/logout", data={"csrf": csrf})
    assert list(redis_client.scan_iter(keys.ui_sessions + "*")) == []
    client.set_cookie("iostack_console", value, path="/ui")  # a copied cookie is dead too
    assert client.get("/ui/policies").status_code == 302


def test_state_changes_need_the_csrf_token(client, admin):
    csrf = log_in(client)
    for path in ("/ui/policies", "/ui/policies/check", "/ui/history/0/rollback",
                 "/ui/policies/P1/delete", "/ui/logout"):
        refused = client.post(path, data={"text": "FOR TENANT t1 DO SET noop"})
        assert refused.status_code == 403, path
        wrong = client.post(path, data={"text": "FOR TENANT t1 DO SET noop", "csrf": "x" + csrf})
        assert wrong.status_code == 403, path
    assert client.get("/v1/policies", headers=admin).json["policies"] == []
    assert client.post("/ui/policies", data={"text": "FOR TENANT t1 DO SET noop",
                                             "csrf": csrf}).status_code == 303
    assert len(client.get("/v1/policies", headers=admin).json["policies"]) == 1


def test_headers_csp_and_caching(client):
    log_in(client)
    page = client.get("/ui/policies")
    csp = page.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp and "default-src 'none'" in csp
    assert page.headers["Cache-Control"] == "no-store"
    assert page.headers["X-Frame-Options"] == "DENY"
    html = page.get_data(as_text=True)
    assert "<script>" not in html and " style=" not in html  # nothing inline for the CSP
    asset = re.search(r'src="(/ui/static/vendor/htmx.min.js\?v=[0-9a-f]{12})"', html).group(1)
    static = client.get(asset)
    assert static.status_code == 200
    assert static.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert client.get("/ui/static/../views.py").status_code == 404


def test_check_marks_the_error_column_with_the_suggestion(client):
    csrf = log_in(client)
    text = "FOR TENANT t1 DO SET noop\nFOR TENANT t1 DO SET compresion"
    html = client.post("/ui/policies/check", data={"text": text},
                       headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert 'data-line="2" data-column="22"' in html
    assert "did you mean compression?" in html
    saved = client.post("/ui/policies", data={"text": text, "csrf": csrf})
    assert saved.status_code == 400 and "compresion" in saved.get_data(as_text=True)


def test_marked_source_marks_past_the_end_of_a_line():
    lines = marked_source("FOR TENANT", [{"line": 1, "column": 12, "message": "m"}])
    assert lines[0][0] == {"text": "FOR TENANT"}
    assert lines[0][-1]["text"] == " " and lines[0][-1]["mark"]["column"] == 12


def test_a_tenant_sees_only_its_own(client, app, admin):
    ctl = app.extensions["iostack"]
    ctl.registries.add_tenant("t2")
    client.post("/v1/policies", json={"text": "FOR CONTAINER t1/a DO SET noop\n"
                                              "FOR CONTAINER t2/b DO SET noop"}, headers=admin)
    tenant = Principal(False, "AUTH_t1", "alice")
    ctl.auth.authenticate = lambda headers, account=None: tenant  # as Keystone would answer
    log_in(client, token="keystone-token-of-alice")
    html = client.get("/ui/policies").get_data(as_text=True)
    assert "AUTH_t1/a" in html and "AUTH_t2/b" not in html
    assert 'id="policy-text"' not in html  # no editor: tenants cannot add policies
    assert 'id="enforcement"' not in html  # nor see the proxies
    for path in ("/ui/history", "/ui/qos", "/ui/filters", "/ui/block"):
        assert client.get(path).status_code == 403, path
    assert client.get("/ui/metrics?target=AUTH_t2").status_code == 403
    assert client.get("/ui/metrics/data?target=AUTH_t2/b").status_code == 403


def test_metrics_pages_show_the_last_interval_thresholds_and_events(client, app):
    ctl = app.extensions["iostack"]
    ctl.control_loop = types.SimpleNamespace(aggregator=Aggregator())
    start = time.time() - 10
    for i in range(3):
        ctl.control_loop.aggregator.add("metrics.proxy", {
            "stage": "proxy", "source": "p1", "start": start + i, "interval": 1.0,
            "samples": [{"account": "AUTH_t1", "container": "c", "ops": {"PUT": 5 + i},
                         "bytes_in": 2_000_000}]})
    ctl.control_loop.aggregator.tick()
    (record,) = ctl.store.submit("FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET noop")["policies"]
    ctl.store.enforce(record["id"])
    log_in(client)
    table = client.get("/ui/metrics/table").get_data(as_text=True)
    assert "AUTH_t1/c" in table and "7.0" in table
    data = client.get("/ui/metrics/data?target=AUTH_t1").json
    assert [p[1] for p in data["points"]] == [5.0, 6.0, 7.0]
    assert data["points"][0][3] == 2.0  # MB/s in
    assert data["thresholds"] == {"PUTS_SEC": [{"policy": record["id"], "op": ">",
                                                "value": 3}]}
    assert [e["state"] for e in data["events"]] == ["enforced"]
    since = client.get(f"/ui/metrics/data?target=AUTH_t1&since={data['points'][-1][0]}").json
    assert since["points"] == []


def test_check_shows_order_and_conflict_warnings_before_saving(client, admin):
    csrf = log_in(client)
    client.post("/v1/policies", json={"text": "FOR TENANT t1 DO SET compression WITH level=3"},
                headers=admin)
    text = "FOR TENANT t1 DO SET encryption, SET compression WITH level=5"
    html = client.post("/ui/policies/check", data={"text": text},
                       headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert "Valid: 1 policy, with 2 warnings (read them before saving)" in html
    assert "compression will run before encryption" in html
    assert "already set by policy P1" in html
    (title,) = re.findall(r'<mark class="warning"[^>]*title="([^"]*)"', html)
    assert "will run before encryption" in title and "already set by policy P1" in title
    assert len(client.get("/v1/policies", headers=admin).json["policies"]) == 1  # not saved


def test_text_from_policies_and_errors_is_escaped(client, admin):
    csrf = log_in(client)
    hostile = 'FOR TENANT t1 DO SET noop WITH x="<img src=x onerror=alert(1)>"'
    html = client.post("/ui/policies/check", data={"text": hostile},
                       headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert "<img" not in html and "&lt;img" in html
    meta = {"description": "<script>alert(1)</script>", "params": []}
    client.put("/v1/filters/evil", json=meta, headers=admin)
    page = client.get("/ui/filters").get_data(as_text=True)
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page


def test_explain_shows_the_reason_and_any_further_detail_explain_gives(client, admin,
                                                                      monkeypatch):
    from iostack.controller import api

    csrf = log_in(client)
    client.post("/v1/policies", json={"text": "FOR CONTAINER t1/c DO SET noop"}, headers=admin)
    html = client.post("/ui/explain", data={"method": "PUT", "path": "/v1/AUTH_t1/c/o",
                                            "csrf": csrf}).get_data(as_text=True)
    assert 'data-filter="noop"' in html and "<strong>P1</strong> at container level" in html
    real = api.explain_json

    def richer(data, principal_for):
        result = real(data, principal_for)
        result["pipeline"][0]["condition"] = "TO OBJECT_SIZE > 1M"
        result["notes"][0]["condition"] = "OBJECT_SIZE > 1M held"
        return result

    monkeypatch.setattr(api, "explain_json", richer)
    html = client.post("/ui/explain", data={"method": "PUT", "path": "/v1/AUTH_t1/c/o",
                                            "csrf": csrf}).get_data(as_text=True)
    assert "condition: TO OBJECT_SIZE &gt; 1M" in html
    assert "condition: OBJECT_SIZE &gt; 1M held" in html


def test_a_token_revoked_after_login_ends_the_session(client, app, redis_client, keys):
    from iostack.controller.auth import AuthError

    ctl = app.extensions["iostack"]
    ctl.auth.authenticate = lambda headers, account=None: Principal(True, name="bob")
    log_in(client, token="keystone-token-of-bob")
    assert client.get("/ui/history").status_code == 200

    def revoked(headers, account=None):
        raise AuthError("invalid or expired token")

    ctl.auth.authenticate = revoked  # Keystone now says no
    assert client.get("/ui/history").headers["Location"].endswith("/ui/login")
    assert list(redis_client.scan_iter(keys.ui_sessions + "*")) == []


def test_a_tenant_sees_its_own_actor_state_not_another_tenants_values(client, app,
                                                                       redis_client, keys):
    import json

    ctl = app.extensions["iostack"]
    ctl.registries.add_tenant("t2")
    (record,) = ctl.store.submit("FOR TENANT t1, TENANT t2 WHEN PUTS_SEC > 3 "
                                 "DO SET noop")["policies"]
    redis_client.hset(keys.actors, record["id"], json.dumps({"policy": record["id"], "targets": {
        "tenant:AUTH_t1": {"state": "idle", "values": {"PUTS_SEC": 1.5}},
        "tenant:AUTH_t2": {"state": "enforced", "values": {"PUTS_SEC": 987.25}}}}))
    ctl.auth.authenticate = lambda headers, account=None: Principal(False, "AUTH_t1", "alice")
    log_in(client, token="keystone-token-of-alice")
    html = client.get("/ui/policies").get_data(as_text=True)
    assert 'data-actor-target="tenant:AUTH_t1" data-state="idle"' in html
    assert "tenant:AUTH_t2" not in html and "987.25" not in html
    ctl.control_loop = types.SimpleNamespace(aggregator=Aggregator())
    ctl.store.enforce(record["id"], ("tenant", "AUTH_t2"))
    data = client.get("/ui/metrics/data?target=AUTH_t1").json
    assert data["events"] == []  # the switch on AUTH_t2 is not AUTH_t1's
    assert [a["target"] for a in data["actors"]] == ["tenant:AUTH_t1"]
    ctl.store.enforce(record["id"], ("tenant", "AUTH_t1"))
    data = client.get("/ui/metrics/data?target=AUTH_t1").json
    assert [(e["target"], e["state"]) for e in data["events"]] == [("AUTH_t1", "enforced")]


def test_rollback_previews_the_change_names_others_and_needs_a_fresh_confirmation(client, app):
    store = app.extensions["iostack"].store
    store.submit("FOR CONTAINER t1/a DO SET noop", who="admin")
    version = store.history.count() - 1
    store.submit("FOR CONTAINER t1/a DO SET compression WITH level=4", who="alice")
    csrf = log_in(client)
    history = client.get("/ui/history").get_data(as_text=True)
    assert f'href="/ui/history/{version}/rollback"' in history  # a link to a preview, no form
    preview = client.get(f"/ui/history/{version}/rollback").get_data(as_text=True)
    assert "− <code>FOR CONTAINER t1/a DO SET compression WITH level=4</code>" in preview
    assert "SET compression(level=4)" in preview  # the rules as the CLI shows them, no dict
    assert "Made by someone else: alice." in preview
    assert [p["text"] for p in store.list()][-1].endswith("level=4")  # a preview changes nothing
    current = store.history.count() - 1
    store.submit("FOR CONTAINER t1/b DO SET noop", who="bob")  # after the preview was shown
    stale = client.post(f"/ui/history/{version}/rollback",
                        data={"csrf": csrf, "expect": str(current)})
    assert stale.status_code == 409
    page = stale.get_data(as_text=True)
    assert "changed since the preview" in page and "alice, bob" in page
    assert len(store.list()) == 3
    done = client.post(f"/ui/history/{version}/rollback",
                       data={"csrf": csrf, "expect": str(store.history.count() - 1)})
    assert done.status_code == 303
    assert [p["text"] for p in store.list()] == ["FOR CONTAINER t1/a DO SET noop"]
    nothing = client.get(f"/ui/history/{version + 3}/rollback").get_data(as_text=True)
    assert "Nothing to do" in nothing
    assert client.get("/ui/history/999/rollback").status_code == 404


def test_explain_of_an_unknown_volume_says_so_not_no_filter_applies(client, app):
    csrf = log_in(client)
    app.extensions["iostack"].store.submit("FOR VOLUME vol7 DO SET xor WITH key=0x5a")
    typo = client.post("/ui/explain", data={"volume": "vol8", "csrf": csrf},
                       headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "No volume vol8: no policy names it" in typo
    known = client.post("/ui/explain", data={"volume": "vol7", "csrf": csrf},
                        headers={"HX-Request": "true"}).get_data(as_text=True)
    assert "No volume" not in known and 'data-filter="xor"' in known


def render_qos(app, capacity, scopes):
    from flask import render_template

    with app.test_request_context("/ui/qos"):
        return render_template("ui/qos.html", nav=[], principal=Principal(True, name="admin"),
                               csrf="x", capacity=capacity, scopes=scopes, proxies=[])


def test_qos_page_says_what_an_unset_capacity_and_a_missing_split_mean(app):
    unset = render_qos(app, {"get": 0.0, "put": 0.0}, [])
    assert "unknown (measured)" not in unset
    assert "GET not set, PUT not set (only caps are enforced" in unset
    assert "No assignment published yet." in unset
    capped = [{"scope": "AUTH_t2", "direction": "get", "slo": 30e6, "mode": "cap",
               "assigned": 30e6, "achieved": 29e6}]
    page = render_qos(app, {"get": 100e6, "put": 0.0}, capped)
    assert "GET 100 MB/s, PUT not set</p>" in page
    assert "No assignment published yet." not in page  # totals are assigned: say why no split
    assert "No per-proxy split computed by this controller process" in page


@pytest.mark.parametrize("value, scale, shown", [
    (0.012345, 1e3, 12.3), (0.5, 1, 0.5), (0.0001234, 1, 0.000123), (1234.5, 1, 1234),
    (0, 1, 0), (None, 1, None)])
def test_metric_cells_have_three_significant_digits(value, scale, shown):
    from iostack.controller.ui.views import _scaled

    assert _scaled(value, scale) == shown


def test_the_policies_page_shows_each_workers_version_and_who_is_behind(client, app):
    ctl = app.extensions["iostack"]
    version = int(ctl.redis.get(ctl.keys.version) or 0)
    now = time.time()
    for name, held in (("10.0.0.1:8080/11", version), ("10.0.0.2:8080/12", version - 1)):
        ctl.redis.hset(ctl.keys.policy_nodes, name, json.dumps(
            {"version": held, "applied": now - 30, "reported": now}))
    log_in(client)
    html = client.get("/ui/policies").get_data(as_text=True)
    assert f"store version {version}" in html
    assert "1 worker(s) behind: 10.0.0.2:8080/12." in html
    rows = re.findall(r'<tr data-worker="([^"]+)">.*?<td>\d+</td><td>(\d+)</td>\s*'
                      r'<td>(\d+) s</td>.*?badge \w+">(\w+)<', html, re.S)
    assert rows == [("10.0.0.1:8080/11", str(version), "30", "current"),
                    ("10.0.0.2:8080/12", str(version - 1), "30", "behind")]


def test_the_policies_page_shows_a_revocation(client, admin):
    log_in(client)
    assert 'id="revoked"' not in client.get("/ui/policies").get_data(as_text=True)
    client.put("/v1/policies/revocation", json={"reason": "audit pending"}, headers=admin)
    html = client.get("/ui/policies").get_data(as_text=True)
    assert 'id="revoked"' in html and "audit pending" in html
    client.delete("/v1/policies/revocation", headers=admin)


class FakeJob:
    def __init__(self, state: str) -> None:
        self.state = state

    def to_json(self) -> dict:
        answer = {"job": "j1", "state": self.state, "progress": "listed 40 objects: 4 matched"}
        if self.state == "done":
            answer["result"] = {
                "objects": 4, "listed": 40, "truncated": False, "bytes": 4000,
                "stored_bytes": 4000, "changed_objects": 3, "changed_bytes": 3000, "skipped": 0,
                "projected_stored_bytes": 1200, "reconcile_cpu_seconds": 0.2,
                "projection": {"error_bound_bytes": 50, "confidence": 0.95, "sample_size": 3,
                               "population": 3, "per_filter": [
                                   {"filter": "compression", "projected_bytes": 1200}]}}
        return answer


def test_the_editor_simulates_over_stored_objects_and_polls_until_done(client, app,
                                                                       monkeypatch):
    csrf = log_in(client)
    page = client.get("/ui/policies").get_data(as_text=True)
    assert 'id="simulate"' in page and 'hx-post="/ui/policies/simulate"' in page
    started = []
    simulations = app.extensions["iostack"].simulations
    monkeypatch.setattr(simulations, "start",
                        lambda owner, options: started.append((owner, options)) or
                        FakeJob("running"))
    monkeypatch.setattr(simulations, "get", lambda job, owner, admin: FakeJob("done"))
    text = "FOR CONTAINER AUTH_t1/logs DO SET compression"
    running = client.post("/ui/policies/simulate", data={"text": text},
                          headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert started == [(None, {"text": text})]
    assert 'hx-get="/ui/simulate/j1"' in running and "listed 40 objects" in running
    done = client.get("/ui/simulate/j1").get_data(as_text=True)
    assert 'data-key="projected_stored_bytes">1200<' in done and "&plusmn; 50 bytes" in done
    assert "hx-get" not in done  # it stops polling
    bad = client.post("/ui/policies/simulate", data={"text": "FOR TENANT t1 DO SET compresion"},
                      headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert "the text has errors" in bad and len(started) == 1


def test_simulating_needs_the_swift_config_and_a_csrf_token(client):
    csrf = log_in(client)
    text = {"text": "FOR TENANT t1 DO SET compression"}
    assert client.post("/ui/policies/simulate", data=text).status_code == 403
    html = client.post("/ui/policies/simulate", data=text,
                       headers={"X-CSRF-Token": csrf}).get_data(as_text=True)
    assert "no swift_dir configured" in html


def test_the_metrics_page_masks_secrets_in_dynamic_policy_texts(client, app, admin):
    """Regression: /ui/metrics/data listed the actors with the dynamic policy's
    text as written, secret parameter values included."""
    meta = {"description": "x", "params": [{"name": "key", "type": "secret"}]}
    assert client.put("/v1/filters/vault", json=meta, headers=admin).status_code in (200, 201)
    ctl = app.extensions["iostack"]
    ctl.store.submit("FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET vault WITH key='s3cr3t-value'")
    ctl.control_loop = types.SimpleNamespace(aggregator=Aggregator())
    log_in(client)
    data = client.get("/ui/metrics/data?target=AUTH_t1")
    (actor,) = data.json["actors"]
    assert "s3cr3t-value" not in data.get_data(as_text=True)
    assert "***" in actor["text"]


@pytest.mark.parametrize("headers", [
    {"Origin": "http://evil.example"}, {"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
    {"Origin": "null", "Sec-Fetch-Site": "same-site"}, {"Origin": "http://localhost:9999"},
    {"Origin": "http://evil.example", "Sec-Fetch-Site": "same-origin"}])
def test_a_cross_origin_login_sets_no_session(client, redis_client, keys, headers):
    """Regression (login CSRF): a page on another site could post its own token to
    /ui/login and log the victim's browser into the attacker's session."""
    refused = client.post("/ui/login", data={"token": ADMIN_TOKEN}, headers=headers)
    assert refused.status_code == 403 and "Set-Cookie" not in refused.headers
    assert list(redis_client.scan_iter(keys.ui_sessions + "*")) == []
    same = client.post("/ui/login", data={"token": ADMIN_TOKEN},
                       headers={"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"})
    assert same.status_code == 303 and "iostack_console=" in same.headers["Set-Cookie"]
    # What Chromium sends from the console's own form (its pages send no referrer).
    own_form = client.post("/ui/login", data={"token": ADMIN_TOKEN},
                           headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})
    assert own_form.status_code == 303


def test_every_page_names_the_release_it_runs(client):
    page = client.get("/ui/login").get_data(as_text=True)
    assert f'<span class="release" id="release">{iostack.__version__}</span>' in page
