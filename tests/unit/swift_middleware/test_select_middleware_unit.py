"""The selection middlewares (``iostack_select`` on proxies, ``iostack_select_object`` on object
servers) over a fake Swift: what is refused before any byte is read, who selects, the framing.

tests/integration/swift_middleware/test_select*.py run the same against a real Swift.
"""

from __future__ import annotations

import pytest
from fakeswift import FakeReader, FakeSwift, Stored, deny, request, rule, use_reader
from swift.common.swob import Request

from iostack.policy.reader import PolicyStoreUnavailable
from iostack.stored_object import PIPELINE_HEADER
from iostack.swift_middleware.select.engine import SelectError
from iostack.swift_middleware.select.frames import (
    BACKEND_SELECTED_HEADER,
    DATA,
    END,
    FRAMES,
    PADDING,
    SELECT_HEADER,
    error_frame,
    frame,
    read_frames,
    select_request,
)
from iostack.swift_middleware.select.object import filter_factory as object_factory
from iostack.swift_middleware.select.proxy import MAX_PARAM_BYTES, MAX_PARAMS, filter_factory

PATH = "/v1/AUTH_t1/c/people.csv"
CSV = b"name,age\n" + b"".join(b"p%04d,%d\n" % (n, n % 90) for n in range(3000))
OLD = [line for line in CSV.split(b"\n")[1:] if line and int(line.split(b",")[1]) > 80]
SELECT = {"X-Iostack-Filter": "csv_select", "X-Iostack-Param-Columns": "name",
          "X-Iostack-Param-Where": "age > 80"}


def names(lines: list[bytes]) -> bytes:
    return b"".join(line.split(b",")[0] + b"\n" for line in lines)


@pytest.fixture
def reader(monkeypatch) -> FakeReader:
    reader = FakeReader()
    use_reader(monkeypatch, reader)
    return reader


@pytest.fixture
def swift() -> FakeSwift:
    swift = FakeSwift()
    swift.objects[PATH] = Stored({"Content-Type": "text/csv", "Etag": "e"}, CSV)
    return swift


@pytest.fixture
def select(swift, reader):
    return filter_factory({})(swift)


class ObjectServers:
    """What a proxy server does with an object GET, enough for selection: ask the object
    server (a fake one under ``iostack_select_object``) on its own path."""

    def __init__(self, swift: FakeSwift) -> None:
        self.object_server = object_factory({"padding": "64"})(swift)

    def __call__(self, env, start_response):
        if env["PATH_INFO"].startswith("/v1/") and env["PATH_INFO"].count("/") >= 4:
            env = dict(env, PATH_INFO="/sda1/0/" + env["PATH_INFO"][len("/v1/"):])
        return self.object_server(env, start_response)


# -- refused before reading --------------------------------------------------------

def test_a_bad_predicate_is_a_400_naming_it_before_any_read(select, swift):
    resp = request(select, "GET", PATH, headers={**SELECT, "X-Iostack-Param-Where": "age >>> ("})
    assert resp.status_int == 400
    assert b"'where'" in resp.body and b"column 6" in resp.body
    assert swift.calls == []


@pytest.mark.parametrize(("headers", "message"), [
    ({f"X-Iostack-Param-P{n}": "x" for n in range(MAX_PARAMS + 1)},
     f"at most {MAX_PARAMS} record-filter parameters"),
    ({"X-Iostack-Param-Where": "x" * (MAX_PARAM_BYTES + 1)}, f"longer than {MAX_PARAM_BYTES}"),
    ({"X-Iostack-Filter": "compression"}, "is not a record filter (one of: csv_select"),
    ({"X-Iostack-Stage": "elsewhere"}, "X-Iostack-Stage: 'elsewhere' is not one of"),
    ({"X-Iostack-Param-Columns": "nosuchcolumn"}, "nosuchcolumn"),
])
def test_request_parameters_are_capped_and_checked(select, swift, headers, message):
    resp = request(select, "GET", PATH, headers={**SELECT, **headers})
    assert resp.status_int == 400 and message.encode() in resp.body


