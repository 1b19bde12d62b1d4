"""Parquet row groups decoded in a bounded child process: a hostile file stops its own
row group, never the worker (real child processes, real pyarrow)."""

from __future__ import annotations

import io
import os
import resource
import signal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from test_select_parquet_unit import PATH, run, table_of, ten_columns

from iostack.filters.builtin.parquet_decode import (
    POOL,
    DecoderPool,
    DecodeStopped,
    _Child,
    memory_budget,
)
from iostack.filters.builtin.parquet_select import DecodeJob, ParquetLimits
from iostack.filters.errors import FilterError
from iostack.swift_middleware.select.engine import SelectError

LIMITS = ParquetLimits(max_memory=64 << 20)


def dictionary_bomb(rows: int = 256) -> bytes:
    """~1 KB of Parquet whose footer is honest and small, and whose one column decodes
    to a 1 MiB string per row: a dictionary of one value, indexed by every row."""
    column = pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()),
                                            pa.array(["x" * (1 << 20)]))
    out = io.BytesIO()
    pq.write_table(pa.table({"s": column}), out, store_schema=False, compression="zstd")
    return out.getvalue()


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def test_a_file_decoding_past_the_memory_limit_is_422_and_the_worker_never_holds_it():
    body = dictionary_bomb()
    assert len(body) < 4096
    before = peak_rss()
    with pytest.raises(SelectError) as caught:
        run(body, limits=LIMITS)
    assert caught.value.status == 422 and PATH in str(caught.value)
    assert "more memory than the parquet_max_memory limit" in str(caught.value)
    assert peak_rss() - before < 100 << 20  # decoded here it was 256 MiB more (1 GB peak)
    data, _ = run(dictionary_bomb(rows=8), limits=LIMITS)  # within the limit: answered
    assert table_of(data).num_rows == 8


def test_answers_from_the_child_equal_pyarrows_own_reading():
    table = ten_columns(20_000)
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=3_000)
    data, _ = run(out.getvalue(), columns="id,user", where="id < 9000 AND user IS NOT NULL")
    expected = table.filter(pa.compute.and_(pa.compute.less(table["id"], 9000),
                                            pa.compute.is_valid(table["user"])))
    assert table_of(data).to_pydict() == expected.select(["id", "user"]).to_pydict()


def one_group_job(body: bytes, where: str = "") -> DecodeJob:
    metadata = pq.read_metadata(pa.BufferReader(body))
    footer = int.from_bytes(body[-8:-4], "little") + 8
    column = metadata.row_group(0).column(0)
    start = column.dictionary_page_offset or column.data_page_offset
    pieces = [(start, body[start:start + column.total_compressed_size])]
    return DecodeJob(body[-footer:], len(body), 0, pieces, [metadata.schema.names[0]], where)


def test_a_child_that_dies_is_reported_by_its_signal_and_replaced():
    out = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(100))}), out)
    job = one_group_job(out.getvalue())
    pool = DecoderPool()
    try:
        assert pool.decode(job, LIMITS, 30).num_rows == 100
        (child,) = pool._idle  # kept for the next row group
        os.kill(child.process.pid, signal.SIGSEGV)
        child.process.wait()
        assert pool.decode(job, LIMITS, 30).num_rows == 100  # a new child
    finally:
        pool.close()
    child = _Child(memory_budget(LIMITS))
    os.kill(child.process.pid, signal.SIGSEGV)
    with pytest.raises(DecodeStopped, match=r"row group 0: the decoder crashed \(SIGSEGV\)"):
        child.decode(job, 30)


def test_a_file_error_keeps_the_child_and_a_spent_time_limit_refuses_at_once():
    out = io.BytesIO()
    pq.write_table(pa.table({"id": list(range(100))}), out)
    job = one_group_job(out.getvalue(), where="id > 5")
    broken = DecodeJob(job.footer, job.size, 0, [(job.pieces[0][0], b"\0" * 64)],
                       job.columns, "")
    pool = DecoderPool()
    try:
        with pytest.raises(FilterError, match="row group 0"):
            pool.decode(broken, LIMITS, 30)
        (child,) = pool._idle
        assert pool.decode(job, LIMITS, 30).num_rows == 94
        assert pool._idle[0] is child
        with pytest.raises(DecodeStopped, match="parquet_time_limit"):
            pool.decode(job, LIMITS, 0)
    finally:
        pool.close()


def teardown_module() -> None:
    POOL.close()
