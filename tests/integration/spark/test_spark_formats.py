"""``format("iostack")`` over Parquet and JSON Lines objects, compared with Spark's own
``spark.read.parquet`` / ``spark.read.json`` on the same bytes in local files, with the
storage-side selection (answered in Arrow) and without it."""

from __future__ import annotations

import io
import json
import random
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.integration

pytest.importorskip("pyspark.sql")

SCHEMA = "id BIGINT, user STRING, status INT, latency DOUBLE, ok BOOLEAN"
USERS = ["u001", "u002", "u'3", "", None, "u 5", "ü6"]


def records(count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        record = {"id": seed * 100_000 + i, "user": rng.choice(USERS),
                  "status": rng.choice([200, 200, 404, 500, 503, None]),
                  "latency": rng.choice([0.25, 1.5, None, 3.0, -2.75, 1e-3]),
                  "ok": rng.choice([True, False, None])}
        if i % 11 == 0:
            del record["latency"]  # JSON: a missing field reads as null
        out.append(record)
    return out


DATA = {"day1": records(3000, 1), "day2": records(1700, 2), "day3": records(40, 3)}
ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("user", pa.string()), ("status", pa.int32()),
                          ("latency", pa.float64()), ("ok", pa.bool_())])


def parquet_body(rows: list[dict[str, Any]]) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), out, row_group_size=400)
    return out.getvalue()


def jsonl_body(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


@pytest.fixture(scope="module")
def formats(aio, swift_for, tmp_path_factory) -> dict[str, Any]:
    conn = swift_for("t1")
    container = f"spark-fmt-{uuid.uuid4().hex[:10]}"
    conn.put_container(container)
    local = tmp_path_factory.mktemp("spark-formats")
    for kind, encode in (("parquet", parquet_body), ("json", jsonl_body)):
        (local / kind).mkdir()
        for name, rows in DATA.items():
            body = encode(rows)
            conn.put_object(container, f"{kind}/{name}", body)
            (local / kind / f"{name}.{kind}").write_bytes(body)
    creds = aio["tenants"]["t1"]
    return {"local": local, "options": {"auth_url": aio["auth_url"], "user": creds["user"],
                                        "key": creds["key"], "container": container}}


def iostack(spark, formats, kind: str, schema: str | None = SCHEMA, **options: Any):
    reader = spark.read.format("iostack").options(**formats["options"]).options(
        format=kind, prefix=f"{kind}/", **{k: str(v).lower() for k, v in options.items()})
    return (reader.schema(schema) if schema else reader).load()


def reference(spark, formats, kind: str, schema: str | None = SCHEMA):
    files = sorted(str(p) for p in (Path(formats["local"]) / kind).iterdir())
    if kind == "parquet":
        df = spark.read.parquet(*files)
        return df.selectExpr(*[f.split()[0] for f in schema.split(", ")]) if schema else df
    return spark.read.json(files, schema=schema) if schema else spark.read.json(files)


def rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


QUERIES = {
    "all": lambda df: df,
    "int_ge": lambda df: df.filter("status >= 500"),
    "string_in_and_double": lambda df: df.filter("user IN ('u001', 'u''3', '') AND latency < 2"),
    "string_null": lambda df: df.filter("user IS NULL AND id > 100100"),
    "prefix_and_not_null": lambda df: df.filter("user LIKE 'u0%' AND status IS NOT NULL"),
    "projection": lambda df: df.select("user", "ok").filter("id % 3 = 0"),
    "group_by": lambda df: df.filter("status <> 200").groupBy("user").count(),
}


@pytest.mark.parametrize("kind", ["parquet", "json"])
@pytest.mark.parametrize("pushdown", [False, True], ids=["raw", "pushdown"])
@pytest.mark.parametrize("query", sorted(QUERIES))
def test_queries_equal_sparks_own_reader(spark, formats, kind, pushdown, query):
    got = QUERIES[query](iostack(spark, formats, kind, pushdown=pushdown))
    want = QUERIES[query](reference(spark, formats, kind))
    assert rows(got) == rows(want)


@pytest.mark.parametrize("kind", ["parquet", "json"])
def test_small_splits_lose_and_repeat_nothing(spark, formats, kind):
    for pushdown in (True, False):
        df = iostack(spark, formats, kind, pushdown=pushdown, split_size=5000)
        assert df.rdd.getNumPartitions() > 6
        assert rows(df.filter("status = 404")) == rows(
            reference(spark, formats, kind).filter("status = 404"))


@pytest.mark.parametrize("kind", ["parquet", "json"])
def test_without_a_schema_the_objects_give_sparks_schema(spark, formats, kind):
    got = iostack(spark, formats, kind, schema=None)
    want = reference(spark, formats, kind, schema=None)
    if kind == "parquet":  # Spark's Parquet reader keeps the file's INT32 ...
        assert got.schema == want.schema
    else:  # ... and its JSON reader infers BIGINT for every integer, fields sorted by name
        assert [(f.name, f.dataType) for f in got.schema] == [
            (f.name, f.dataType) for f in want.schema]
    assert rows(got.filter("status >= 500")) == rows(want.filter("status >= 500"))
