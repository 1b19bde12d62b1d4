"""The Spark data source without Spark: filter translation, request and partition planning,
CSV to Arrow conversion, split record selection (no JVM)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from iostack.filters.csv_where import parse_predicate
from iostack.filters.csv_where import row_mask as storage_row_mask
from iostack.spark.datasource import (
    ObjectSplit,
    Settings,
    convert_column,
    csv_batches,
    drop_first_line,
    plan_columns,
    plan_partitions,
    selection_headers,
    split_range,
)
from iostack.spark.filters import Term, quote_column, row_mask, translate, where_text

KINDS = {"user_id": "string", "url": "string", "status": "int", "bytes": "long",
         "latency": "double", "ratio": "float", "ok": "boolean", "user agent": "string",
         "select": "string"}


def where(*filters, kinds=KINDS, **kw) -> str:
    pushed, left = translate(list(filters), kinds, **kw)
    assert left == []
    return where_text(pushed)


# -- translation ---------------------------------------------------------------------

@pytest.mark.parametrize(("flt", "text"), [
    (EqualTo(("user_id",), "u1"), "user_id = 'u1'"),
    (GreaterThan(("status",), 499), "status > 499"),
    (GreaterThanOrEqual(("status",), 500), "status >= 500"),
    (LessThan(("bytes",), 10 ** 6), "bytes < 1000000"),
    (LessThanOrEqual(("latency",), 0.25), "latency <= 0.25"),
    (LessThan(("latency",), 2), "latency < 2"),
    (GreaterThan(("latency",), 1e-7), "latency > 1e-07"),
    (In(("status",), (404, 500)), "status IN (404, 500)"),
    (In(("user_id",), ("a", "b'c")), "user_id IN ('a', 'b''c')"),
    (IsNull(("url",)), "url IS NULL"),
    (IsNotNull(("status",)), "status IS NOT NULL"),
    (IsNotNull(("ratio",)), "ratio IS NOT NULL"),
    (IsNotNull(("ok",)), "ok IS NOT NULL"),
    (StringStartsWith(("url",), "/api"), "url LIKE '/api%'"),
    (StringStartsWith(("url",), "a_b"), "url LIKE 'a_b%'"),
    (StringStartsWith(("url",), "it's"), "url LIKE 'it''s%'"),
    (EqualTo(("user_id",), "0042"), "user_id = '0042'"),
    (EqualTo(("user_id",), ""), "user_id = ''"),
    (Not(EqualTo(("status",), 200)), "status != 200"),
    (Not(GreaterThan(("status",), 200)), "status <= 200"),
    (Not(GreaterThanOrEqual(("status",), 200)), "status < 200"),
    (Not(LessThan(("status",), 200)), "status >= 200"),
    (Not(LessThanOrEqual(("status",), 200)), "status > 200"),
    (Not(In(("user_id",), ("x",))), "user_id NOT IN ('x')"),
    (Not(IsNull(("status",))), "status IS NOT NULL"),
    (Not(IsNotNull(("url",))), "url IS NULL"),
    (Not(Not(EqualTo(("status",), 1))), "status = 1"),
    (EqualTo(("user agent",), "curl"), "\"user agent\" = 'curl'"),
    (EqualTo(("select",), "x"), "select = 'x'"),
])
def test_each_filter_kind_translates(flt, text):
    assert where(flt) == text


def test_where_text_parses_at_the_storage_side():
    pushed, _ = translate([EqualTo(("user_id",), "it's"), In(("status",), (1, 2)),
                           StringStartsWith(("url",), "/a b"), IsNull(("select",)),
                           Not(In(("latency",), (0.5, 1e300)))], KINDS)
    terms = parse_predicate(where_text(pushed)).terms
    assert [(t.column, t.op, t.values) for t in terms] == [
        ("user_id", "=", ("it's",)), ("status", "IN", (1.0, 2.0)), ("url", "LIKE", ("/a b",)),
        ("select", "IS NULL", ()), ("latency", "NOT IN", (0.5, 1e300))]


def test_column_quoting():
    assert quote_column("status") == "status"
    assert quote_column("_c3") == "_c3"
    assert quote_column("and") == '"and"'
    assert quote_column("Like") == '"Like"'
    assert quote_column('say "hi"') == '"say ""hi"""'
    assert quote_column("1st") == '"1st"'


