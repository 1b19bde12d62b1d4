"""The enforcing proxy middleware (``iostack_proxy``) over a fake Swift and a fake policy reader.

The integration tests (tests/integration/swift_middleware/test_datapath.py,
test_fail_closed.py, test_write_paths.py) run the same paths through a real
Swift; these pin the middleware's own decisions in milliseconds.
"""

from __future__ import annotations

import json
import os

import pytest
from fakeswift import FILTERS, FakeReader, FakeSwift, deny, md5, request, rule, use_reader
from swift.common import constraints
from swift.common.swob import Request

import iostack
from iostack.filters.tenant_keys import create_key_file
from iostack.policy.reader import PolicyReader, PolicyStoreUnavailable
from iostack.policy.snapshot import PolicyState, SnapshotFile
from iostack.stored_object import (
    ETAG_HEADER,
    OBJECT_FILTERS_HEADER,
    PIPELINE_HEADER,
    RECORD_FORMAT,
    SIZE_HEADER,
    TENANT_LAYER,
)
from iostack.swift_middleware.enforce.proxy import filter_factory
from iostack.swift_middleware.shared_reader import reader_settings

PATH = "/v1/AUTH_t1/c/o"
# Compressible, several 64 KiB frames, every byte position telling.
BODY = b"".join(b"line %06d of the tenant's object\n" % n for n in range(12000))
OVERRIDE = "X-Object-Sysmeta-Container-Update-Override-"


@pytest.fixture
def reader(monkeypatch) -> FakeReader:
    reader = FakeReader(rule("compression", algorithm="gzip", frame_size=65536))
    use_reader(monkeypatch, reader)
    return reader


@pytest.fixture
def swift() -> FakeSwift:
    return FakeSwift()


@pytest.fixture
def proxy(swift, reader):
    return filter_factory({})(swift)


def test_put_stores_the_encoded_body_and_records_what_it_did(proxy, swift):
    resp = request(proxy, "PUT", PATH, BODY, {"Etag": md5(BODY), "Content-Type": "text/plain"})
    assert resp.status_int == 201
    assert resp.headers["Etag"] == md5(BODY)  # the tenant's, not the stored bytes'
    stored = swift.objects[PATH]
    assert stored.body != BODY and len(stored.body) < len(BODY) // 2
    (applied,) = json.loads(stored.headers[PIPELINE_HEADER])
    assert applied["name"] == "compression" and applied["params"]["algorithm"] == "gzip"
    assert stored.headers[ETAG_HEADER] == md5(BODY)
    assert stored.headers[SIZE_HEADER] == str(len(BODY))
    # Listings show what the tenant stored.
    assert stored.headers[OVERRIDE + "Etag"] == md5(BODY)
    assert stored.headers[OVERRIDE + "Size"] == str(len(BODY))
    # Sent chunked: the stored length is known only at the end.
    (put,) = swift.calls_to("PUT", PATH)
    assert "Content-Length" not in put.headers and put.headers["Transfer-Encoding"] == "chunked"


def test_get_head_and_range_read_what_the_tenant_stored(proxy, swift):
    request(proxy, "PUT", PATH, BODY)
    resp = request(proxy, "GET", PATH)
    assert resp.status_int == 200 and resp.body == BODY
    assert resp.headers["Etag"] == md5(BODY)
    assert not [h for h in resp.headers if h.title().startswith("X-Object-Sysmeta-")]

    head = request(proxy, "HEAD", PATH)
    assert head.status_int == 200 and head.body == b""
    assert head.content_length == len(BODY) and head.headers["Etag"] == md5(BODY)

    # A range in the third frame: the object servers are asked for the whole
    # stored object (ignore-range), swob answers from the decoded view, and
    # the frame it needs is read with a ranged GET pinned to the stored version.
    swift.calls.clear()
    ranged = request(proxy, "GET", PATH, headers={"Range": "bytes=140000-140099"})
    assert ranged.status_int == 206 and ranged.body == BODY[140000:140100]
    assert ranged.headers["Content-Range"] == f"bytes 140000-140099/{len(BODY)}"
    first, *pinned = swift.calls_to("GET", PATH)
    assert first.headers["X-Backend-Ignore-Range-If-Metadata-Present"] == PIPELINE_HEADER
    assert pinned and all(c.headers["If-Match"] == swift.objects[PATH].headers["Etag"]
                          and c.headers["Range"] for c in pinned)
    suffix = request(proxy, "GET", PATH, headers={"Range": "bytes=-10"})
    assert suffix.status_int == 206 and suffix.body == BODY[-10:]


