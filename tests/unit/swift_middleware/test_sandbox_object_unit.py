"""The object-node view of a sandboxed filter, against a fake app: what it asks the object
servers for, and what it does when they did not run the storlet."""

from __future__ import annotations

from urllib.parse import unquote

import pytest
from swift.common.swob import Request, Response

from iostack.filters.base import FilterContext, read_all
from iostack.filters.errors import FilterError
from iostack.swift_middleware.enforce.proxy import filter_factory
from iostack.swift_middleware.enforce.sandbox_object import ObjectNodeSandboxedView
from iostack.swift_middleware.enforce.source import SwiftObjectSource

STORED = b"stored form " * 100
DECODED = bytes(range(256)) * 8
SYSMETA = {"iostack.runtime": "storlet", "iostack.storlet": "iostack_custom.py",
           "iostack.length": str(len(DECODED)), "level": "6"}
CONTEXT = FilterContext(account="AUTH_t1", container="c", obj="o")


class FakeProxy:
    """Answers the object GETs like the proxy app below us."""

    def __init__(self, object_node_runs: bool = True, short: bool = False) -> None:
        self.object_node_runs = object_node_runs
        self.short = short
        self.requests: list[Request] = []

    def __call__(self, env, start_response):
        req = Request(env)
        self.requests.append(req)
        if "X-Run-Storlet" in req.headers and self.object_node_runs:
            params = dict(unquote(v).split(":", 1) for k, v in req.headers.items()
                          if k.startswith("X-Storlet-Parameter-"))
            start, end = map(int, params["range"].split("-"))
            piece = DECODED[start:end - 1 if self.short else end]
            # Storlets answers a storlet's output without a length.
            resp = Response(app_iter=iter([piece]), headers={"Transfer-Encoding": "chunked"})
        else:  # the stored object (or a range of it), as any object GET
            resp = Response(body=STORED, request=req, conditional_response=True)
        return resp(env, start_response)


class FakeRunner:
    """The proxy's sandbox, for the fallback: decodes anything to ``DECODED``."""

    def __init__(self) -> None:
        self.calls = 0

    def registration(self, account, storlet):
        assert (account, storlet) == ("AUTH_t1", "iostack_custom.py")
        return {"x-object-meta-storlet-main": "custom.Filter",
                "x-object-meta-storlet-language": "python",
                "x-timestamp": "1700000000.00000", "content-length": "321", "etag": "abc"}

    def run(self, account, storlet, params, data_iter, metadata=None, code_sha256=None):
        self.calls += 1
        assert b"".join(data_iter) == STORED
        start, end = map(int, params["range"].split("-"))
        return {}, iter([DECODED[start:end]])


def view_over(app: FakeProxy, runner: FakeRunner | None = None) -> ObjectNodeSandboxedView:
    request = Request.blank("/v1/AUTH_t1/c/o")
    source = SwiftObjectSource(app, request, len(STORED), "stored-etag",
                               body=iter([STORED]), etag_is_at="X-Object-Sysmeta-Lower-Etag")
    return ObjectNodeSandboxedView(runner or FakeRunner(), source, SYSMETA, CONTEXT)


def test_each_read_runs_the_storlet_at_the_object_servers_on_the_pinned_version():
    app = FakeProxy()
    view = view_over(app)
    assert view.length == len(DECODED)
    assert b"".join(view.read(100, 400)) == DECODED[100:400]
    assert read_all(view) == DECODED

    first, _second = app.requests
    assert first.headers["X-Run-Storlet"] == "iostack_custom.py"
    assert first.headers["X-Storlet-Main"] == "custom.Filter"
    assert first.headers["X-Storlet-Language"] == "python" and "X-Storlet-Etag" not in first.headers
    assert first.headers["X-Storlet-Content-Length"] == "321"
    assert first.headers["X-Storlet-X-Timestamp"] == "1700000000.00000"
    assert first.headers["If-Match"] == "stored-etag"
    assert first.headers["X-Backend-Etag-Is-At"] == "X-Object-Sysmeta-Lower-Etag"
    assert "Range" not in first.headers  # Storlets refuses Range with X-Run-Storlet
    params = {unquote(v).split(":", 1)[0]: unquote(v).split(":", 1)[1]
              for k, v in first.headers.items() if k.startswith("X-Storlet-Parameter-")}
    assert params["mode"] == "decode" and params["range"] == "100-400"
    assert params["object"] == "o" and '"level": "6"' in params["sysmeta"]
    assert "iostack.storlet" not in params["sysmeta"]


def test_a_stored_object_sent_back_as_it_is_falls_back_to_the_proxys_sandbox():
    runner = FakeRunner()
    view = view_over(FakeProxy(object_node_runs=False), runner)
    assert b"".join(view.read(5, 50)) == DECODED[5:50]
    assert runner.calls == 1


def test_a_short_answer_from_the_object_servers_is_an_error():
    view = view_over(FakeProxy(short=True))
    with pytest.raises(FilterError, match="at the object server"):
        b"".join(view.read(0, 100))


def test_the_proxy_refuses_an_unknown_decode_stage_by_name():
    with pytest.raises(ValueError, match="sandboxed_decode_stage"):
        filter_factory({}, sandboxed_decode_stage="elsewhere")(FakeProxy())
