"""parquet_select through its engine, over an in-memory object read by ranges.

Checks the answers against pyarrow reading the whole file, the bytes the
engine reads (projection and row-group pruning), splits, the limits, and
fuzzes the parser with truncated, bit-flipped and oversized-metadata files:
each must end in a 422 naming the object or a clean answer, never another
exception.
"""

from __future__ import annotations

import base64
import io
import random
import signal
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from swift.common.swob import Response

from iostack.filters.base import FilterContext
from iostack.filters.builtin.parquet_select import ParquetLimits
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.library import get_filter
from iostack.swift_middleware.select.engine import Answer, SelectError
from iostack.swift_middleware.select.parquet import ParquetSelecting

CONTEXT = FilterContext(account="AUTH_t1", container="data", obj="t.parquet")
PATH = "/v1/AUTH_t1/data/t.parquet"
ROWS = 50_000
DEFAULT_LIMITS = ParquetLimits()


def parquet_bytes(table: pa.Table, **kwargs) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **kwargs)
    return out.getvalue()


def ten_columns(rows: int = ROWS) -> pa.Table:
    rng = random.Random(5)
    columns = {f"n{i}": pa.array([rng.randrange(1 << 40) for _ in range(rows)])
               for i in range(8)}
    columns["id"] = pa.array(range(rows))
    columns["user"] = pa.array([f"u{rng.randrange(500):04d}" if i % 7 else None
                                for i in range(rows)])
    return pa.table(columns)