def test_conditional_reads_use_the_tenants_etag(proxy):
    request(proxy, "PUT", PATH, BODY)
    assert request(proxy, "GET", PATH, headers={"If-None-Match": md5(BODY)}).status_int == 304
    assert request(proxy, "GET", PATH, headers={"If-Match": md5(BODY)}).body == BODY
    assert request(proxy, "GET", PATH, headers={"If-Match": "other"}).status_int == 412


def test_reads_follow_the_record_not_todays_policy(proxy, swift, reader):
    request(proxy, "PUT", PATH, BODY)
    reader.levels = []  # the policy was removed since
    assert request(proxy, "GET", PATH).body == BODY
    reader.error = PolicyStoreUnavailable("Redis is down")  # and the store is unreadable
    assert request(proxy, "GET", PATH).body == BODY
    # An object stored before any policy reads as it was stored.
    swift.register("GET", "/v1/AUTH_t1/c/plain", 200, {"Etag": md5(b"raw")}, b"raw")
    assert request(proxy, "GET", "/v1/AUTH_t1/c/plain").body == b"raw"


def test_every_record_names_its_format_and_the_release_that_wrote_it(proxy, swift):
    request(proxy, "PUT", PATH, BODY)
    assert swift.objects[PATH].headers[TENANT_LAYER.format_header] == \
        f"{RECORD_FORMAT} iostack/{iostack.__version__}"


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_record_in_a_newer_format_is_refused_with_a_503_naming_it(proxy, swift, method):
    request(proxy, "PUT", PATH, BODY)
    stored = swift.objects[PATH]
    stored.headers[TENANT_LAYER.format_header] = f"{RECORD_FORMAT + 1} iostack/9.0.0"
    resp = request(proxy, method, PATH)
    assert resp.status_int == 503
    if method == "GET":  # never a body decoded the old way, never a 500
        assert f"format {RECORD_FORMAT + 1}, written by iostack/9.0.0".encode() in resp.body
        assert f"reads formats up to {RECORD_FORMAT}".encode() in resp.body
    stored.headers.pop(TENANT_LAYER.format_header)  # as records were before formats
    assert request(proxy, "GET", PATH).body == BODY
    stored.headers[TENANT_LAYER.format_header] = "two"
    assert request(proxy, "GET", PATH).status_int == 500  # damaged, not newer


STORE_DOWN = {"redis_url": "redis://:pw@127.0.0.1:1/0"}


def store_down_reader(monkeypatch, tmp_path, *levels) -> PolicyReader:
    """The worker's real reader, its store unreachable; ``levels`` (if any) in its copy
    on disk, as a proxy restarted during an outage finds it."""
    snapshot = tmp_path / "policy.json"
    if levels:
        raw = {"rules": {f"{lv.level}:{lv.target}": {r["id"]: json.dumps(r) for r in lv.rules}
                         for lv in levels},
               "tenant_groups": {}, "objrules": {},
               "filters": {n: json.dumps(m.to_json()) for n, m in FILTERS.items()},
               "object_types": {}}
        SnapshotFile(snapshot, "iostack:").save(PolicyState.decode(7, "epoch", raw))
    reader = PolicyReader(**reader_settings(STORE_DOWN | {"policy_snapshot": str(snapshot)}))
    use_reader(monkeypatch, reader, STORE_DOWN)
    return reader


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_writes_go_on_under_the_persisted_version_while_the_store_is_down(
        monkeypatch, tmp_path, method):
    reader = store_down_reader(monkeypatch, tmp_path,
                               rule("compression", algorithm="gzip", frame_size=65536))
    swift = FakeSwift()
    try:
        resp = request(filter_factory(STORE_DOWN)(swift), method, PATH, BODY)
        assert resp.status_int != 503 and swift.calls  # passed on to Swift (a POST: 404 here)
        if method == "PUT":
            assert resp.status_int == 201
            assert json.loads(swift.objects[PATH].headers[PIPELINE_HEADER])[0]["name"] == \
                "compression"
    finally:
        reader.close()


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_writes_fail_closed_503_naming_the_cause_when_no_version_was_ever_held(
        monkeypatch, tmp_path, method):
    reader = store_down_reader(monkeypatch, tmp_path)
    swift = FakeSwift()
    try:
        resp = request(filter_factory(STORE_DOWN)(swift), method, PATH, BODY)
        assert resp.status_int == 503
        assert b"holds no policy version yet" in resp.body
        assert b"policy store cannot be read" in resp.body and b"try again later" in resp.body
        assert swift.calls == [] and swift.objects == {}
    finally:
        reader.close()