@pytest.mark.parametrize("flt", [
    EqualNullSafe(("user_id",), "u1"),
    StringEndsWith(("url",), ".html"),
    StringContains(("url",), "api"),
    Not(StringStartsWith(("url",), "/a")),
    StringStartsWith(("url",), "50%"),
    StringStartsWith(("url",), "50%off"),
    StringStartsWith(("status",), "5"),
    EqualTo(("nested", "field"), 1),
    EqualTo(("missing",), 1),
    EqualTo(("status",), "500"),          # a string literal on an INT column
    EqualTo(("user_id",), 5),             # a number on a STRING column
    EqualTo(("status",), True),
    EqualTo(("status",), 1.5),
    EqualTo(("bytes",), 2 ** 53),         # beyond float64's exact integers
    EqualTo(("latency",), float("nan")),
    GreaterThan(("latency",), float("inf")),
    EqualTo(("ratio",), 0.1),             # float32 rounding
    LessThan(("ratio",), 1.0),
    EqualTo(("ok",), True),
    IsNull(("status",)),                  # NULL also means "did not parse" to Spark
    IsNull(("ratio",)),
    Not(IsNotNull(("status",))),
    In(("status",), ()),
    In(("status",), (1, None)),
    In(("user_id",), ("a", 1)),
    EqualTo(("user_id",), "caf\u00e9"),   # not printable ASCII: headers are Latin-1
    EqualTo(("user_id",), "a\nb"),
    EqualTo(("user_id",), None),
])
def test_unsupported_filters_are_left_to_spark(flt):
    pushed, left = translate([flt], KINDS)
    assert pushed == [] and left == [flt]
    assert left[0] is flt


def test_double_pushdown_can_be_turned_off():
    flt = GreaterThan(("latency",), 1.0)
    assert translate([flt], KINDS, push_double=False) == ([], [flt])
    assert translate([IsNotNull(("latency",))], KINDS, push_double=False)[1] == []


def test_mixed_filters_split_and_keep_identity():
    a, b, c = EqualTo(("status",), 500), StringContains(("url",), "x"), IsNull(("url",))
    pushed, left = translate([a, b, c], KINDS)
    assert where_text(pushed) == "status = 500 AND url IS NULL"
    assert left == [b] and left[0] is b


def test_column_names_fold_case_like_spark():
    pushed, left = translate([EqualTo(("STATUS",), 5)], KINDS)
    assert left == [] and pushed == [Term("status", "=", (5,))]


def test_where_text_maps_column_refs():
    assert where_text([Term("status", ">", (1,))], {"status": "_c3"}) == "_c3 > 1"


# -- local evaluation: the same rows as the storage side ------------------------------

ROWS = ["u1", "", "u'2", "/api", "/apix", "a_b", "10", "9", "-1", "1e3", "5.0", "x y"]


@pytest.mark.parametrize("flt", [
    EqualTo(("v",), "u'2"), GreaterThan(("v",), "9"), LessThanOrEqual(("v",), "a"),
    In(("v",), ("u1", "10", "zz")), Not(In(("v",), ("u1",))), IsNull(("v",)),
    IsNotNull(("v",)), StringStartsWith(("v",), "/api"), StringStartsWith(("v",), "a_"),
    Not(EqualTo(("v",), "9")),
])
def test_string_terms_select_what_the_storage_side_selects(flt):
    kinds = {"v": "string"}
    pushed, _ = translate([flt], kinds)
    fields = pa.array(ROWS)
    storage = storage_row_mask(parse_predicate(where_text(pushed)).terms, {"v": fields})
    local = row_mask(pushed, {"v": convert_column(fields, "string")}, kinds)
    as_bool = [bool(x) for x in storage.to_pylist()]
    assert [bool(x) for x in local.to_pylist()] == as_bool