def test_an_unauthorized_request_gets_the_auth_answer_unparsed(select, swift, reader):
    resp = request(select, "GET", PATH, headers={**SELECT, "X-Iostack-Param-Where": "age >>> ("},
                   **{"swift.authorize": deny})
    assert resp.status_int == 401  # not the 400 that parsing the predicate would give
    assert reader.requests == []  # nor a policy lookup
    assert [c.headers.get(SELECT_HEADER) for c in swift.calls_to("GET", PATH)] == [None]


# -- who selects -------------------------------------------------------------------

def test_the_proxy_selects_when_the_object_server_answers_with_the_object(select, swift):
    resp = request(select, "GET", PATH, headers=SELECT)
    assert resp.status_int == 200 and resp.body == b"name\n" + names(OLD)
    assert resp.headers["X-Iostack-Selected"] == "csv_select"
    assert resp.headers["X-Iostack-Selected-On"] == "proxy"
    assert "Etag" not in resp.headers and "Content-Length" not in resp.headers
    asked, *_ = swift.calls_to("GET", PATH)
    assert asked.headers[SELECT_HEADER]  # the object servers were asked first


def test_the_query_string_form_and_byte_range_splits(select):
    query = "?iostack-filter=csv_select&iostack-columns=name&iostack-where=age%20%3E%2080"
    whole = request(select, "GET", PATH + query).body
    assert whole == b"name\n" + names(OLD)
    # Each record belongs to the range it starts in: splits never lose or repeat one.
    middle = len(CSV) // 2
    first = request(select, "GET", PATH + query, headers={"Range": f"bytes=0-{middle}"})
    second = request(select, "GET", PATH + query, headers={"Range": f"bytes={middle + 1}-"})
    assert first.status_int == second.status_int == 200
    assert first.body + second.body.removeprefix(b"name\n") == whole


def test_object_servers_select_and_the_proxy_relays_their_frames(swift, reader):
    swift.objects["/sda1/0/AUTH_t1/c/people.csv"] = swift.objects.pop(PATH)
    select = filter_factory({})(ObjectServers(swift))
    resp = request(select, "GET", PATH, headers=SELECT)
    assert resp.status_int == 200 and resp.body == b"name\n" + names(OLD)
    assert resp.headers["X-Iostack-Selected-On"] == "object"
    assert not [h for h in resp.headers if h.lower().startswith("x-backend-")]


def test_object_servers_decline_proxy_encoded_objects_and_the_proxy_selects(swift, reader):
    stored = swift.objects.pop(PATH)
    stored.headers[PIPELINE_HEADER] = "[]"
    swift.objects["/sda1/0/AUTH_t1/c/people.csv"] = stored
    select = filter_factory({})(ObjectServers(swift))
    resp = request(select, "GET", PATH, headers=SELECT)
    assert resp.headers["X-Iostack-Selected-On"] == "proxy"
    assert resp.body == b"name\n" + names(OLD)


def test_a_policy_selects_every_get_and_a_request_narrows_it(select, reader):
    reader.levels = [rule("csv_select", columns="name,age", where="age > 80")]
    assert request(select, "GET", PATH).body == b"name,age\n" + b"".join(
        line + b"\n" for line in OLD)
    narrowed = request(select, "GET", PATH, headers={"X-Iostack-Filter": "csv_select",
                                                     "X-Iostack-Param-Columns": "name"})
    assert narrowed.body == b"name\n" + names(OLD)
    assert narrowed.headers["X-Iostack-Selected"] == "csv_select,csv_select"
    reader.error = PolicyStoreUnavailable("Redis is down")
    assert request(select, "GET", PATH).body == CSV  # selection fails open


def test_head_describes_what_get_answers_under_a_selection_policy(select, reader):
    reader.levels = [rule("csv_select", columns="name", output="jsonl")]
    get = request(select, "GET", PATH)
    # Headers as sent (a swob Response made from a body list would add Content-Length: 0).
    status, sent, _ = Request.blank(PATH, environ={"REQUEST_METHOD": "HEAD"}).call_application(
        select)
    head = dict(sent)
    assert status.startswith("200")
    assert get.headers["X-Iostack-Selected"] == head["X-Iostack-Selected"] == "csv_select"
    assert get.headers["Content-Type"] == head["Content-Type"] == "application/x-ndjson"
    for name in ("Content-Length", "Etag"):
        assert name not in get.headers
        assert name not in head  # the stored object's would describe another body
    assert request(select, "HEAD", "/v1/AUTH_t1/c/missing.csv").status_int == 404


