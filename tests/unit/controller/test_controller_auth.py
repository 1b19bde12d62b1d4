"""Token validation: Keystone (python-keystoneclient against a minimal local identity service)
and Swift account checks, plus tenant isolation in the API."""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from iostack.controller.app import create_app
from iostack.controller.auth import Authenticator, AuthError

SERVICE_TOKEN = "service-token"
ADMIN_PROJECT = "p-admin"  # the project whose admins are IOStack administrators
TOKENS = {  # token -> (project id, roles); project names equal ids here
    "tok-admin": (ADMIN_PROJECT, ["admin"]),
    "tok-t1": ("t1", ["member"]),
    "tok-t2": ("t2", ["member"]),
    # Keystone's admin role is per project: this is t3's admin, not the cloud's.
    "tok-t3-admin": ("t3", ["admin"]),
    "tok-unscoped-admin": (None, ["admin"]),
}
SHORT_LIVED = "tok-short"  # a t1 member token that expires a second after it is issued
EXPIRES: dict[str, datetime] = {}


class IdentityHandler(BaseHTTPRequestHandler):
    """Just enough of Keystone v3: password login for the service, token validation."""

    calls: list[str] = []

    def log_message(self, *args):  # keep test output quiet
        pass

    def _send(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in headers:
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _token(self, project, roles, user="u", catalog=(), expires="2099-01-01T00:00:00.000000Z"):
        token = {
            "catalog": list(catalog),
            "methods": ["password"], "expires_at": expires,
            "issued_at": "2026-01-01T00:00:00.000000Z",
            "user": {"id": user, "name": user, "domain": {"id": "default", "name": "Default"}},
            "roles": [{"id": r, "name": r} for r in roles]}
        if project:
            token["project"] = {"id": project, "name": project,
                                "domain": {"id": "default", "name": "Default"}}
        return {"token": token}

    def do_GET(self):  # http.server API
        base = f"http://127.0.0.1:{self.server.server_port}"
        if self.path in ("/v3", "/v3/"):
            self._send(200, {"version": {"id": "v3.14", "status": "stable", "links": [
                {"rel": "self", "href": base + "/v3/"}]}})
        elif self.path.startswith("/v3/auth/tokens"):
            self.calls.append("validate")
            if self.headers.get("X-Auth-Token") != SERVICE_TOKEN:
                self._send(401, {"error": {"code": 401}})
                return
            subject = self.headers.get("X-Subject-Token")
            if subject == SHORT_LIVED:
                expires = EXPIRES.setdefault(subject, datetime.now(timezone.utc)
                                             + timedelta(seconds=1))
                if datetime.now(timezone.utc) >= expires:
                    self._send(404, {"error": {"code": 404, "message": "token expired"}})
                    return
                body = self._token("t1", ["member"],
                                   expires=expires.strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
                self._send(200, body, [("X-Subject-Token", subject)])
                return
            if subject not in TOKENS:
                self._send(404, {"error": {"code": 404, "message": "token not found"}})
                return
            project, roles = TOKENS[subject]
            self._send(200, self._token(project, roles), [("X-Subject-Token", subject)])
        else:
            self._send(404, {})

    def do_POST(self):
        if self.path.startswith("/v3/auth/tokens"):
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            password = body["auth"]["identity"]["password"]["user"]["password"]
            if password != "service-pass":
                self._send(401, {"error": {"code": 401}})
                return
            base = f"http://127.0.0.1:{self.server.server_port}/v3"
            catalog = [{"type": "identity", "name": "keystone", "endpoints": [
                {"interface": "public", "region": "RegionOne", "url": base, "id": "e1"}]}]
            self._send(201, self._token("service", ["service"], "ctl", catalog),
                       [("X-Subject-Token", SERVICE_TOKEN)])
        else:
            self._send(404, {})

    def do_HEAD(self):  # stands in for Swift: HEAD /v1/<account>
        allowed = {"tok-t1": "/v1/AUTH_t1", "tok-t2": "/v1/AUTH_t2"}
        ok = allowed.get(self.headers.get("X-Auth-Token")) == self.path
        self.send_response(204 if ok else 401)
        self.end_headers()


@pytest.fixture(scope="module")
def identity():
    server = ThreadingHTTPServer(("127.0.0.1", 0), IdentityHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def keystone_conf(url, **admin):
    return {"auth_url": url + "/v3", "username": "ctl", "password": "service-pass",
            "project_name": "service", **(admin or {"admin_project_id": ADMIN_PROJECT})}


def headers(token):
    return {"X-Auth-Token": token}


def test_keystone_tokens_map_to_admin_or_tenant_and_are_cached(identity):
    auth = Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(identity)})
    assert auth.authenticate(headers("tok-admin")).admin
    tenant = auth.authenticate(headers("tok-t1"))
    assert (tenant.admin, tenant.account) == (False, "AUTH_t1")
    before = IdentityHandler.calls.count("validate")
    auth.authenticate(headers("tok-t1"))
    assert IdentityHandler.calls.count("validate") == before
    with pytest.raises(AuthError, match="invalid or expired token"):
        auth.authenticate(headers("tok-unknown"))


def test_keystone_tenants_read_only_their_own_policies(identity, app_config, redis_client):
    app = create_app(app_config | {"keystone": keystone_conf(identity)})
    client = app.test_client()
    admin = headers(app_config["admin_token"])
    app.extensions["iostack"].registries.seed()
    client.post("/v1/policies", headers=admin, json={"text": "FOR TENANT t1 DO SET noop\n"
                                                             "FOR TENANT t2 DO SET caching"})
    mine = client.get("/v1/tenants/AUTH_t1/policies", headers=headers("tok-t1"))
    assert mine.status_code == 200
    assert [p["text"] for p in mine.json["policies"]] == ["FOR TENANT t1 DO SET noop"]
    other = client.get("/v1/tenants/AUTH_t2/policies", headers=headers("tok-t1"))
    assert other.status_code == 403
    assert client.get("/v1/policies", headers=headers("tok-t1")).status_code == 403
    assert client.post("/v1/policies", headers=headers("tok-t1"),
                       json={"text": "FOR ALL DO DELETE noop"}).status_code == 403
    explain = {"method": "PUT", "path": "/v1/AUTH_t2/c/o"}
    assert client.post("/v1/explain", headers=headers("tok-t1"), json=explain).status_code == 403
    assert client.post("/v1/explain", headers=headers("tok-t2"), json=explain).status_code == 200
    assert client.get("/v1/policies", headers=headers("tok-admin")).status_code == 200


def test_keystone_admin_role_counts_only_in_the_admin_project(identity):
    for admin in ({"admin_project_id": ADMIN_PROJECT},
                  {"admin_project_name": ADMIN_PROJECT, "admin_project_domain_name": "Default"}):
        auth = Authenticator({"admin_token": "x" * 20,
                              "keystone": keystone_conf(identity, **admin)})
        assert auth.authenticate(headers("tok-admin")).admin
        # Admin of their own project: that project's tenant, not a global admin.
        other = auth.authenticate(headers("tok-t3-admin"))
        assert (other.admin, other.account) == (False, "AUTH_t3")
        with pytest.raises(AuthError, match="not scoped to a project"):
            auth.authenticate(headers("tok-unscoped-admin"))
    wrong_domain = Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(
        identity, admin_project_name=ADMIN_PROJECT, admin_project_domain_name="other")})
    assert not wrong_domain.authenticate(headers("tok-admin")).admin
    custom_role = Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(
        identity, admin_project_id="t3", admin_roles=["iostack-admin"])})
    assert not custom_role.authenticate(headers("tok-t3-admin")).admin


