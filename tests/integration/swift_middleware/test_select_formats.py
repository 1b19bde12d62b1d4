"""Parquet and JSON Lines selection, and Arrow / JSON Lines answers, on the all-in-one.

The bytes a Parquet selection reads from disk are taken from the object
server's own access log (one line per ranged read of the object, with the
request's transaction id).
"""

from __future__ import annotations

import io
import json
import random
import re
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import requests

from iostack.filters.output import CONTENT_TYPES

pytestmark = pytest.mark.integration


def parquet_bytes(table: pa.Table, **kwargs) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **kwargs)
    return out.getvalue()


def ten_columns(rows: int) -> pa.Table:
    rng = random.Random(11)
    columns = {f"n{i}": pa.array([rng.randrange(1 << 40) for _ in range(rows)])
               for i in range(8)}
    columns["id"] = pa.array(range(rows))
    columns["user"] = pa.array([f"u{rng.randrange(500):04d}" for _ in range(rows)])
    return pa.table(columns)


@pytest.fixture
def http(t1):
    url, token = t1.get_auth()

    def get(path: str, **headers: str) -> requests.Response:
        return requests.get(f"{url}/{path}", timeout=60, headers={
            "X-Auth-Token": token, **{k.replace("_", "-"): v for k, v in headers.items()}})

    return get


def select(name: str, **params: str) -> dict[str, str]:
    return {"X_Iostack_Filter": name, **{f"X_Iostack_Param_{k.title()}": v
                                         for k, v in params.items()}}


def object_server_reads(aio, container: str, obj: str, trans_id: str) -> int:
    """Bytes the object servers sent for GETs of ``obj`` in transaction ``trans_id``."""
    log = Path(aio["log_dir"]) / "object.log"
    pattern = re.compile(rf'"GET /[^ ]*/{re.escape(container)}/{re.escape(obj)}" (\d+) (\d+|-) ')
    for _ in range(20):  # access log lines are written after each response
        lines = [line for line in log.read_text(errors="replace").splitlines()
                 if trans_id in line]
        found = [pattern.search(line) for line in lines]
        sizes = [int(m.group(2)) for m in found if m and m.group(2) != "-"]
        if sizes:
            return sum(sizes)
        time.sleep(0.25)
    raise AssertionError(f"no object-server log line for {trans_id}")


def test_parquet_projection_reads_under_15_percent_on_the_object_server(aio, t1, container,
                                                                        http):
    table = ten_columns(60_000)
    body = parquet_bytes(table, row_group_size=10_000)
    t1.put_object(container, "t.parquet", body)
    answer = http(f"{container}/t.parquet", **select("parquet_select", columns="user",
                                                     output="arrow"))
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Iostack-Selected-On"] == "object"
    assert answer.headers["Content-Type"] == CONTENT_TYPES["arrow"]
    got = pa.ipc.open_stream(answer.content).read_all()
    assert got.column("user").to_pylist() == table.column("user").to_pylist()
    read = object_server_reads(aio, container, "t.parquet", answer.headers["X-Trans-Id"])
    assert read <= 0.15 * len(body), (read, len(body))


def test_parquet_predicates_and_splits_over_http(t1, container, http):
    table = ten_columns(30_000)
    body = parquet_bytes(table, row_group_size=2_000)
    t1.put_object(container, "t.parquet", body)
    where = "id >= 7000 AND user < 'u0100'"
    want = [r for r in table.select(["id", "user"]).to_pylist()
            if r["id"] >= 7000 and r["user"] < "u0100"]
    whole = http(f"{container}/t.parquet", **select("parquet_select", columns="id,user",
                                                    where=where, output="jsonl"))
    assert whole.status_code == 200, whole.text
    assert [json.loads(line) for line in whole.text.splitlines()] == want
    rows, step = [], len(body) // 5
    for start in range(0, len(body), step):
        part = http(f"{container}/t.parquet", Range=f"bytes={start}-{start + step - 1}",
                    X_Iostack_Stage="proxy" if start % 2 else "object",
                    **select("parquet_select", columns="id,user", where=where, output="csv"))
        assert part.status_code == 200, part.text
        if not part.content.strip(b"id,user\n"):
            continue  # no row group of this split has a matching row
        rows += pa_csv.read_csv(io.BytesIO(part.content),
                                read_options=pa_csv.ReadOptions(
                                    column_names=["id", "user"],
                                    skip_rows=1 if start == 0 else 0)).to_pylist()
    assert rows == want