@pytest.mark.parametrize("flt", [
    GreaterThan(("v",), 5), EqualTo(("v",), 5), Not(EqualTo(("v",), 5)),
    In(("v",), (5, 10)), Not(In(("v",), (9,))), LessThan(("v",), 0), IsNotNull(("v",)),
])
def test_int_terms_keep_a_superset_at_the_storage_side(flt):
    """What the storage side keeps (raw fields) includes what Spark keeps (parsed INTs);
    the data source re-checks such terms, giving exactly Spark's rows."""
    kinds = {"v": "int"}
    pushed, _ = translate([flt], kinds)
    fields = pa.array(ROWS + ["5", "+5", "005", "99999999999", " 5", "5 "])
    storage = [bool(x) for x in storage_row_mask(parse_predicate(where_text(pushed)).terms,
                                                 {"v": fields}).to_pylist()]
    local = [bool(x) for x in row_mask(pushed, {"v": convert_column(fields, "int")},
                                       kinds).to_pylist()]
    assert all(s for s, spark in zip(storage, local, strict=True) if spark)


# -- request planning ----------------------------------------------------------------

def schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(n, t, True) for n, t in fields])


def test_selection_headers_for_a_header_object():
    columns = plan_columns(schema(("user_id", StringType()), ("status", IntegerType())),
                           True, None)
    headers = selection_headers(columns, [Term("status", ">=", (500,))], True)
    assert headers == {"X-Iostack-Filter": "csv_select",
                       "X-Iostack-Param-Columns": "user_id,status",
                       "X-Iostack-Param-Header": "true",
                       "X-Iostack-Param-Output": "arrow",
                       "X-Iostack-Param-Where": "status >= 500"}
    assert "X-Iostack-Param-Where" not in selection_headers(columns, [], True)


def test_names_that_cannot_be_listed_go_by_index():
    columns = plan_columns(schema(("a,b", StringType()), (" c", StringType()),
                                  ("d", StringType())), True, ["d", "a,b", " c"])
    assert [c.ref for c in columns] == ["1", "2", "d"]
    headers = selection_headers(columns, [Term("a,b", "=", ("x",))], True)
    assert headers["X-Iostack-Param-Where"] == "\"a,b\" = 'x'"
    with pytest.raises(ValueError, match="not in the header"):
        plan_columns(schema(("x,y", StringType())), True, ["d"])


def test_objects_without_a_header_by_cn_name_or_position():
    by_name = plan_columns(schema(("_c2", StringType()), ("_c0", IntegerType())), False, None)
    assert [(c.ref, c.where_name) for c in by_name] == [("2", "_c2"), ("0", "_c0")]
    by_position = plan_columns(schema(("user", StringType()), ("status", IntegerType())),
                               False, None)
    assert [(c.ref, c.where_name) for c in by_position] == [("0", "_c0"), ("1", "_c1")]
    headers = selection_headers(by_position, [Term("status", "<", (3,))], False)
    assert headers["X-Iostack-Param-Where"] == "_c1 < 3"
    assert headers["X-Iostack-Param-Header"] == "false"


def test_partitions_per_object_or_byte_range():
    splits = plan_partitions([("a", 10), ("empty", 0), ("b", 25), ("c", 20), ("d", 21)], 10)
    assert [(s.name, s.start, s.end) for s in splits] == [
        ("a", 0, None),
        ("b", 0, 9), ("b", 10, 19), ("b", 20, None),
        ("c", 0, 9), ("c", 10, None),
        ("d", 0, 9), ("d", 10, 19), ("d", 20, None)]
    assert [split_range(s) for s in splits[:4]] == [
        None, "bytes=0-9", "bytes=10-19", "bytes=20-"]


def test_settings_checks():
    with pytest.raises(ValueError, match="container"):
        Settings.from_options({"storage_url": "http://x", "token": "t"})
    with pytest.raises(ValueError, match="auth_url"):
        Settings.from_options({"container": "c"})
    with pytest.raises(ValueError, match="true or false"):
        Settings.from_options({"container": "c", "storage_url": "http://x", "token": "t",
                               "pushdown": "maybe"})
    with pytest.raises(ValueError, match="stage must be proxy or object"):
        Settings.from_options({"container": "c", "storage_url": "http://x", "token": "t",
                               "stage": "client"})
    s = Settings.from_options({"container": "c", "storage_url": "http://x", "token": "t",
                               "pushdown": "False", "split_size": "100"})
    assert (s.pushdown, s.split_size, s.header, s.prefix, s.stage) == (
        False, 100, True, "", None)


# -- split record selection on raw bytes ---------------------------------------------