@pytest.mark.parametrize("method", ["PUT", "POST"])
def test_an_unauthorized_write_gets_the_auth_answer_even_when_the_store_is_down(
        proxy, swift, reader, method):
    reader.error = PolicyStoreUnavailable("the policy store cannot be read: connection refused")
    resp = request(proxy, method, PATH, BODY, **{"swift.authorize": deny})
    assert resp.status_int == 401
    assert swift.objects == {}


def test_a_bad_policy_parameter_is_a_500_naming_the_filter(proxy, swift, reader):
    reader.levels = [rule("compression", algorithm="lz4")]
    resp = request(proxy, "PUT", PATH, BODY)
    assert resp.status_int == 500 and b"policy filter compression" in resp.body
    assert swift.objects == {}


def test_a_wrong_client_etag_stores_nothing(proxy, swift):
    resp = request(proxy, "PUT", PATH, BODY, {"Etag": md5(b"something else")})
    assert resp.status_int == 422 and b"Etag does not match" in resp.body
    assert swift.objects == {}


@pytest.mark.parametrize(("query", "headers"), [
    ("?multipart-manifest=put", {}),
    ("", {"X-Static-Large-Object": "true"}),
    ("", {"X-Object-Sysmeta-Symlink-Target": "c/target"}),
    ("", {"X-Object-Manifest": "c/segments/"}),
])
def test_manifests_and_symlinks_are_stored_untouched(proxy, swift, reader, query, headers):
    body = b"" if "X-Object-Manifest" in headers else b'[{"path": "/c/seg1"}]'
    resp = request(proxy, "PUT", PATH + query, body, headers)
    assert resp.status_int == 201
    stored = swift.objects[PATH]
    assert stored.body == body and PIPELINE_HEADER not in stored.headers
    assert not [h for h in stored.headers if h.startswith(OVERRIDE)]
    assert reader.requests, "the policy was still looked up: writes need a readable store"


def test_object_stage_filters_are_checked_here_and_sent_down(proxy, swift, reader):
    reader.levels = [rule("compression", stage="object", algorithm="zstd")]
    request(proxy, "PUT", PATH, BODY)
    (put,) = swift.calls_to("PUT", PATH)
    (sent,) = json.loads(put.headers[OBJECT_FILTERS_HEADER])
    assert sent["name"] == "compression" and sent["params"]["algorithm"] == "zstd"
    assert put.body == BODY  # nothing encoded on the proxy
    reader.levels = [rule("compression", stage="object", algorithm="lz4")]
    assert request(proxy, "PUT", PATH, BODY).status_int == 500


def test_client_sent_iostack_sysmeta_never_reaches_the_store(proxy, swift):
    request(proxy, "PUT", PATH, BODY, {PIPELINE_HEADER: '[{"name": "noop"}]',
                                        SIZE_HEADER: "1"})
    stored = swift.objects[PATH]
    assert json.loads(stored.headers[PIPELINE_HEADER])[0]["name"] == "compression"
    assert stored.headers[SIZE_HEADER] == str(len(BODY))


def test_byte_preserving_filters_keep_swifts_etag_and_length(proxy, swift, reader):
    reader.levels = [rule("noop")]
    resp = request(proxy, "PUT", PATH, BODY, {"Etag": md5(BODY)})
    assert resp.status_int == 201
    (put,) = swift.calls_to("PUT", PATH)
    assert put.headers["Content-Length"] == str(len(BODY)) and put.headers["Etag"] == md5(BODY)
    stored = swift.objects[PATH]
    assert stored.body == BODY and json.loads(stored.headers[PIPELINE_HEADER])[0]["name"] == "noop"
    assert SIZE_HEADER not in stored.headers
    assert request(proxy, "GET", PATH, headers={"Range": "bytes=5-9"}).body == BODY[5:10]


