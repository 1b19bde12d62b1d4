"""Sub-requests of the object a request addresses: same path, query and addressing headers."""

from __future__ import annotations

import pytest
from swift.common.swob import Request, wsgi_quote

from iostack.swift_middleware.subrequest import (
    ALLOW_RESERVED_NAMES,
    POLICY_INDEX,
    object_subrequest,
)

# A version's reserved name, and names that quoting must carry unchanged.
NAMES = ["/v1/AUTH_t1/\x00versions\x00c/\x00o\x001796.5",
         "/v1/AUTH_t1/c/a%25b", "/v1/AUTH_t1/c/q?x", "/v1/AUTH_t1/c/dir/ü ñ", "/v1/a/c/%2F%"]


def request(path: str, query: str = "", **headers: str) -> Request:
    req = Request.blank(wsgi_quote(path), headers=headers)
    req.environ["QUERY_STRING"] = query
    return req


@pytest.mark.parametrize("path", NAMES)
def test_the_subrequest_reaches_the_same_path(path):
    sub = object_subrequest(request(path), "GET", "IOS")
    assert sub.path_info == Request.blank(wsgi_quote(path)).path_info
    assert sub.environ["swift.source"] == "IOS"


def test_query_and_addressing_headers_go_along():
    req = request(NAMES[0], "version-id=1796.5", **{ALLOW_RESERVED_NAMES: "true",
                                                    POLICY_INDEX: "2", "X-Other": "no"})
    sub = object_subrequest(req, "HEAD", "IOS", {"Range": "bytes=0-9"})
    assert sub.method == "HEAD"
    assert sub.params == {"version-id": "1796.5"}
    assert sub.headers[ALLOW_RESERVED_NAMES] == "true"
    assert sub.headers[POLICY_INDEX] == "2"
    assert sub.headers["Range"] == "bytes=0-9"
    assert "X-Other" not in sub.headers


def test_a_request_without_them_adds_none():
    sub = object_subrequest(request("/v1/a/c/o"), "GET", "IOS")
    assert ALLOW_RESERVED_NAMES not in sub.headers and POLICY_INDEX not in sub.headers