def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_drop_first_line():
    assert b"".join(drop_first_line(iter([b"he", b"ad\nr1\n", b"r2\n"]))) == b"r1\nr2\n"
    assert b"".join(drop_first_line(iter([b"head\n"]))) == b""
    assert b"".join(drop_first_line(iter([b"head"]))) == b""


# -- CSV to Arrow ----------------------------------------------------------------------

def test_csv_batches_parse_quotes_and_skip_ragged_rows():
    body = b'1,"a,b",x\n2,"say ""hi""",\n3,too,many,fields\n4,"",z\n\n5,e,f'
    batches = list(csv_batches(iter(chunked(body, 4)), 3))
    table = pa.Table.from_batches(batches)
    assert table.column("c0").to_pylist() == ["1", "2", "4", "5"]
    assert table.column("c1").to_pylist() == ["a,b", 'say "hi"', "", "e"]
    assert table.column("c2").to_pylist() == ["x", "", "z", "f"]
    assert list(csv_batches(iter([b""]), 2)) == []
    assert list(csv_batches(iter([b"\n", b""]), 2)) == []


@pytest.mark.parametrize(("kind", "expected"), [
    ("string", [None, "5", "+5", "-7", "1e3", "5.0", " 5", "99999999999", "abc", "true"]),
    ("int", [None, 5, 5, -7, None, None, None, None, None, None]),
    ("long", [None, 5, 5, -7, None, None, None, 99999999999, None, None]),
    ("short", [None, 5, 5, -7, None, None, None, None, None, None]),
    ("double", [None, 5.0, 5.0, -7.0, 1000.0, 5.0, 5.0, 99999999999.0, None, None]),
    ("boolean", [None, None, None, None, None, None, None, None, None, True]),
])
def test_conversion_like_sparks_permissive_csv_reader(kind, expected):
    fields = pa.array(["", "5", "+5", "-7", "1e3", "5.0", " 5", "99999999999", "abc", "true"])
    assert convert_column(fields, kind).to_pylist() == expected


def test_conversion_limits_and_java_float_spellings():
    ints = pa.array(["2147483647", "2147483648", "-2147483648", "0002147483647",
                     "9223372036854775807", "9223372036854775808", "-9223372036854775808"])
    assert convert_column(ints, "int").to_pylist() == [
        2147483647, None, -2147483648, 2147483647, None, None, None]
    assert convert_column(ints, "long").to_pylist()[4:] == [
        9223372036854775807, None, -9223372036854775808]
    floats = convert_column(pa.array(["Inf", "-Inf", "Infinity", "1.5d", "2f", "inf", "1,5",
                                      "TRUE"]), "double").to_pylist()
    assert floats == [float("inf"), float("-inf"), float("inf"), 1.5, 2.0, None, None, None]
    assert convert_column(pa.array(["0.1"]), "float").type == pa.float32()
    assert convert_column(pa.array(["TRUE", "False", "yes"]), "boolean").to_pylist() == [
        True, False, None]


def test_object_split_is_an_input_partition():
    import pickle

    split = ObjectSplit("a/b.csv", 10, 19)
    assert pickle.loads(pickle.dumps(split)) == split  # noqa: S301 - its own bytes


# -- the reader against a fake Swift (stdlib HTTP server, no Spark) -------------------