def test_a_hostile_parquet_file_gets_422_naming_it_and_the_server_lives_on(t1, container,
                                                                         http):
    good = parquet_bytes(ten_columns(2_000), row_group_size=500)
    flipped = bytearray(good)
    for offset in range(len(good) - 400, len(good) - 8, 7):  # the footer's metadata
        flipped[offset] ^= 0x5A
    for name, body in [("cut.parquet", good[: len(good) // 2]),
                       ("flipped.parquet", bytes(flipped)),
                       ("huge.parquet", good[:-8] + (2 ** 31).to_bytes(4, "little") + b"PAR1")]:
        t1.put_object(container, name, body)
        for stage in ("object", "proxy"):
            answer = http(f"{container}/{name}", X_Iostack_Stage=stage,
                          **select("parquet_select", columns="id"))
            assert answer.status_code == 422, (name, stage, answer.status_code, answer.text)
            assert f"{container}/{name}" in answer.text and "parquet_select" in answer.text
    t1.put_object(container, "ok.parquet", good)
    assert http(f"{container}/ok.parquet", **select("parquet_select", columns="id")
                ).status_code == 200
    bad_column = http(f"{container}/ok.parquet", **select("parquet_select", columns="nope"))
    assert bad_column.status_code == 400 and "no column 'nope'" in bad_column.text


JSONL = "".join(json.dumps(r) + "\n" for r in [
    {"user": f"u{i % 7}", "status": [200, 404, 500][i % 3], "ms": i / 4 if i % 5 else None}
    for i in range(3000)]).encode()


@pytest.mark.parametrize("stage", ["object", "proxy"])
def test_json_lines_selection_in_every_output(t1, container, http, stage):
    t1.put_object(container, "a.jsonl", JSONL)
    records = [json.loads(line) for line in JSONL.splitlines()]
    want = [{"user": r["user"], "ms": r["ms"]} for r in records
            if r["status"] >= 500 and r["ms"] is not None]
    params = {"columns": "user,ms", "where": "status >= 500 AND ms IS NOT NULL"}
    jsonl = http(f"{container}/a.jsonl", X_Iostack_Stage=stage,
                 **select("json_select", output="jsonl", **params))
    assert jsonl.status_code == 200, jsonl.text
    assert jsonl.headers["X-Iostack-Selected-On"] == stage
    assert [json.loads(line) for line in jsonl.text.splitlines()] == want
    arrow = http(f"{container}/a.jsonl", X_Iostack_Stage=stage,
                 **select("json_select", output="arrow", **params))
    assert pa.ipc.open_stream(arrow.content).read_all().to_pylist() == want
    csv_answer = http(f"{container}/a.jsonl", **select("json_select", **params))
    assert csv_answer.text.splitlines()[0] == "user,ms"
    assert len(csv_answer.text.splitlines()) == len(want) + 1


def test_csv_answers_in_arrow_equal_the_csv_answer(t1, container, http):
    body = b"id,user,status\n" + b"".join(
        f"{i},u{i % 13},{[200, 500][i % 2]}\n".encode() for i in range(5000))
    t1.put_object(container, "a.csv", body)
    params = {"columns": "user,id", "where": "status = 500"}
    text = http(f"{container}/a.csv", **select("csv_select", **params))
    arrow = http(f"{container}/a.csv", **select("csv_select", output="arrow", **params))
    assert arrow.headers["Content-Type"] == CONTENT_TYPES["arrow"]
    table = pa.ipc.open_stream(arrow.content).read_all()
    assert table.schema == pa.schema([("user", pa.string()), ("id", pa.string())])
    assert [f"{r['user']},{r['id']}" for r in table.to_pylist()] == text.text.splitlines()[1:]
    split = http(f"{container}/a.csv", Range="bytes=1000-", **select("csv_select", output="arrow",
                                                                    **params))
    assert pa.ipc.open_stream(split.content).read_all().schema == table.schema