@pytest.mark.parametrize("skip", [{"headers": {"X-Iostack-Policy-Select": "off"}},
                                  {"query": "iostack-policy-select=OFF"}])
def test_the_owner_reads_the_stored_object_by_skipping_the_policys_selection(select, reader,
                                                                             skip):
    reader.levels = [rule("csv_select", columns="name")]
    path = PATH + ("?" + skip["query"] if "query" in skip else "")
    headers = skip.get("headers", {})
    original = request(select, "GET", path, headers=headers)
    assert original.body == CSV and "X-Iostack-Selected" not in original.headers
    head = request(select, "HEAD", path, headers=headers)
    assert head.headers["Content-Length"] == str(len(CSV))
    # A request's own filter still runs, on the object as stored.
    own = request(select, "GET", path, headers={**headers, "X-Iostack-Filter": "csv_select",
                                                "X-Iostack-Param-Columns": "age"})
    assert own.body.startswith(b"age\n0\n1\n")


# -- framing -------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "status", "message"), [
    ([frame(PADDING, b"\0" * 8)], 503, b"stopped before its end"),
    ([frame(PADDING), error_frame(422, "broken quote in line 3")], 422, b"broken quote"),
])
def test_a_framed_answer_that_fails_first_is_an_error_response(swift, reader, body, status,
                                                                message):
    swift.register("GET", PATH, 200, {BACKEND_SELECTED_HEADER: FRAMES}, body)
    resp = request(filter_factory({})(swift), "GET", PATH, headers=SELECT)
    assert resp.status_int == status and message in resp.body


def test_an_answer_cut_after_its_first_bytes_is_cut_short_not_complete(swift, reader):
    swift.register("GET", PATH, 200, {BACKEND_SELECTED_HEADER: FRAMES},
                   [frame(DATA, b"name\n"), frame(DATA, b"p0081\n")])
    select = filter_factory({})(swift)
    with pytest.raises(OSError, match="stopped before its end"):
        request(select, "GET", PATH, headers=SELECT)


OBJECT_PATH = "/sda1/0/AUTH_t1/c/people.csv"


@pytest.fixture
def object_select(swift):
    swift.objects[OBJECT_PATH] = swift.objects.pop(PATH)
    return object_factory({"padding": "32"})(swift)


def backend_select(start: int = 0, end: int | None = None, **params: str) -> dict[str, str]:
    return {SELECT_HEADER: select_request([("csv_select", params)], start, end)}


def test_the_object_stage_answers_in_frames(object_select):
    resp = request(object_select, "GET", OBJECT_PATH,
                   headers=backend_select(columns="name", where="age > 80"))
    assert resp.status_int == 200 and resp.headers[BACKEND_SELECTED_HEADER] == FRAMES
    assert resp.body.startswith(frame(PADDING, b"\0" * 23))  # headers leave at once
    assert resp.body.endswith(frame(END))
    assert b"".join(read_frames([resp.body])) == b"name\n" + names(OLD)


def test_the_object_stage_reports_a_bad_column_in_a_frame(object_select):
    resp = request(object_select, "GET", OBJECT_PATH, headers=backend_select(columns="nope"))
    assert resp.status_int == 200
    with pytest.raises(SelectError, match="nope") as caught:
        b"".join(read_frames([resp.body]))
    assert caught.value.status == 400


@pytest.mark.parametrize(("headers", "status"), [
    ({**backend_select(columns="name"), "Range": "bytes=10-"}, 503),
    ({SELECT_HEADER: '{"filters": []}'}, 400),
    ({SELECT_HEADER: select_request([("compression", {})], 0, None)}, 400),
])
def test_the_object_stage_refuses_what_it_cannot_answer(object_select, swift, headers, status):
    assert request(object_select, "GET", OBJECT_PATH, headers=headers).status_int == status
    assert swift.calls == []


def test_the_object_stage_passes_missing_objects_and_plain_gets(object_select):
    missing = request(object_select, "GET", "/sda1/0/AUTH_t1/c/nothing",
                      headers=backend_select(columns="name"))
    assert missing.status_int == 404
    assert request(object_select, "GET", OBJECT_PATH).body == CSV