FAKE_SWIFT = r"""
import base64, http.server, json, sys
from urllib.parse import parse_qs, unquote, urlsplit

OBJECTS = {k: base64.b64decode(v) for k, v in json.loads(sys.stdin.readline()).items()}
REQUESTS = []
SELECTION = [200, b""]


class Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_PUT(self):  # the test sets the next selections' answer
        status = int(self.headers["X-Status"])
        SELECTION[:] = [status, self.rfile.read(int(self.headers["Content-Length"]))]
        self.answer(204, b"")

    def do_GET(self):
        url = urlsplit(self.path)
        if url.path == "/_requests":
            return self.answer(200, json.dumps(REQUESTS).encode())
        REQUESTS.append([self.path, dict(self.headers)])
        if url.path == "/auth/v1.0":
            ok = self.headers["X-Auth-User"] == "t:u" and self.headers["X-Auth-Key"] == "k"
            port = self.server.server_address[1]
            return self.answer(200 if ok else 401, b"", {
                "X-Storage-Url": f"http://127.0.0.1:{port}/v1/AUTH_t",
                "X-Auth-Token": "tok"} if ok else {})
        if self.headers.get("X-Auth-Token") != "tok":
            return self.answer(401, b"Unauthorized")
        parts = unquote(url.path).split("/", 4)
        if len(parts) == 4:  # a listing, in pages of 2
            query = parse_qs(url.query, keep_blank_values=True)
            marker, prefix = query["marker"][0], query["prefix"][0]
            names = sorted(n for n in OBJECTS if n > marker and n.startswith(prefix))
            page = [{"name": n, "bytes": len(OBJECTS[n])} for n in names[:2]]
            return self.answer(200, json.dumps(page).encode())
        body = OBJECTS[parts[4]]
        if self.headers.get("X-Iostack-Filter"):
            return self.answer(*SELECTION)
        rng = self.headers.get("Range")
        if rng:
            first, _, last = rng.split("=")[1].partition("-")
            return self.answer(206, body[int(first):int(last) + 1 if last else len(body)])
        return self.answer(200, body)


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


class FakeSwift:
    """Tempauth v1, paged JSON listings, raw GETs with ranges, and canned selections: a
    stdlib HTTP server in a child process (the suite's conftest imports Swift, whose
    eventlet would starve a server thread in this process)."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        import base64
        import subprocess
        import sys

        self.process = subprocess.Popen([sys.executable, "-c", FAKE_SWIFT],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(
            {k: base64.b64encode(v).decode() for k, v in objects.items()}).encode() + b"\n")
        self.process.stdin.flush()
        self.port = int(self.process.stdout.readline())
        self.auth_url = f"http://127.0.0.1:{self.port}/auth/v1.0"

    def set_selection(self, status: int, body: bytes) -> None:
        import urllib.request

        urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{self.port}/_control", data=body, method="PUT",
            headers={"X-Status": str(status)}), timeout=10).read()

    @property
    def requests(self) -> list[tuple[str, dict[str, str]]]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/_requests",
                                    timeout=10) as resp:
            return [tuple(r) for r in json.loads(resp.read())]

    def close(self) -> None:
        self.process.kill()
        self.process.wait()



LOG = (b'id,name,status\n1,"a,b",200\n2,,404\n3,"x ""y""",abc\n4,z,500\n5,q,1e3\n'
       b"6,r,+503\n")


@pytest.fixture
def fake_swift():
    fake = FakeSwift({"logs/a.csv": LOG, "logs/b.csv": LOG.replace(b"\n1,", b"\n7,"),
                      "logs/empty.csv": b"", "logs/hdr.csv": b"id,name,status\n",
                      "other.csv": b"x\n1\n"})
    yield fake
    fake.close()


def ddl(text: str) -> StructType:
    """``"a INT, b STRING"`` without a Spark session (fromDDL needs one)."""
    types = {"INT": IntegerType(), "STRING": StringType()}
    return schema(*((name, types[kind]) for name, kind in
                    (field.split() for field in text.split(","))))


def make_reader(fake, schema_ddl="id INT, name STRING, status INT", **options):
    from iostack.spark.datasource import IOStackDataSource

    opts = {"auth_url": fake.auth_url, "user": "t:u", "key": "k", "container": "c",
            "prefix": "logs/", **{k: str(v) for k, v in options.items()}}
    source = IOStackDataSource(opts)
    schema = ddl(schema_ddl) if schema_ddl else source.schema()
    return source.reader(schema)


def read_all(reader) -> list[tuple]:
    out = []
    for split in reader.partitions():
        for batch in reader.read(split):
            out += list(zip(*(c.to_pylist() for c in batch.columns), strict=True))
    return sorted(out, key=repr)


def test_raw_reads_list_every_page_and_split_anywhere(fake_swift):
    reader = make_reader(fake_swift, pushdown="false")
    whole = read_all(reader)
    rows_a = [(1, "a,b", 200), (2, None, 404), (3, 'x "y"', None), (4, "z", 500),
              (5, "q", None), (6, "r", 503)]
    assert whole == sorted(rows_a + [(7, "a,b", 200)] + rows_a[1:], key=repr)
    for split_size in (1, 5, 16, 40):
        assert read_all(make_reader(fake_swift, pushdown="false",
                                    split_size=split_size)) == whole
    assert {s.name for s in reader.partitions()} == {"logs/a.csv", "logs/b.csv",
                                                     "logs/hdr.csv"}


