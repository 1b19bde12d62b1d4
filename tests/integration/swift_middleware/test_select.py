"""Record selection (``iostack_select``) on the all-in-one's proxy: csv_select and grep."""

from __future__ import annotations

import csv
import io
import json
import random
import time
from urllib.parse import quote

import pytest
import requests
from swift.common import direct_client, utils
from swift.common.ring import Ring

from iostack.swift_middleware.select.frames import (
    BACKEND_SELECTED_HEADER,
    FRAMES,
    SELECT_HEADER,
    read_frames,
    select_request,
)

pytestmark = pytest.mark.integration

HEADER = "ts,user_id,url,status,agent\n"


def log_body(lines: int, seed: int = 3) -> bytes:
    rng = random.Random(seed)
    out = [HEADER]
    for i in range(lines):
        agent = rng.choice(['"Mozilla/5.0 (X11, Linux)"', "curl/8", '"say ""hi"""', ""])
        out.append(f"{1000 + i},u{rng.randrange(50):03d},/p/{rng.randrange(9)},"
                   f"{rng.choice([200, 200, 404, 500])},{agent}\n")
    return "".join(out).encode()


def parsed(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


@pytest.fixture
def http(t1):
    url, token = t1.get_auth()

    def get(path: str, headers: dict[str, str] | None = None, **params) -> requests.Response:
        return requests.get(f"{url}/{path}", params=params, timeout=30,
                            headers={"X-Auth-Token": token, **(headers or {})})

    return get


def select_headers(**params: str) -> dict[str, str]:
    return {"X-Iostack-Filter": "csv_select",
            **{f"X-Iostack-Param-{k.title()}": v for k, v in params.items()}}


def test_selection_runs_on_the_object_servers_by_default(t1, container, http):
    body = log_body(300)
    t1.put_object(container, "a.csv", body)
    answer = http(f"{container}/a.csv", select_headers(columns="user_id"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Iostack-Selected"] == "csv_select"
    assert answer.headers["X-Iostack-Selected-On"] == "object"
    assert not any(k.lower().startswith(("x-backend-", "x-object-sysmeta-"))
                   for k in answer.headers)
    assert parsed(answer.content) == [[r[1]] for r in parsed(body)]


def test_a_request_can_ask_for_the_proxy(t1, container, http):
    body = log_body(300)
    t1.put_object(container, "a.csv", body)
    answer = http(f"{container}/a.csv", {"X-Iostack-Stage": "proxy",
                                         **select_headers(columns="url")})
    assert answer.headers["X-Iostack-Selected-On"] == "proxy"
    assert parsed(answer.content) == [[r[2]] for r in parsed(body)]
    both = http(f"{container}/a.csv", {"X-Iostack-Stage": "proxy"}, **{
        "iostack-filter": "csv_select", "iostack-columns": "url", "iostack-stage": "object"})
    assert both.headers["X-Iostack-Selected-On"] == "proxy", both.text  # the header wins
    bad = http(f"{container}/a.csv", {"X-Iostack-Stage": "client", **select_headers()})
    assert bad.status_code == 400 and "'client' is not one of object, proxy" in bad.text


def test_a_policy_can_keep_the_selection_on_the_proxy(t1, container, http, policies):
    body = log_body(300)
    t1.put_object(container, "a.csv", body)
    policies.add(f"FOR CONTAINER t1/{container} DO SET CSV_SELECT WITH columns=status ON PROXY")
    answer = http(f"{container}/a.csv")
    assert answer.headers["X-Iostack-Selected-On"] == "proxy"
    assert parsed(answer.content) == [[r[3]] for r in parsed(body)]


def test_large_objects_are_selected_whole_by_the_proxy(t1, container, http):
    body = log_body(3000, seed=5)
    cut = body.index(b"\n", len(body) // 2) + 7  # the second segment starts mid-record
    segments = [body[:cut], body[cut:]]
    manifest = []
    for index, segment in enumerate(segments):
        etag = t1.put_object(container, f"seg/{index}", segment)
        manifest.append({"path": f"{container}/seg/{index}", "etag": etag,
                         "size_bytes": len(segment)})
    t1.put_object(container, "big.csv", json.dumps(manifest),
                  query_string="multipart-manifest=put")
    answer = http(f"{container}/big.csv", select_headers(columns="ts", where="status = 500"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Iostack-Selected-On"] == "proxy"
    assert parsed(answer.content) == [["ts"]] + [[r[0]] for r in parsed(body)[1:]
                                                 if r[3] == "500"]


def test_object_servers_refuse_to_resume_a_selection_mid_answer(aio, t1, container):
    """A proxy retrying another replica at a byte offset must not splice two answers."""
    t1.put_object(container, "a.csv", log_body(100))
    utils.set_swift_dir(aio["swift_dir"])
    part, nodes = Ring(aio["swift_dir"], ring_name="object").get_nodes(
        "AUTH_t1", container, "a.csv")
    request = select_request([("csv_select", {"columns": "ts"})], 0, None)
    with pytest.raises(direct_client.DirectClientException) as caught:
        direct_client.direct_get_object(nodes[0], part, "AUTH_t1", container, "a.csv",
                                        headers={SELECT_HEADER: request, "Range": "bytes=9-"})
    assert caught.value.http_status == 503
    with pytest.raises(direct_client.DirectClientException) as caught:
        direct_client.direct_get_object(nodes[0], part, "AUTH_t1", container, "a.csv",
                                        headers={SELECT_HEADER: "{not json"})
    assert caught.value.http_status == 400
    headers, framed = direct_client.direct_get_object(
        nodes[0], part, "AUTH_t1", container, "a.csv", headers={SELECT_HEADER: request})
    assert headers[BACKEND_SELECTED_HEADER] == FRAMES
    assert b"".join(read_frames([framed])) == b"".join(
        row.split(b",")[0] + b"\n" for row in log_body(100).splitlines())


def test_per_request_projection_and_predicate_equal_a_local_reading(t1, container, http):
    body = log_body(3000)
    t1.put_object(container, "a.csv", body)
    answer = http(f"{container}/a.csv",
                  select_headers(columns="user_id,agent", where="status >= 404"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Iostack-Selected"] == "csv_select"
    assert "Etag" not in answer.headers and "Content-Length" not in answer.headers
    local = parsed(body)
    expected = [["user_id", "agent"]] + [[r[1], r[4]] for r in local[1:] if int(r[3]) >= 404]
    assert parsed(answer.content) == expected
    assert len(answer.content) < len(body) / 2


def test_query_parameters_invoke_it_too(t1, container, http):
    t1.put_object(container, "a.csv", log_body(50))
    answer = http(f"{container}/a.csv", **{"iostack-filter": "csv_select",
                                           "iostack-columns": "1", "iostack-where": "ts < 1003"})
    assert answer.status_code == 200, answer.text
    assert [row[0] for row in parsed(answer.content)[1:]] == [
        r[1] for r in parsed(log_body(50))[1:4]]


def test_byte_range_splits_at_random_offsets_give_each_row_once(t1, container, http):
    body = log_body(4000, seed=9)
    t1.put_object(container, "a.csv", body)
    rng = random.Random(1)
    cuts = sorted(rng.sample(range(1, len(body)), 7))
    got = []
    for start, stop in zip([0, *cuts], [*cuts, len(body)], strict=True):
        answer = http(f"{container}/a.csv", {"Range": f"bytes={start}-{stop - 1}",
                                             **select_headers(columns="ts,user_id")})
        assert answer.status_code == 200, answer.text
        rows = parsed(answer.content)
        got += rows[1:] if start == 0 else rows
        assert (rows[:1] == [["ts", "user_id"]]) == (start == 0)
    assert got == [[r[0], r[1]] for r in parsed(body)[1:]]


def test_a_split_past_the_end_is_empty(t1, container, http):
    t1.put_object(container, "a.csv", log_body(10))
    answer = http(f"{container}/a.csv", {"Range": "bytes=100000-", **select_headers()})
    assert (answer.status_code, answer.content) == (200, b"")


def test_bad_requests_get_400_naming_the_problem(t1, container, http):
    t1.put_object(container, "a.csv", log_body(10))
    cases = [
        (select_headers(columns="nope"), "no column 'nope' (columns: ts, user_id, url"),
        (select_headers(where="status >"), "found the end at column 9"),
        (select_headers(wher="x"),
         "unknown parameter (known: columns, delimiter, header, output, where)"),
        ({"X-Iostack-Filter": "compression"}, "'compression' is not a record filter"),
        ({"Range": "bytes=1-2,5-9", **select_headers()}, "one range"),
        ({"X-Iostack-Filter": "grep", "X-Iostack-Param-Pattern": "(x"}, "missing )"),
    ]
    for headers, message in cases:
        answer = http(f"{container}/a.csv", headers)
        assert answer.status_code == 400, (headers, answer.text)
        assert message in answer.text, answer.text


def test_a_missing_object_is_still_404(container, http):
    assert http(f"{container}/missing.csv", select_headers()).status_code == 404


def test_empty_and_header_only_objects(t1, container, http):
    t1.put_object(container, "empty.csv", b"")
    t1.put_object(container, "header.csv", HEADER.encode())
    empty = http(f"{container}/empty.csv", select_headers(columns="user_id"))
    assert (empty.status_code, empty.content) == (200, b"")
    header = http(f"{container}/header.csv", select_headers(columns="user_id,status"))
    assert (header.status_code, header.content) == (200, b"user_id,status\n")
    later = http(f"{container}/header.csv", {"Range": "bytes=5-", **select_headers()})
    assert (later.status_code, later.content) == (200, b"")


def test_policy_selection_and_a_request_narrowing_it(t1, container, http, policies):
    body = log_body(200)
    t1.put_object(container, "a.csv", body)
    policies.add(f"FOR CONTAINER t1/{container} DO SET CSV_SELECT WITH columns=\"user_id,status\"")
    local = parsed(body)
    plain = http(f"{container}/a.csv")
    assert parsed(plain.content) == [["user_id", "status"]] + [[r[1], r[3]] for r in local[1:]]
    narrowed = http(f"{container}/a.csv", select_headers(where="status = 500"))
    assert parsed(narrowed.content) == [["user_id", "status"]] + [
        [r[1], r[3]] for r in local[1:] if r[3] == "500"]
    widened = http(f"{container}/a.csv", select_headers(columns="url"))
    assert widened.status_code == 400 and "no column 'url'" in widened.text
    # HEAD describes what GET answers: a selection, of a size known once made.
    url, token = t1.get_auth()
    head = requests.head(f"{url}/{container}/a.csv", headers={"X-Auth-Token": token}, timeout=30)
    assert head.headers["X-Iostack-Selected"] == plain.headers["X-Iostack-Selected"]
    assert "Content-Length" not in head.headers and "Etag" not in head.headers
    # The owner reads the object as stored by skipping the policy's selection.
    original = http(f"{container}/a.csv", {"X-Iostack-Policy-Select": "off"})
    assert original.content == body and "X-Iostack-Selected" not in original.headers
    assert int(t1.head_object(container, "a.csv", headers={"X-Iostack-Policy-Select": "off"})
               ["content-length"]) == len(body)


def test_selection_reads_what_the_tenant_stored_under_compression(t1, container, http,
                                                                    policies):
    policies.add(f"FOR CONTAINER t1/{container} DO SET COMPRESSION")
    body = log_body(2000)
    t1.put_object(container, "a.csv", body)
    answer = http(f"{container}/a.csv", {"Range": "bytes=5000-", **select_headers(
        columns="user_id", where="url LIKE '/p/1%'")})
    assert answer.status_code == 200, answer.text
    start = body.index(b"\n", 4999) + 1
    expected = [[r[1]] for r in parsed(body[start:]) if r[2].startswith("/p/1")]
    assert parsed(answer.content) == expected
    # Only the proxy can decode what its own filters encoded.
    assert answer.headers["X-Iostack-Selected-On"] == "proxy"


def test_object_stage_compression_is_undone_below_the_object_servers_selection(
        t1, container, http, policies):
    policies.add(f"FOR CONTAINER t1/{container} DO SET COMPRESSION ON OBJECT")
    body = log_body(2000, seed=4)
    t1.put_object(container, "a.csv", body)
    answer = http(f"{container}/a.csv", select_headers(columns="user_id", where="status = 404"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Iostack-Selected-On"] == "object"
    assert parsed(answer.content) == [["user_id"]] + [
        [r[1]] for r in parsed(body)[1:] if r[3] == "404"]


def test_grep_by_request(t1, container, http):
    body = log_body(500)
    t1.put_object(container, "a.log", body)
    answer = http(f"{container}/a.log", {"X-Iostack-Filter": "grep",
                                         "X-Iostack-Param-Pattern": r",(404|500),"})
    assert answer.status_code == 200, answer.text
    expected = [line for line in body.splitlines(keepends=True)
                if b",404," in line or b",500," in line]
    assert answer.content == b"".join(expected)


def test_oversized_predicates_are_refused_in_milliseconds(t1, container, http):
    t1.put_object(container, "a.csv", log_body(10))
    # (Swift itself refuses header lines over 8 KiB: these are under that, over ours.)
    for headers in (select_headers(where="user_id = '" + "1" * 5000 + "a'"),
                    {"X-Iostack-Filter": "grep", "X-Iostack-Param-Pattern": "x",
                     **{f"X-Iostack-Param-P{i}": "1" for i in range(20)}}):
        began = time.monotonic()
        answer = http(f"{container}/a.csv", headers)
        assert answer.status_code == 400, answer.text
        assert "bytes" in answer.text or "at most" in answer.text, answer.text
        assert time.monotonic() - began < 1.0  # the old tokenizer took ~4 s of CPU


def test_anonymous_requests_are_not_parsed_or_selected(t1, container, aio):
    t1.put_object(container, "a.csv", log_body(10))
    url = f"{t1.get_auth()[0]}/{container}/a.csv"
    answer = requests.get(url, headers=select_headers(where="status >"), timeout=10)
    assert answer.status_code == 401  # refused by auth, not 400 from the predicate parser


def test_the_proxy_info_lists_what_iostack_select_offers(aio):
    # No token: /info is public, as clients probe it before they authenticate.
    resp = requests.get(f"{aio['swift_url']}/info", timeout=30)
    assert resp.status_code == 200
    offered = resp.json()["iostack_select"]
    assert {"csv_select", "json_select", "parquet_select", "grep"} <= set(offered["filters"])
    assert offered["output_formats"] == ["csv", "jsonl", "arrow"]
    assert offered["filter_header"] == "X-Iostack-Filter"
    assert offered["max_first_line"] > 0 and offered["max_params"] > 0
    assert offered["parquet_limits"]["max_footer"] > 0


@pytest.mark.parametrize("stage", ["proxy", "object"])
def test_selection_reads_the_object_named_and_the_version_asked(t1, container, http, stage):
    """Names with '%xx', '?', unicode and '/' and ``?version-id=`` reach that very object."""
    old, new = log_body(40, seed=1), log_body(40, seed=2)
    t1.post_container(container, {"X-Versions-Enabled": "true"})
    names = ["p%25c.csv", "q?x.csv", "dir/ü ñ.csv", "p%2Fx.csv"]
    for name in names:
        t1.put_object(container, name, old)
        t1.put_object(container, name, new)
    listing = t1.get_container(container, query_string="versions")[1]
    for name in names:
        path = f"{container}/{quote(name)}"
        answer = http(path, {"X-Iostack-Stage": stage, **select_headers(columns="url")})
        assert answer.status_code == 200, (name, answer.text)
        assert parsed(answer.content) == [[r[2]] for r in parsed(new)], name
        oldest = [o["version_id"] for o in listing if o["name"] == name][-1]
        answer = http(path, {"X-Iostack-Stage": stage, **select_headers(columns="url")},
                      **{"version-id": oldest})
        assert parsed(answer.content) == [[r[2]] for r in parsed(old)], name
