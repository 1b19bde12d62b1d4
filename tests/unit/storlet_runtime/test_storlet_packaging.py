"""Library filters as storlets, and the Storlets request headers the data path sends."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from iostack.filters.library import filter_names, get_filter
from iostack.storlet_runtime.host import packaging


def parsed_like_storlets(headers: dict[str, str]) -> dict[str, str]:
    """What Storlets' handler makes of X-Storlet-Parameter-* headers."""
    params = {}
    for key, value in headers.items():
        if key.lower().startswith("x-storlet-parameter"):
            name, rest = unquote(value).split(":", 1)
            params[name] = rest
    return params


def test_headers_round_trip_through_storlets_parsing():
    headers = packaging.storlet_headers(
        "noop", "decode", {"level": 3, "note": "a:b c%d/é"}, sysmeta={"len": "10"},
        byte_range=(5, 9), account="AUTH_t1", container="c", obj="dir/o:x")
    assert headers["X-Run-Storlet"] == "iostack_noop.py"
    assert "X-Storlet-Run-On-Proxy" not in headers
    params = parsed_like_storlets(headers)
    assert params["mode"] == "decode" and params["range"] == "5-9"
    assert json.loads(params["params"]) == {"level": 3, "note": "a:b c%d/é"}
    assert json.loads(params["sysmeta"]) == {"len": "10"}
    assert params["object"] == "dir/o:x"


def test_proxy_stage_and_bad_mode():
    assert packaging.storlet_headers("noop", "encode", on_proxy=True)[
        "X-Storlet-Run-On-Proxy"] == ""
    with pytest.raises(ValueError, match="mode"):
        packaging.storlet_headers("noop", "transcode")


def test_results_from_response_headers():
    assert packaging.read_storlet_result({"X-Object-Meta-Iostack-Sysmeta": '{"a": "1"}'}) == {
        "sysmeta": {"a": "1"}}
    assert packaging.read_storlet_result({"x-object-meta-iostack-length": "42"}) == {"length": 42}
    assert packaging.read_storlet_result({}) == {}


def test_only_sandboxable_body_filters_are_packaged():
    for name in filter_names():
        meta = get_filter(name).metadata
        if meta.sandboxable and get_filter(name).transforms_body:
            storlet = packaging.filter_storlet(name)
            assert storlet.name == f"iostack_{name}.py"
            assert storlet.main == f"iostack_{name}.IOStackFilter"
            compile(storlet.code, storlet.name, "exec")  # generated code is valid Python
        else:
            with pytest.raises(packaging.NotSandboxable):
                packaging.filter_storlet(name)
