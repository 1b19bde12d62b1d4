"""Secrets leave the proxy layer's and the object layer's records, the controller's
answers and ``object inspect`` by one function, ``filters.metadata.public_params``;
the parameters the object servers get are the ones the proxy validated.

tests/unit/filters/test_filter_params.py checks the parameter path itself.
"""

from __future__ import annotations

import json

import pytest
from fakeswift import FILTERS, FakeReader, FakeSwift, request, rule, use_reader
from flask import Flask, g

from iostack.atrest import inspect as atrest_inspect
from iostack.controller.api import base as api_base
from iostack.filters import library
from iostack.filters.base import FilterSpec
from iostack.filters.builtin import noop
from iostack.filters.metadata import FilterMetadata, Param, public_params
from iostack.stored_object import (
    OBJECT_FILTERS_HEADER,
    OBJECT_LAYER,
    TENANT_LAYER,
)
from iostack.swift_middleware.enforce import object as enforce_object
from iostack.swift_middleware.enforce import proxy as enforce_proxy

SEALED = FilterSpec(FilterMetadata(
    name="sealed", description="a body transform with a key", params=(
        Param("key", "secret"), Param("strength", "int", default=1, minimum=1, maximum=9)),
    stages=frozenset({"proxy", "object"})), make_encoder=noop.NoopEncoder,
    make_view=noop.open_view, preserves_bytes=True)


@pytest.fixture
def sealed(monkeypatch):
    monkeypatch.setitem(library._specs(), "sealed", SEALED)
    monkeypatch.setitem(FILTERS, "sealed", SEALED.metadata)
    return SEALED


@pytest.mark.parametrize("stage", [None, "object"])
def test_neither_layer_records_a_secret(sealed, monkeypatch, stage):
    path = "/v1/AUTH_t1/c/o"
    reader = FakeReader(rule("sealed", stage=stage, key="s3cr3t", strength="4"))
    use_reader(monkeypatch, reader)
    swift = FakeSwift()
    assert request(enforce_proxy.filter_factory({})(swift), "PUT", path, b"body").status_int \
        == 201
    stored = swift.objects[path]
    if stage is None:
        (applied,) = json.loads(stored.headers[TENANT_LAYER.pipeline_header])
    else:
        # The object server needs the key to run the filter: the backend header carries
        # it, typed and with defaults, as the proxy validated it.
        (call,) = swift.calls_to("PUT", path)
        (sent,) = json.loads(call.headers[OBJECT_FILTERS_HEADER])
        assert sent == {"name": "sealed", "params": {"key": "s3cr3t", "strength": 4}}
        store = FakeSwift()
        object_path = "/sda1/0/AUTH_t1/c/o"
        resp = request(enforce_object.filter_factory({})(store), "PUT", object_path, b"body",
                       {OBJECT_FILTERS_HEADER: json.dumps([sent])})
        assert resp.status_int == 201
        (applied,) = json.loads(store.objects[object_path].headers[OBJECT_LAYER.pipeline_header])
    assert applied["params"] == public_params(sealed.metadata, {"key": "s3cr3t", "strength": 4})
    assert applied["params"] == {"strength": 4}


def test_the_controller_and_inspect_mask_what_records_leave_out(sealed, monkeypatch):
    pipeline = [{"filter": "sealed", "params": {"key": "s3cr3t", "strength": 4}}]
    expected = public_params(sealed.metadata, pipeline[0]["params"], mask="***")
    assert atrest_inspect.masked(pipeline, FILTERS)[0]["params"] == expected
    with Flask(__name__).app_context():
        g.filters = FILTERS
        items = json.loads(json.dumps(pipeline))
        assert api_base.redact_params(items) == {"s3cr3t"}
        assert items[0]["params"] == expected
