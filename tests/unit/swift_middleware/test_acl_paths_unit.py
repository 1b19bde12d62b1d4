"""Swift's ACL decisions come out of an IOStack pipeline exactly as out of a plain one.

IOStack asks Swift's auth whether a request is allowed before it meters,
shapes or parses it (``RequestView.authorized``). That question once set the
container's ACL on the live environ, where swob keeps ``req.acl``; Swift's
proxy asks container POST, PUT and DELETE with no ACL of its own, so a user
holding only a container's write ACL could set its metadata, its
``X-Versions-Location`` or delete it (Swift's functional test
``test_versioning_container_acl``).

Here the real tempauth answers, in front of a stand-in for Swift's proxy
server that sets ACLs as its controllers do; each ACL path is asked through
the metrics and enforcing middlewares (with and without a policy) and must
get the answer the same stand-in gives without them.
"""

from __future__ import annotations

import pytest
from fakeswift import FakeReader, rule, use_reader
from swift.common.middleware.tempauth import TempAuth
from swift.common.swob import HTTPNoContent, HTTPOk, Request
from swift.common.utils import split_path

from iostack.monitoring.counters import Window
from iostack.monitoring.middleware import MetricsMiddleware
from iostack.swift_middleware.enforce.proxy import filter_factory

OWNER = "AUTH_t1"
READER, WRITER, STRANGER = "t2:reader", "t2:writer", "t2:stranger"
READ_ACL, WRITE_ACL = READER, WRITER


class ProxyServer:
    """Swift's proxy server as far as auth goes: container info with its ACLs, and
    ``swift.authorize`` asked with the ACL each controller sets (none for container
    writes and for accounts: whatever the environ holds is what auth sees)."""

    def __call__(self, env, start_response):
        req = Request(env)
        _v, _account, container, obj = split_path(req.path, 2, 4, True)
        reading = req.method in ("GET", "HEAD")
        if env.get("swift.authorize_override"):  # get_container_info's own HEAD
            return HTTPNoContent(headers={"X-Container-Read": READ_ACL,
                                          "X-Container-Write": WRITE_ACL,
                                          "X-Backend-Storage-Policy-Index": "0"}
                                 )(env, start_response)
        if obj:
            req.acl = READ_ACL if reading else WRITE_ACL
        elif container and reading:
            req.acl = READ_ACL
        denied = env["swift.authorize"](req)
        if denied is not None:
            return denied(env, start_response)
        return (HTTPOk if reading else HTTPNoContent)(body=b"")(env, start_response)


def _tempauth(user: str | None):
    """The environ tempauth leaves for ``user`` (an owner of AUTH_t1 when None)."""
    auth = TempAuth(ProxyServer(), {})
    groups = f"t1,t1:user,{OWNER}" if user is None else f"t2,{user},AUTH_t2"
    return {"REMOTE_USER": groups, "swift.authorize": auth.authorize}


def _ask(app, method: str, path: str, user: str | None) -> int:
    env = {"REQUEST_METHOD": method, **_tempauth(user)}
    body = b"x" * 10 if method in ("PUT", "POST") and path.count("/") == 4 else None
    req = Request.blank(path, environ=env, body=body,
                        headers={"X-Container-Meta-Color": "red"} if body is None else {})
    return req.get_response(app).status_int


def _iostack_pipeline():
    metrics = MetricsMiddleware(filter_factory({})(ProxyServer()),
                                {"amqp_url": "amqp://127.0.0.1:1/%2F"})
    window = Window()
    metrics._reporter.get = lambda: type("Reporter", (), {"window": window})()
    return metrics


CONTAINER = f"/v1/{OWNER}/c"
OBJECT = f"/v1/{OWNER}/c/o"
CASES = [(method, path, user)
         for user in (READER, WRITER, STRANGER, None)
         for method, path in (
             ("GET", CONTAINER), ("HEAD", CONTAINER), ("POST", CONTAINER),
             ("PUT", CONTAINER), ("DELETE", CONTAINER),
             ("GET", OBJECT), ("HEAD", OBJECT), ("PUT", OBJECT), ("POST", OBJECT),
             ("DELETE", OBJECT))]


@pytest.mark.parametrize("policy", [None, "compression"])
@pytest.mark.parametrize("method,path,user", CASES)
def test_acl_answers_are_swifts(monkeypatch, policy, method, path, user):
    use_reader(monkeypatch, FakeReader(*([rule(policy, algorithm="gzip")] if policy else [])))
    plain = _ask(ProxyServer(), method, path, user)
    assert _ask(_iostack_pipeline(), method, path, user) == plain


def test_a_write_acl_does_not_open_container_writes(monkeypatch):
    # The regression itself, spelled out: plain Swift refuses these to a writer.
    use_reader(monkeypatch, FakeReader())
    for method in ("POST", "PUT", "DELETE"):
        assert _ask(_iostack_pipeline(), method, CONTAINER, WRITER) == 403
    assert _ask(_iostack_pipeline(), "PUT", OBJECT, WRITER) in (201, 204)