class RangedObject:
    """An object answered as Swift answers ranges; counts the bytes it sends."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent = 0
        self.requests: list[str] = []

    def __call__(self, byte_range: str | None) -> Response:
        self.requests.append(byte_range or "")
        size = len(self.body)
        first, _, last = (byte_range or "bytes=0-").split("=")[1].partition("-")
        if not first:
            start, end = max(size - int(last), 0), size - 1
        else:
            start, end = int(first), min(int(last) if last else size - 1, size - 1)
        if size == 0 or start >= size:
            return Response(status=416)
        data = self.body[start:end + 1]
        self.sent += len(data)
        return Response(status=206, app_iter=[data],
                        headers={"Content-Range": f"bytes {start}-{end}/{size}"})


def run(body: bytes, start: int = 0, end: int | None = None,
        limits: ParquetLimits = DEFAULT_LIMITS, **params) -> tuple[bytes, RangedObject]:
    obj = RangedObject(body)
    selection = get_filter("parquet_select").selection({"output": "arrow", **params}, CONTEXT)
    answer = ParquetSelecting(obj, PATH, selection, ["parquet_select"], limits).run(start, end)
    assert isinstance(answer, Answer)
    return b"".join(answer.chunks), obj


def table_of(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


def test_projection_of_one_of_ten_columns_reads_under_15_percent_of_the_object():
    body = parquet_bytes(ten_columns(), row_group_size=10_000)
    data, obj = run(body, columns="user")
    assert table_of(data).column("user").to_pylist() == ten_columns().column("user").to_pylist()
    assert obj.sent <= 0.15 * len(body), (obj.sent, len(body))


def test_row_groups_the_statistics_rule_out_are_not_read():
    table = ten_columns()
    body = parquet_bytes(table, row_group_size=5_000)
    data, obj = run(body, columns="id,n3", where="id >= 12000 AND id < 12010")
    assert table_of(data).to_pydict() == table.filter(
        pc.and_(pc.greater_equal(table["id"], 12000), pc.less(table["id"], 12010))
    ).select(["id", "n3"]).to_pydict()
    whole, _ = run(body, columns="id,n3")
    assert obj.sent < len(whole) / 5  # one row group of ten, two columns of ten


OPS = st.sampled_from(["=", "!=", "<", "<=", ">", ">="])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.one_of(st.none(), st.integers(-50, 50)), min_size=1, max_size=300),
       OPS, st.integers(-60, 60), st.sampled_from(["IS NULL", "IS NOT NULL", None]))
def test_pruning_never_changes_the_answer(values, op, literal, null_term):
    table = pa.table({"x": pa.array(values, pa.int64()),
                      "s": pa.array([None if v is None else f"k{v:+03d}" for v in values])})
    body = parquet_bytes(table, row_group_size=17)
    where = f"x {op} {literal}" + (f" AND s {null_term}" if null_term else "")
    got = table_of(run(body, where=where)[0])
    keep = [v is not None and compare(v, op, literal) and null_term != "IS NULL"
            for v in values]
    assert got.column("x").to_pylist() == [v for v, k in zip(values, keep, strict=True) if k]


def compare(a: int, op: str, b: int) -> bool:
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def test_string_prefix_and_in_pruning_keep_every_match():
    users = [f"user{i:05d}" for i in range(20_000)]
    body = parquet_bytes(pa.table({"user": users, "i": range(20_000)}), row_group_size=1000)
    got = table_of(run(body, columns="i", where="user LIKE 'user1234%'")[0])
    assert got.column("i").to_pylist() == list(range(12340, 12350))
    got = table_of(run(body, columns="user", where="user IN ('user00003', 'user19999')")[0])
    assert got.column("user").to_pylist() == ["user00003", "user19999"]


def test_nan_rows_survive_not_equal_pruning():
    # Float statistics leave NaN out: a group of 5 and NaN has min = max = 5.
    body = parquet_bytes(pa.table({"x": [5.0, float("nan"), 5.0, 5.0]}), row_group_size=2)
    got = table_of(run(body, where="x != 5")[0]).column("x").to_pylist()
    assert len(got) == 1 and got[0] != got[0]
    got = table_of(run(body, where="x NOT IN (5)")[0]).column("x").to_pylist()
    assert len(got) == 1


def test_the_memory_limit_counts_the_fetched_chunks_too():
    body = parquet_bytes(pa.table({"r": [bytes(random.Random(1).randbytes(1000))
                                         for _ in range(200)]}), compression="none")
    group = pq.ParquetFile(io.BytesIO(body)).metadata.row_group(0).column(0)
    below_both = group.total_compressed_size + group.total_uncompressed_size
    run(body, limits=ParquetLimits(max_memory=below_both + 200 * 9 + 1))
    with pytest.raises(SelectError, match="parquet_max_memory"):
        run(body, limits=ParquetLimits(max_memory=below_both))


def test_byte_range_splits_read_each_row_group_once():
    table = ten_columns(20_000)
    body = parquet_bytes(table, row_group_size=1500)
    ids = []
    for start in range(0, len(body), 100_000):
        data, _ = run(body, start, min(start + 99_999, len(body) - 1), columns="id")
        ids += table_of(data).column("id").to_pylist()
    assert ids == list(range(20_000))


def test_csv_output_has_its_header_only_at_the_object_start():
    body = parquet_bytes(pa.table({"a": [1, 2], "b": ["x", "y"]}))
    data, _ = run(body, output="csv")
    assert data == b'a,b\n1,"x"\n2,"y"\n' or data == b"a,b\n1,x\n2,y\n"
    split, _ = run(body, 1, None, output="csv")
    assert split == data[len(b"a,b\n"):]  # its row group starts at byte 4: no header
    later, _ = run(body, 5, None, output="csv")
    assert later == b""  # no row group starts in [5, end]


def test_unknown_columns_are_the_requests_fault():
    body = parquet_bytes(pa.table({"a": [1]}))
    with pytest.raises(ParamError, match="no column 'b'"):
        run(body, columns="b")
    with pytest.raises(ParamError, match="no column 'zz'"):
        run(body, where="zz = 1")


@pytest.mark.parametrize("limits, message", [
    (ParquetLimits(max_footer=100), "parquet_max_footer"),
    (ParquetLimits(max_row_groups=3), "parquet_max_row_groups"),
    (ParquetLimits(max_columns=5), "parquet_max_columns"),
    (ParquetLimits(max_memory=100_000), "parquet_max_memory"),
    (ParquetLimits(time_limit=0), "parquet_time_limit"),
])
def test_each_limit_answers_422_naming_the_object_and_the_limit(limits, message):
    body = parquet_bytes(ten_columns(20_000), row_group_size=5000)
    with pytest.raises(SelectError, match=message) as info:
        run(body, limits=limits)
    assert info.value.status == 422 and PATH in str(info.value)


def fuzz_case(body: bytes, **params) -> None:
    """A hostile file either selects cleanly or fails with a 422 naming the object."""
    try:
        data, _ = run(body, **params)
    except SelectError as exc:
        assert exc.status == 422 and PATH in str(exc)
        return
    except ParamError as exc:  # a flip renamed the column the predicate names: 400
        assert "no column" in str(exc)
        return
    except FilterError as exc:  # a row group after the first, mid-answer
        assert "row group" in str(exc)
        return
    pa.ipc.open_stream(data).read_all()


SMALL = parquet_bytes(pa.table({"a": list(range(300)), "s": [f"v{i}" for i in range(300)],
                                "f": [i / 3 for i in range(300)]}), row_group_size=64)


def test_truncated_files_fail_cleanly():
    for cut in list(range(0, 64)) + list(range(64, len(SMALL), 97)):
        fuzz_case(SMALL[:cut])
        fuzz_case(SMALL[cut:])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, len(SMALL) - 1), st.integers(0, 7)),
                min_size=1, max_size=8))
def test_bit_flipped_files_fail_cleanly(flips):
    body = bytearray(SMALL)
    for offset, bit in flips:
        body[offset] ^= 1 << bit
    fuzz_case(bytes(body), where="a > 100")  # planning reads the statistics too


# One bit of SMALL's footer (a column chunk's type): pyarrow aborts the process that
# reads that chunk's statistics ("ColumnMetaData type does not match ColumnDescriptor").
ABORTING_FLIP = (6100, 4)
_READ_STATISTICS = """
import sys, pyarrow as pa, pyarrow.parquet as pq
body = sys.stdin.buffer.read()
footer = body[-(int.from_bytes(body[-8:-4], "little") + 8):]
metadata = pq.read_metadata(pa.BufferReader(footer))
for g in range(metadata.num_row_groups):
    group = metadata.row_group(g)
    [group.column(i).statistics.min for i in range(group.num_columns)]