def test_keystone_without_an_admin_project_is_refused(identity):
    with pytest.raises(ValueError, match="admin_project_id or admin_project_name"):
        Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(
            identity, admin_roles=["admin"])})


def test_keystone_admin_of_another_project_is_no_controller_admin(identity, app_config,
                                                                  redis_client):
    client = create_app(app_config | {"keystone": keystone_conf(identity)}).test_client()
    assert client.get("/v1/policies", headers=headers("tok-t3-admin")).status_code == 403
    assert client.post("/v1/policies", headers=headers("tok-t3-admin"),
                       json={"text": "FOR ALL DO SET noop"}).status_code == 403
    assert client.get("/v1/policies", headers=headers("tok-admin")).status_code == 200


def test_cached_validation_never_outlives_the_token(identity):
    auth = Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(identity),
                          "auth_cache_seconds": 60})
    assert auth.authenticate(headers(SHORT_LIVED)).account == "AUTH_t1"
    time.sleep(1.2)
    with pytest.raises(AuthError, match="invalid or expired token"):
        auth.authenticate(headers(SHORT_LIVED))


def test_zero_cache_seconds_validates_every_request(identity):
    auth = Authenticator({"admin_token": "x" * 20, "keystone": keystone_conf(identity),
                          "auth_cache_seconds": 0})
    before = IdentityHandler.calls.count("validate")
    auth.authenticate(headers("tok-t1"))
    auth.authenticate(headers("tok-t1"))
    assert IdentityHandler.calls.count("validate") == before + 2


def test_swift_account_check_proves_a_token_for_one_account(identity):
    auth = Authenticator({"admin_token": "x" * 20, "swift_url": identity})
    assert auth.authenticate(headers("tok-t1"), "AUTH_t1").account == "AUTH_t1"
    with pytest.raises(AuthError):
        auth.authenticate(headers("tok-t1"), "AUTH_t2")
    with pytest.raises(AuthError, match="invalid token"):
        auth.authenticate(headers("tok-t1"))  # no account named: nothing to prove


def test_unreachable_keystone_is_a_503_not_a_401(app_config, redis_client):
    app = create_app(app_config | {"keystone": keystone_conf("http://127.0.0.1:9")})
    response = app.test_client().get("/v1/policies", headers=headers("some-token"))
    assert response.status_code == 503