def _unframed_put(proxy, **headers: str):
    """A PUT of BODY whose framing is only ``headers`` (no Content-Length of its own)."""
    req = Request.blank(PATH, environ={"REQUEST_METHOD": "PUT"}, body=BODY)
    del req.headers["Content-Length"]
    req.headers.update(headers)
    return req.get_response(proxy)


@pytest.mark.parametrize(("headers", "status"), [
    ({}, 411),  # neither Content-Length nor chunked: Swift asks for a length
    ({"Transfer-Encoding": "gzip,chunked"}, 501),
])
def test_framing_swift_refuses_is_refused_before_it_is_rewritten(proxy, swift, headers, status):
    # Encoding sends the body chunked; the client's framing must be judged first,
    # as Swift's proxy judges it (the body was once stored empty with 201).
    resp = _unframed_put(proxy, **headers)
    assert resp.status_int == status
    assert swift.calls_to("PUT", PATH) == [] and swift.objects == {}


@pytest.mark.parametrize("content_type", [None, ""])
def test_a_missing_or_empty_content_type_is_stored_as_swift_would(proxy, swift, content_type):
    # swiftclient sends an empty Content-Type; Swift's proxy guesses one, so the
    # creation checks made here must not refuse it as invalid.
    headers = {"Content-Length": str(len(BODY))}
    if content_type is not None:
        headers["Content-Type"] = content_type
    assert _unframed_put(proxy, **headers).status_int == 201
    assert PATH in swift.objects


def test_a_declared_length_over_swifts_limit_is_refused_up_front(proxy, swift, monkeypatch):
    monkeypatch.setattr(constraints, "MAX_FILE_SIZE", len(BODY) - 1)
    resp = _unframed_put(proxy, **{"Content-Length": str(len(BODY))})
    assert resp.status_int == 413
    assert swift.calls_to("PUT", PATH) == []