def test_raw_reads_apply_pushed_filters_with_sparks_semantics(fake_swift):
    reader = make_reader(fake_swift, pushdown="false", split_size=9)
    left = list(reader.pushFilters([GreaterThanOrEqual(("status",), 404),
                                    StringContains(("name",), "z")]))
    assert [type(f) for f in left] == [StringContains]
    assert read_all(reader) == [(2, None, 404), (2, None, 404), (4, "z", 500), (4, "z", 500),
                                (6, "r", 503), (6, "r", 503)]


def test_schema_without_one_given_is_the_first_header(fake_swift):
    reader = make_reader(fake_swift, schema_ddl=None, pushdown="false")
    assert [f.name for f in reader.schema.fields] == ["id", "name", "status"]
    assert ("3", 'x "y"', "abc") in read_all(reader)


def arrow_answer(names: list[str], rows: list[tuple[str, ...]]) -> bytes:
    """csv_select's Arrow answer: string columns named as in the header."""
    table = pa.table({n: pa.array([r[i] for r in rows], pa.string())
                      for i, n in enumerate(names)})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def test_pushdown_requests_and_the_recheck_of_numeric_terms(fake_swift):
    reader = make_reader(fake_swift, "status INT, name STRING", split_size=30)
    list(reader.pushFilters([GreaterThanOrEqual(("status",), 500),
                             StringStartsWith(("name",), "it's")]))
    # The storage side's answer: what it keeps includes "1e3", which Spark reads as NULL.
    fake_swift.set_selection(200, arrow_answer(["status", "name"], [("500", "z"), ("1e3", "q")]))
    splits = reader.partitions()
    assert [(s.name, s.start, s.end) for s in splits][:3] == [
        ("logs/a.csv", 0, 29), ("logs/a.csv", 30, 59), ("logs/a.csv", 60, None)]
    first = [b for b in reader.read(splits[0])]
    assert [b.to_pylist() for b in first] == [[{"status": 500, "name": "z"}]]
    path, headers = fake_swift.requests[-1]
    assert path == "/v1/AUTH_t/c/logs/a.csv"
    assert headers["X-Iostack-Filter"] == "csv_select"
    assert headers["X-Iostack-Param-Columns"] == "status,name"
    assert headers["X-Iostack-Param-Where"] == "status >= 500 AND name LIKE 'it''s%'"
    assert headers["Range"] == "bytes=0-29"
    assert headers["X-Iostack-Param-Output"] == "arrow"  # no CSV to parse in the worker
    fake_swift.set_selection(200, arrow_answer(["status", "name"], [("503", "r")]))
    assert [b.to_pylist() for b in reader.read(splits[1])] == [[{"status": 503, "name": "r"}]]
    assert fake_swift.requests[-1][1]["Range"] == "bytes=30-59"


def test_a_csv_answer_is_parsed_when_asked_for(fake_swift):
    reader = make_reader(fake_swift, "status INT, name STRING", answer="csv")
    list(reader.pushFilters([GreaterThanOrEqual(("status",), 500)]))
    fake_swift.set_selection(200, b"status,name\n500,z\n1e3,q\n")
    split = reader.partitions()[0]
    assert [b.to_pylist() for b in reader.read(split)] == [[{"status": 500, "name": "z"}]]
    assert fake_swift.requests[-1][1]["X-Iostack-Param-Output"] == "csv"
    with pytest.raises(ValueError, match="answer must be arrow"):
        make_reader(fake_swift, "status INT", answer="csv", format="parquet")


def test_an_http_error_names_status_object_and_message(fake_swift):
    from iostack.spark.datasource import IOStackError

    reader = make_reader(fake_swift, "nosuch STRING")
    fake_swift.set_selection(400, b"csv_select: columns: no column 'nosuch' (columns: id)")
    with pytest.raises(IOStackError) as info:
        list(reader.read(reader.partitions()[0]))
    message = str(info.value)
    assert "400" in message and "c/logs/a.csv" in message and "no column 'nosuch'" in message
    assert info.value.status == 400
    with pytest.raises(IOStackError, match="401"):
        make_reader(fake_swift, key="wrong")
