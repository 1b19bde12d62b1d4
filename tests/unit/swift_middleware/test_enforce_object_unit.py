"""The object-server middleware (``iostack_object``) over a fake object server: filters a
policy stages ``ON OBJECT`` run on PUT and are undone on GET.

tests/integration/swift_middleware/test_datapath.py runs the same through real object servers.
"""

from __future__ import annotations

import json

import pytest
from fakeswift import FakeSwift, md5, request

from iostack.stored_object import (
    ETAG_HEADER,
    OBJECT_FILTERS_HEADER,
    OBJECT_LAYER,
    PIPELINE_HEADER,
    RAW_HEADER,
    RECORD_FORMAT,
    SIZE_HEADER,
)
from iostack.swift_middleware.enforce.object import filter_factory

PATH = "/sda1/0/AUTH_t1/c/o"
BODY = b"".join(b"row %06d,object stage,some text\n" % n for n in range(10000))
FILTERS = json.dumps([{"name": "compression", "params": {"algorithm": "zstd",
                                                        "frame_size": 65536}}])
OVERRIDE = "X-Object-Sysmeta-Container-Update-Override-"


@pytest.fixture
def swift() -> FakeSwift:
    return FakeSwift()


@pytest.fixture
def object_server(swift):
    return filter_factory({})(swift)


def put(app, body: bytes = BODY, **headers: str):
    return request(app, "PUT", PATH, body, {OBJECT_FILTERS_HEADER: FILTERS, **headers})


def test_put_encodes_into_the_store_with_the_object_layers_record(object_server, swift):
    resp = put(object_server, Etag=md5(BODY))
    assert resp.status_int == 201
    assert resp.etag == md5(BODY)  # what the proxy sent, not what is on disk
    stored = swift.objects[PATH]
    assert stored.body != BODY and len(stored.body) < len(BODY) // 2
    (applied,) = json.loads(stored.headers[OBJECT_LAYER.pipeline_header])
    assert applied["name"] == "compression" and applied["params"]["algorithm"] == "zstd"
    assert stored.headers[OBJECT_LAYER.etag_header] == md5(BODY)
    assert stored.headers[OBJECT_LAYER.size_header] == str(len(BODY))
    assert stored.headers[OBJECT_LAYER.format_header].startswith(f"{RECORD_FORMAT} iostack/")
    # No proxy layer above: what arrived is the tenant's body, and listings say so.
    assert stored.headers[ETAG_HEADER] == md5(BODY)
    assert stored.headers[SIZE_HEADER] == str(len(BODY))
    assert stored.headers[OVERRIDE + "Size"] == str(len(BODY))
    # Body and record reached the object server as one MIME document.
    (call,) = swift.calls_to("PUT", PATH)
    assert OBJECT_FILTERS_HEADER not in call.headers
    assert call.headers["X-Backend-Obj-Metadata-Footer"] == "yes"


def test_get_head_and_range_undo_the_object_layer(object_server, swift):
    put(object_server)
    resp = request(object_server, "GET", PATH)
    assert resp.status_int == 200 and resp.body == BODY
    assert resp.headers["Etag"] == md5(BODY)
    assert OBJECT_LAYER.pipeline_header not in resp.headers
    head = request(object_server, "HEAD", PATH)
    assert head.content_length == len(BODY) and head.body == b""
    ranged = request(object_server, "GET", PATH, headers={"Range": "bytes=200000-200049"})
    assert ranged.status_int == 206 and ranged.body == BODY[200000:200050]


def test_the_raw_header_reads_the_stored_bytes(object_server, swift):
    put(object_server)
    raw = request(object_server, "GET", PATH, headers={RAW_HEADER: "true"})
    assert raw.body == swift.objects[PATH].body
    assert OBJECT_LAYER.pipeline_header in raw.headers


def test_a_proxy_mime_put_keeps_the_proxys_footers(object_server, swift):
    """The proxy layer's record travels in the proxy's footer; the object layer adds its own."""
    boundary = "b0undary"
    proxy_footers = {PIPELINE_HEADER: '[{"name":"noop","params":{},"meta":{}}]',
                     ETAG_HEADER: "tenant-etag", SIZE_HEADER: "7", "Etag": md5(BODY)}
    doc = json.dumps(proxy_footers).encode()
    mime = (b"--b0undary\r\nX-Document: object body\r\n\r\n" + BODY
            + b"\r\n--b0undary\r\nX-Document: object metadata\r\nContent-MD5: "
            + md5(doc).encode() + b"\r\n\r\n" + doc + b"\r\n--b0undary--")
    resp = request(object_server, "PUT", PATH, mime, {
        OBJECT_FILTERS_HEADER: FILTERS, "X-Backend-Obj-Multipart-Mime-Boundary": boundary,
        "X-Backend-Obj-Metadata-Footer": "yes"})
    assert resp.status_int == 201
    stored = swift.objects[PATH]
    assert stored.headers[ETAG_HEADER] == "tenant-etag" and stored.headers[SIZE_HEADER] == "7"
    assert stored.headers[PIPELINE_HEADER] == proxy_footers[PIPELINE_HEADER]
    assert stored.headers[OBJECT_LAYER.size_header] == str(len(BODY))
    assert request(object_server, "GET", PATH, headers={RAW_HEADER: "1"}).body != BODY
    # The object server answers the proxy layer's stored form: the object layer undone.
    assert request(object_server, "GET", PATH).body == BODY


def test_a_body_that_does_not_match_its_etag_is_not_stored(object_server, swift):
    resp = put(object_server, Etag=md5(b"another body"))
    assert resp.status_int == 422 and b"Etag does not match" in resp.body
    assert swift.objects == {}


@pytest.mark.parametrize("filters", ['[{"name": "no-such-filter"}]', "not json",
                                     '[{"name": "compression", "params": {"level": 99}}]',
                                     '{"name": "compression"}', "[5]", '[{"name": 5}]',
                                     '[{"name": "compression", "params": []}]',
                                     '[{"name": "compression", "params": {"level": [1]}}]'])
def test_a_bad_filter_header_is_a_500_and_nothing_is_stored(object_server, swift, filters):
    # The proxy validated what it sent; a header this node cannot run is refused
    # with its reason (never an unhandled error) before a byte is read.
    resp = request(object_server, "PUT", PATH, BODY, {OBJECT_FILTERS_HEADER: filters})
    assert resp.status_int == 500 and b"IOStack object stage" in resp.body
    assert swift.calls == []


def test_objects_without_an_object_layer_pass_through(object_server, swift):
    assert request(object_server, "PUT", PATH, BODY).status_int == 201
    assert swift.objects[PATH].body == BODY
    assert OBJECT_LAYER.pipeline_header not in swift.objects[PATH].headers
    assert request(object_server, "GET", PATH, headers={"Range": "bytes=0-3"}).body == BODY[:4]
