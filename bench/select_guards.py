"""What the hostile-input guards of record selections cost, against the unguarded path.

    .venv/bin/python bench/select_guards.py [--rows 400000] [--small-rows 2000]
        [--json-mib 16] [--repeat 5]

Two measurements, each against its baseline in the same run (alternating,
so foreign load on the machine hits both alike), medians over the repeats:

- Parquet: a whole ``parquet_select`` answer (two of ten columns, a
  predicate, Arrow out) over an in-memory object read by ranges, with row
  groups planned (the footer) and decoded in the bounded child process
  (``parquet_decode_in_child``, the default) against both in the process
  (``= false``), for a large object and a small one (``--small-rows``)
  whose answer is mostly the plan's round trip. The child is started once
  before timing, as a worker keeps it between requests; its first start
  is reported apart.
- JSON: ``json_depth.check_depth`` on 4 MiB blocks of JSON Lines records
  (2-3 levels deep, every other one with escaped quotes) against pyarrow's
  ``read_json`` of the same blocks, the parse it guards.
"""

from __future__ import annotations

import argparse
import io
import json
import random
import statistics
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from swift.common.swob import Response

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from iostack.filters.base import FilterContext
from iostack.filters.builtin.json_depth import check_depth
from iostack.filters.builtin.parquet_decode import POOL
from iostack.filters.builtin.parquet_select import ParquetLimits
from iostack.filters.library import get_filter
from iostack.filters.records import BLOCK_SIZE, RecordBlocks
from iostack.swift_middleware.select.parquet import ParquetSelecting

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import print_table

CONTEXT = FilterContext(account="AUTH_bench", container="data", obj="t.parquet")


def parquet_object(rows: int) -> bytes:
    rng = random.Random(3)
    columns = {f"n{i}": pa.array([rng.randrange(1 << 40) for _ in range(rows)])
               for i in range(8)}
    columns["id"] = pa.array(range(rows))
    columns["user"] = pa.array([f"u{rng.randrange(500):04d}" for _ in range(rows)])
    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, row_group_size=max(rows // 20, 1))
    return out.getvalue()


def fetcher(body: bytes):
    """The object as Swift answers ranges."""

    def fetch(byte_range: str | None) -> Response:
        size = len(body)
        first, _, last = (byte_range or "bytes=0-").split("=")[1].partition("-")
        start, end = ((size - int(last), size - 1) if not first
                      else (int(first), min(int(last) if last else size - 1, size - 1)))
        return Response(status=206, app_iter=[body[start:end + 1]],
                        headers={"Content-Range": f"bytes {start}-{end}/{size}"})

    return fetch


def parquet_answer(body: bytes, limits: ParquetLimits) -> tuple[float, int]:
    selection = get_filter("parquet_select").selection(
        {"columns": "id,user", "where": "user < 'u0250'", "output": "arrow"}, CONTEXT)
    started = time.perf_counter()
    answer = ParquetSelecting(fetcher(body), "/v1/AUTH_bench/data/t.parquet", selection,
                              ["parquet_select"], limits).run(0, None)
    size = sum(map(len, answer.chunks))
    return time.perf_counter() - started, size


def json_blocks(mib: int) -> list[bytes]:
    rng = random.Random(4)
    lines = []
    for i in range(mib * 5200):
        lines.append(json.dumps({
            "ts": 1_700_000_000 + i, "user": f"u{rng.randrange(5000):05d}",
            "status": rng.choice([200, 200, 200, 404, 500]), "url": f"/api/v1/items/{i}",
            "tags": ["a", "b"][: rng.randrange(3)], "geo": {"lat": rng.random(), "lon": 1.5},
            "msg": 'said "hi" [ok]' if i % 2 else "ok [1]"}) + "\n")
    data = "".join(lines).encode()
    reads = [data[i:i + (64 << 10)] for i in range(0, len(data), 64 << 10)]
    return list(RecordBlocks(block_size=BLOCK_SIZE).blocks(reads))


def timed(func, blocks: list[bytes]) -> float:
    started = time.perf_counter()
    for block in blocks:
        func(block)
    return time.perf_counter() - started


def read_json(block: bytes) -> pa.Table:
    return pa_json.read_json(io.BytesIO(block), read_options=pa_json.ReadOptions(
        use_threads=False, block_size=max(len(block), 1 << 20)))


def compare_parquet(body: bytes, rows: int, repeat: int) -> None:
    """Print one object's answer times, decoded in the child against in the worker."""
    inline, child = ParquetLimits(decode_in_child=False), ParquetLimits()
    POOL.close()
    first_start, _ = parquet_answer(body, child)  # a worker's first: it starts the child,
    # which is kept warm from here on
    times: dict[str, list[float]] = {"in the worker": [], "in the child": []}
    sizes = set()
    for _ in range(repeat):
        for name, limits in (("in the worker", inline), ("in the child", child)):
            took, size = parquet_answer(body, limits)
            times[name].append(took)
            sizes.add(size)
    if len(sizes) != 1:
        sys.exit(f"the two paths answered different sizes: {sorted(sizes)}")
    base = statistics.median(times["in the worker"])
    print(f"\nParquet: {len(body) / 2**20:.2f} MiB object, {rows} rows in 20 row groups, "
          f"2 of 10 columns, half the rows kept ({sizes.pop() / 2**20:.2f} MiB of Arrow); "
          f"a worker's first answer (starting its child): {first_start:.2f} s")
    print_table(["planned and decoded", "median s", "ratio"],
                [[name, f"{statistics.median(t):.4f}", f"{statistics.median(t) / base:.2f}"]
                 for name, t in times.items()])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--small-rows", type=int, default=2000)
    parser.add_argument("--json-mib", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    # A large object, and a small one whose answer is mostly planning: the footer is
    # parsed and planned in the child too (one more round trip per answer).
    for rows in (args.rows, args.small_rows):
        compare_parquet(parquet_object(rows), rows, args.repeat)

    blocks = json_blocks(args.json_mib)
    size = sum(map(len, blocks))
    parse, check = [], []
    for _ in range(args.repeat):
        parse.append(timed(read_json, blocks))
        check.append(timed(check_depth, blocks))
    print(f"\nJSON Lines: {size / 2**20:.1f} MiB in {len(blocks)} blocks")
    print_table(["work", "median s", "MiB/s", "ratio"],
                [[name, f"{statistics.median(t):.3f}", f"{size / 2**20 / statistics.median(t):.0f}",
                  f"{statistics.median(t) / statistics.median(parse):.2f}"]
                 for name, t in (("read_json (baseline)", parse), ("check_depth", check))])
    POOL.close()


if __name__ == "__main__":
    main()