def test_swifts_limit_holds_for_the_tenants_bytes_not_the_stored_ones(proxy, swift, monkeypatch):
    # Compressed, BODY is far under the limit; what the tenant stores is over it.
    monkeypatch.setattr(constraints, "MAX_FILE_SIZE", len(BODY) // 2)
    resp = _unframed_put(proxy, **{"Transfer-Encoding": "chunked"})
    assert resp.status_int == 413
    assert swift.objects == {}
    monkeypatch.setattr(constraints, "MAX_FILE_SIZE", len(BODY))
    assert _unframed_put(proxy, **{"Transfer-Encoding": "chunked"}).status_int == 201
    assert swift.objects[PATH].headers[SIZE_HEADER] == str(len(BODY))


def test_unframed_puts_of_unauthorized_clients_get_the_auth_answer(proxy, swift):
    req = Request.blank(PATH, environ={"REQUEST_METHOD": "PUT", "swift.authorize": deny},
                        body=BODY)
    del req.headers["Content-Length"]
    assert req.get_response(proxy).status_int == 401


def test_unauthorized_requests_get_the_auth_answer_and_store_nothing(proxy, swift):
    resp = request(proxy, "PUT", PATH, BODY, **{"swift.authorize": deny})
    assert resp.status_int == 401
    assert swift.objects == {}
    (put,) = swift.calls_to("PUT", PATH)
    assert put.body is None  # refused before the body was read: nothing was encoded
    request(proxy, "PUT", PATH, BODY)
    denied = request(proxy, "GET", PATH, **{"swift.authorize": deny})
    assert denied.status_int == 401 and BODY[:20] not in denied.body


def test_requests_that_are_not_object_writes_pass_through(proxy, swift, reader):
    assert request(proxy, "PUT", "/v1/AUTH_t1/c").status_int == 201  # a container PUT
    assert request(proxy, "GET", "/info").status_int == 404
    assert reader.requests == []


PIN = "/v1/AUTH_t1/storlet/iostack_pin_0123456789abcdef0123456789abcdef.py"


@pytest.mark.parametrize("method", ["PUT", "POST", "DELETE"])
def test_a_tenant_cannot_change_or_remove_a_pinned_filter_version(proxy, swift, method):
    request(proxy, "PUT", PIN, b"class A: pass\n", reseller_request=True)  # the admin uploads
    refused = request(proxy, method, PIN, b"class B: pass\n" if method == "PUT" else None)
    assert refused.status_int == 403 and b"pinned filter version" in refused.body
    assert len(swift.calls_to(method, PIN)) == (1 if method == "PUT" else 0)
    assert request(proxy, "GET", PIN).body == b"class A: pass\n"  # reads are the tenant's
    # The reseller admin removes versions no object uses; other storlets are the tenant's.
    assert request(proxy, "DELETE", PIN, reseller_request=True).status_int < 300
    plain = "/v1/AUTH_t1/storlet/upper.py"
    assert request(proxy, "PUT", plain, b"x").status_int == 201
    assert request(proxy, "DELETE", plain).status_int < 300


RANDOM = os.urandom(300_000)  # more than four 64 KiB frames


@pytest.mark.parametrize("framing", ["length", "chunked"])
def test_an_incompressible_body_is_stored_as_it_came_with_swifts_etag_and_length(
        proxy, swift, framing):
    headers = {"Etag": md5(RANDOM)}
    if framing == "chunked":
        headers["Transfer-Encoding"] = "chunked"
    req = Request.blank(PATH, environ={"REQUEST_METHOD": "PUT"}, body=RANDOM, headers=headers)
    if framing == "chunked":
        del req.headers["Content-Length"]
    assert req.get_response(proxy).status_int == 201
    (put,) = swift.calls_to("PUT", PATH)
    assert put.headers.get("Content-Length") == (str(len(RANDOM)) if framing == "length"
                                                 else None)
    assert put.headers["Etag"] == md5(RANDOM)  # Swift checks the client's ETag itself
    stored = swift.objects[PATH]
    assert stored.body == RANDOM and SIZE_HEADER not in stored.headers
    (applied,) = json.loads(stored.headers[PIPELINE_HEADER])
    assert applied["name"] == "compression" and applied["meta"]["unchanged"] == "1"
    got = request(proxy, "GET", PATH)
    assert got.body == RANDOM and got.headers["Etag"] == md5(RANDOM)
    assert request(proxy, "GET", PATH, headers={"Range": "bytes=70000-70009"}).body == \
        RANDOM[70000:70010]
    assert request(proxy, "HEAD", PATH).content_length == len(RANDOM)


def test_keeping_incompressible_bodies_can_be_turned_off_for_a_rolling_upgrade(swift, reader):
    proxy = filter_factory({"keep_incompressible": "false"})(swift)
    assert request(proxy, "PUT", PATH, RANDOM).status_int == 201
    stored = swift.objects[PATH]
    assert "unchanged" not in stored.headers[PIPELINE_HEADER]
    assert len(stored.body) > len(RANDOM)  # raw frames and their index
    assert request(proxy, "GET", PATH).body == RANDOM


def test_an_incompressible_body_with_a_wrong_etag_is_refused_by_swift(proxy, swift):
    resp = request(proxy, "PUT", PATH, RANDOM, {"Etag": md5(b"other")})
    assert resp.status_int == 422 and PATH not in swift.objects


def test_a_body_that_compresses_after_its_first_frame_is_encoded_whole(proxy, swift):
    body = RANDOM[:65536] + BODY
    assert request(proxy, "PUT", PATH, body).status_int == 201
    stored = swift.objects[PATH]
    assert len(stored.body) < len(body) // 2 and stored.headers[SIZE_HEADER] == str(len(body))
    assert request(proxy, "GET", PATH).body == body


def test_only_a_pipeline_of_filters_that_can_keep_a_body_unchanged_is_sampled(
        swift, reader, tmp_path):
    create_key_file(tmp_path / "root.key")
    proxy = filter_factory({"key_file": str(tmp_path / "root.key")})(swift)
    reader.levels = [rule("compression", algorithm="gzip"), rule("encryption")]
    assert request(proxy, "PUT", PATH, RANDOM).status_int == 201
    stored = swift.objects[PATH]
    assert stored.body[:1000] != RANDOM[:1000] and SIZE_HEADER in stored.headers
    assert request(proxy, "GET", PATH).body == RANDOM