"""


def test_a_footer_that_aborts_pyarrow_is_a_422_and_this_process_lives_on():
    body = bytearray(SMALL)
    body[ABORTING_FLIP[0]] ^= 1 << ABORTING_FLIP[1]
    probe = subprocess.run([sys.executable, "-c", _READ_STATISTICS], input=bytes(body),
                           capture_output=True, check=False)
    assert probe.returncode == -signal.SIGABRT, probe.stderr  # the hazard is real
    with pytest.raises(SelectError) as info:  # planned in the child, which died
        run(bytes(body), where="a > 100")
    assert info.value.status == 422 and "crashed (SIGABRT)" in str(info.value)
    data, _ = run(SMALL, where="a > 100")  # and the next answer is served
    assert table_of(data)["a"].to_pylist() == list(range(101, 300))


def test_the_worker_never_parses_tenant_parquet_metadata_when_children_decode(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("tenant Parquet metadata parsed in the worker process")

    monkeypatch.setattr(pq, "read_metadata", refuse)
    monkeypatch.setattr(pq, "ParquetFile", refuse)
    data, _ = run(SMALL, columns="s", where="a < 3")
    assert table_of(data).to_pydict() == {"s": ["v0", "v1", "v2"]}
    in_process = ParquetLimits(decode_in_child=False)  # documented: the worker exposed
    with pytest.raises(AssertionError, match="worker process"):
        run(SMALL, limits=in_process)


def test_oversized_and_lying_metadata_fail_before_anything_is_allocated():
    huge = SMALL[:-8] + struct.pack("<I", 0xFFFFFFF0) + b"PAR1"
    with pytest.raises(SelectError, match="parquet_max_footer"):
        run(huge)
    lying = SMALL[:-8] + struct.pack("<I", len(SMALL)) + b"PAR1"
    with pytest.raises(SelectError, match="claims"):
        run(lying)
    big_footer = parquet_bytes(pa.table({f"c{i}": [1] for i in range(3000)}))
    assert len(big_footer) > 65536  # the footer needs a second range
    data, obj = run(big_footer, columns="c7", limits=ParquetLimits(max_footer=16 << 20))
    assert table_of(data).to_pydict() == {"c7": [1]} and len(obj.requests) >= 3
    with pytest.raises(SelectError, match="parquet_max_columns"):
        run(big_footer, limits=ParquetLimits(max_footer=16 << 20, max_columns=1000))


def test_not_parquet_and_empty_objects_get_422():
    for body in (b"", b"a,b\n1,2\n", b"PAR1" * 2):
        with pytest.raises(SelectError) as info:
            run(body)
        assert info.value.status == 422 and "parquet_select cannot read" in str(info.value)


@pytest.mark.parametrize("reads", [[[0, [[0, 10]]]], [[0, [[4, 1 << 40]]]], [[0, "x"]]])
def test_a_plan_out_of_bounds_or_out_of_protocol_is_refused(reads):
    selection = get_filter("parquet_select").selection({"output": "arrow"}, CONTEXT)
    schema = base64.b64encode(pa.schema([("a", pa.int64())]).serialize().to_pybytes())

    def planner(job):  # as a child subverted by the file it parsed might answer
        return {"reads": reads, "output": ["a"], "read": ["a"], "schema": schema.decode()}

    footer = SMALL[-(int.from_bytes(SMALL[-8:-4], "little") + 8):]
    with pytest.raises(FilterError, match="plan reads outside|broke its protocol"):
        selection.plan(footer, len(SMALL), 0, None, DEFAULT_LIMITS, planner)
