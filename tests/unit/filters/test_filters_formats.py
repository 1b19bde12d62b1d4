"""Answer formats (CSV, JSON Lines, Arrow) and json_select, against plain-Python readings."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.base import FilterContext
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.library import get_filter
from iostack.filters.output import writer
from iostack.swift_middleware.select.engine import Answer, SelectError, Selecting, check_chain

CONTEXT = FilterContext(account="AUTH_t1", container="logs", obj="a.jsonl")


def arrow_table(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def jsonl(data: bytes) -> list[dict]:
    # Not splitlines(): JSON strings may hold U+0085 or U+2028 raw.
    return [json.loads(line) for line in data.decode().split("\n") if line]


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), TEXT),
                          st.one_of(st.none(), st.integers(-2**60, 2**60)),
                          st.one_of(st.none(), st.floats()), st.one_of(st.none(), st.booleans())),
                max_size=20))
def test_json_lines_output_is_valid_json_with_the_values(rows):
    table = pa.table({"s": pa.array([r[0] for r in rows], pa.string()),
                      "i": pa.array([r[1] for r in rows], pa.int64()),
                      "f": pa.array([r[2] for r in rows], pa.float64()),
                      "b": pa.array([r[3] for r in rows], pa.bool_())})
    out = writer("jsonl")
    assert out.begin(table.schema, True) == b""
    got = jsonl(out.write(table))
    want = [{"s": s, "i": i, "f": None if f is None or not math.isfinite(f) else f, "b": b}
            for s, i, f, b in rows]
    assert got == want


def test_arrow_output_is_one_stream_with_its_schema_first_and_an_end_marker():
    out = writer("arrow")
    schema = pa.schema([("a", pa.string()), ("b", pa.int64())])
    head = out.begin(schema, at_start=False)  # a split's answer has its schema too
    body = out.write(pa.table({"a": ["x", "y"], "b": [1, 2]}, schema=schema))
    body += out.write(pa.table({"a": ["z"], "b": [3]}, schema=schema))
    tail = out.end()
    table = arrow_table(head + body + tail)
    assert table.schema == schema and table.to_pydict() == {"a": ["x", "y", "z"], "b": [1, 2, 3]}
    assert tail.endswith(b"\xff\xff\xff\xff\x00\x00\x00\x00")  # a complete stream
    with pytest.raises((pa.ArrowInvalid, OSError)):  # a cut stream is detectable
        arrow_table(head + body[:-5])


def test_csv_header_only_at_the_start_and_quotes_only_when_needed():
    out = writer("csv")
    schema = pa.schema([("a b", pa.string()), ("n", pa.int64())])
    assert out.begin(schema, at_start=True) == b"a b,n\n"
    assert writer("csv").begin(schema, at_start=False) == b""
    assert out.write(pa.table({"a b": ["x", "y,z"], "n": [1, 2]}, schema=schema)) == \
        b'"x",1\n"y,z",2\n'


def json_select(body: bytes, at_start: bool = True, **params) -> bytes:
    selection = get_filter("json_select").selection(params, CONTEXT)
    first = body.split(b"\n", 1)[0] + b"\n" if body else None
    return selection.begin(first, at_start) + (selection.select(body) if body else b"") \
        + selection.end()


LOG = b"".join(json.dumps(r).encode() + b"\n" for r in [
    {"user": "u1", "status": 200, "url": "/api/a", "ms": 1.5},
    {"user": "u2", "status": 500, "url": "/api/b", "ms": None},
    {"user": "u3", "status": 404, "url": "/static"},
    {"user": "u'4", "status": 503, "url": "/api/c", "ms": 7.25, "extra": [1, 2]},
])


def test_json_select_projects_and_filters_on_typed_top_level_fields():
    answer = json_select(LOG, columns="user,ms", where="status >= 500 AND url LIKE '/api%'",
                         output="jsonl")
    assert jsonl(answer) == [{"user": "u2", "ms": None}, {"user": "u'4", "ms": 7.25}]
    assert json_select(LOG, columns="user", where="ms IS NULL") == b"user\nu2\nu3\n"
    assert json_select(LOG, columns="user", where="user IN ('u1', 'u''4')") == b"user\nu1\nu'4\n"


def test_json_select_arrow_keeps_the_first_records_types():
    table = arrow_table(json_select(LOG, where="status != 404", output="arrow"))
    assert table.schema.names == ["user", "status", "url", "ms"]  # the first record's fields
    assert table.schema.field("status").type == pa.int64()
    assert table.column("user").to_pylist() == ["u1", "u2", "u'4"]


def test_json_fields_null_in_the_first_record_take_the_first_blocks_type():
    body = b'{"a": null}\n{"a": 1.5}\n{"b": 1}\n'
    table = arrow_table(json_select(body, columns="a,b", output="arrow"))
    assert table.schema == pa.schema([("a", pa.float64()), ("b", pa.int64())])
    assert table.to_pydict() == {"a": [None, 1.5, None], "b": [None, None, 1]}
    empty = arrow_table(json_select(b"", columns="a", output="arrow"))
    assert empty.schema == pa.schema([("a", pa.string())]) and empty.num_rows == 0


def test_json_select_refuses_what_it_cannot_do():
    with pytest.raises(ParamError, match="where"):
        get_filter("json_select").selection({"where": "status >>= 1"}, CONTEXT)
    nested = b'{"a": {"b": 1}}\n'
    with pytest.raises(ParamError, match="cannot be compared"):
        json_select(nested, where="a = 'x'")
    with pytest.raises(FilterError, match="not JSON Lines"):
        json_select(b'{"a": 1}\nnot json\n', columns="a")
    selection = get_filter("json_select").selection({"columns": "a"}, CONTEXT)
    selection.begin(b'{"a": 1}\n', True)
    assert selection.select(b'{"a": 1}\n{"a": 2.0}\n') == b"1\n2\n"  # converts: fine
    with pytest.raises(FilterError, match="earlier records had int64"):
        selection.select(b'{"a": "text"}\n')  # a later block of another type


def fetcher(body: bytes):
    def fetch(byte_range: str | None):
        from swift.common.swob import Response
        start = int(byte_range.split("=")[1].split("-")[0]) if byte_range else 0
        stop = byte_range.split("-")[1] if byte_range else ""
        end = int(stop) + 1 if stop else len(body)
        return Response(status=206 if byte_range else 200, app_iter=[body[start:end]])
    return fetch


def test_json_splits_each_answer_with_the_schema_and_every_record_once():
    body = LOG * 50
    whole = []
    for start in range(0, len(body), 777):
        end = min(start + 776, len(body) - 1)
        selection = get_filter("json_select").selection(
            {"columns": "user,status", "output": "arrow"}, CONTEXT)
        answer = Selecting(fetcher(body), "/a.jsonl", [selection], ["json_select"],
                           1 << 20).run(start, end)
        assert isinstance(answer, Answer)
        part = arrow_table(b"".join(answer.chunks))
        assert part.schema.names == ["user", "status"]
        whole += part.to_pylist()
    assert whole == [{"user": r["user"], "status": r["status"]} for r in jsonl(body)]


def test_a_chain_cannot_hand_arrow_or_parquet_to_another_filter():
    arrow = get_filter("csv_select").selection({"output": "arrow"}, CONTEXT)
    text = get_filter("csv_select").selection({}, CONTEXT)
    parquet = get_filter("parquet_select").selection({}, CONTEXT)
    check_chain([text, arrow], ["csv_select", "csv_select"])
    with pytest.raises(SelectError, match="only the last") as info:
        check_chain([arrow, text], ["csv_select", "csv_select"])
    assert info.value.status == 400
    with pytest.raises(SelectError, match="cannot be chained"):
        check_chain([text, parquet], ["csv_select", "parquet_select"])


@pytest.mark.parametrize("where", ["first", "later"])
def test_a_deep_json_record_is_422_naming_the_limit_and_pyarrow_never_sees_it(where):
    # 10,000 levels made pyarrow's reader kill the process (SIGSEGV).
    deep = b'{"user":' * 10_000 + b"1" + b"}" * 10_000 + b"\n"
    body = deep + LOG if where == "first" else LOG * 2 + deep
    selection = get_filter("json_select").selection({"columns": "user"}, CONTEXT)
    with pytest.raises(SelectError) as caught:
        Selecting(fetcher(body), "/a.jsonl", [selection], ["json_select"], 1 << 20).run(0, None)
    assert caught.value.status == 422
    assert "10000 levels deep, over the JSON depth limit (64)" in str(caught.value)
