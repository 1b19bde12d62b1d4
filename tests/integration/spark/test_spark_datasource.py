"""``spark.read.format("iostack")`` in a real local Spark against the all-in-one's Swift.

Every query is run through the data source, with the storage-side selection
(``pushdown=true``, the default: the acceptance tests of the proxy's
``csv_select``) and without it (``pushdown=false``: raw GETs, selection in the
data source), and compared with Spark's own CSV reader on the same bytes in
local files. One SparkSession (local[2], conftest.py) serves the whole run.
"""

from __future__ import annotations

import random
import re
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

pyspark_sql = pytest.importorskip("pyspark.sql")

FULL_SCHEMA = "ts BIGINT, user_id STRING, url STRING, status INT, latency DOUBLE, agent STRING"
HEADER = "ts,user_id,url,status,latency,agent\n"
AGENTS = ['"Mozilla/5.0 (X11, Linux)"', "curl/8", '"say ""hi"""', "", '"a,""b"",c"',
          "it's", '""']
URLS = ["/api/v1/items", "/api/v2", "/index.html", "/a_b/c", "/50%/x", "", "/apix"]
USERS = ["u001", "u002", "u'3", "u004", "", "u 5"]
STATUSES = ["200", "200", "404", "500", "503", "", "abc", "1e3", "5.0", "+301", "-1"]
LATENCIES = ["0.25", "1.5", "", "3", "1e-3", "x", "0.5", "-2.75"]


def log_body(lines: int, seed: int) -> bytes:
    rng = random.Random(seed)
    out = [HEADER]
    for i in range(lines):
        out.append(",".join([str(1000 + i), rng.choice(USERS), rng.choice(URLS),
                             rng.choice(STATUSES), rng.choice(LATENCIES),
                             rng.choice(AGENTS)]) + "\n")
    return "".join(out).encode()


OBJECTS = {
    "logs/day1.csv": log_body(400, 1),
    "logs/day2.csv": log_body(250, 2),
    "logs/empty.csv": b"",
    "logs/header-only.csv": HEADER.encode(),
    "logs/day3.csv": log_body(60, 3),
}


@pytest.fixture(scope="module")
def dataset(aio, swift_for, tmp_path_factory) -> dict[str, Any]:
    conn = swift_for("t1")
    container = f"spark-{uuid.uuid4().hex[:10]}"
    conn.put_container(container)
    local = tmp_path_factory.mktemp("spark-csv")
    for name, body in OBJECTS.items():
        conn.put_object(container, name, body)
        (local / name.replace("/", "_")).write_bytes(body)
    conn.put_object(container, "other/ignored.csv", b"x\n1\n")
    creds = aio["tenants"]["t1"]
    return {"container": container, "local": local,
            "options": {"auth_url": aio["auth_url"], "user": creds["user"],
                        "key": creds["key"], "container": container, "prefix": "logs/"}}


def iostack(spark, dataset, schema: str | None = FULL_SCHEMA, **options: Any):
    reader = spark.read.format("iostack").options(**dataset["options"])
    reader = reader.options(**{k: str(v).lower() if isinstance(v, bool) else str(v)
                               for k, v in options.items()})
    if schema is not None:
        reader = reader.schema(schema)
    return reader.load()


def reference(spark, dataset, schema: str = FULL_SCHEMA):
    files = sorted(str(p) for p in Path(dataset["local"]).iterdir())
    return spark.read.csv(files, header=True, schema=schema, escape='"')


def rows(df) -> list[tuple]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


PUSHDOWN = pytest.mark.parametrize("pushdown", [False, True], ids=["raw", "pushdown"])

QUERIES = {
    "all": lambda df: df,
    "int_ge": lambda df: df.filter("status >= 500"),
    "int_eq_string_eq": lambda df: df.filter("status = 200 AND user_id = 'u''3'"),
    "int_in_string_not_in": lambda df: df.filter(
        "status IN (404, 503, 301) AND user_id NOT IN ('u001', 'u 5')"),
    "int_not_eq_string_in": lambda df: df.filter(
        "status <> 200 AND user_id IN ('u001', 'u 5', '')"),
    "string_range": lambda df: df.filter("user_id > 'u002' AND user_id <= 'u004'"),
    "is_null_long": lambda df: df.filter("agent IS NULL AND ts BETWEEN 1100 AND 1300"),
    "is_not_null": lambda df: df.filter("status IS NOT NULL AND url IS NOT NULL"),
    "int_is_null": lambda df: df.filter("status IS NULL"),
    "startswith": lambda df: df.filter("url LIKE '/api%'"),
    "startswith_underscore": lambda df: df.filter("startswith(url, '/a_')"),
    "startswith_percent": lambda df: df.filter("startswith(url, '/50%')"),
    "endswith_contains": lambda df: df.filter("url LIKE '%html' OR agent LIKE '%,%'"),
    "double": lambda df: df.filter("latency > 0.4 AND latency <= 1.5"),
    "or_not_pushed": lambda df: df.filter("status = 404 OR user_id = 'u001'"),
    "quotes_in_values": lambda df: df.filter(
        """agent IN ('say "hi"', 'it''s', 'a,"b",c') AND agent >= 'a'"""),
}


@PUSHDOWN
@pytest.mark.parametrize("query", list(QUERIES))
def test_queries_equal_sparks_csv_reader(spark, dataset, pushdown, query):
    got = QUERIES[query](iostack(spark, dataset, pushdown=pushdown))
    expected = QUERIES[query](reference(spark, dataset))
    assert rows(got) == rows(expected)


@pytest.mark.parametrize("stage", ["proxy", "object"])
@pytest.mark.parametrize("query", ["int_in_string_not_in", "quotes_in_values", "double"])
def test_the_proxy_and_the_object_servers_select_alike(spark, dataset, stage, query):
    got = QUERIES[query](iostack(spark, dataset, stage=stage, split_size=700))
    assert rows(got) == rows(QUERIES[query](reference(spark, dataset)))


@pytest.mark.parametrize("split_size", [None, 997])
@pytest.mark.parametrize("query", ["all", "int_ge", "quotes_in_values", "double"])
def test_the_csv_answer_equals_sparks_csv_reader(spark, dataset, split_size, query):
    # answer=csv: the storage side answers in CSV, parsed block by block as it streams.
    options = {"answer": "csv", **({"split_size": split_size} if split_size else {})}
    got = QUERIES[query](iostack(spark, dataset, **options))
    assert rows(got) == rows(QUERIES[query](reference(spark, dataset)))


@PUSHDOWN
def test_projection_by_schema_count_and_group_by(spark, dataset, pushdown):
    def load():  # a fresh DataFrame per query: see test_a_loaded_dataframe_reused_...
        return iostack(spark, dataset, "status INT, user_id STRING", pushdown=pushdown)

    ref = reference(spark, dataset).select("status", "user_id")
    assert load().columns == ["status", "user_id"]
    assert rows(load()) == rows(ref)
    assert load().count() == ref.count() == 710
    assert load().filter("status >= 500").count() == ref.filter("status >= 500").count()
    assert rows(load().groupBy("user_id").count()) == rows(ref.groupBy("user_id").count())
    assert rows(load().filter("status = 200").groupBy("user_id").count()) == rows(
        ref.filter("status = 200").groupBy("user_id").count())


@pytest.mark.xfail(reason="Spark 4.3.0 keeps the read planned by a filtered query on the "
                          "relation and reuses it for a later unfiltered query of the same "
                          "DataFrame (fixed upstream: the read info is scoped to the scan)",
                   strict=False)
def test_a_loaded_dataframe_reused_after_a_filtered_query(spark, dataset):
    df = iostack(spark, dataset, "status INT, user_id STRING")
    assert df.filter("status >= 500").count() < 710
    assert df.count() == 710


@PUSHDOWN
def test_byte_range_splits_lose_and_repeat_nothing(spark, dataset, pushdown):
    df = iostack(spark, dataset, pushdown=pushdown, split_size=997)
    assert df.rdd.getNumPartitions() > 10
    ref = reference(spark, dataset)
    assert rows(df) == rows(ref)
    cond = "status >= 404 AND url LIKE '/api%'"
    assert rows(df.filter(cond)) == rows(ref.filter(cond))


@PUSHDOWN
def test_without_a_schema_the_header_gives_string_columns(spark, dataset, pushdown):
    df = iostack(spark, dataset, schema=None, pushdown=pushdown)
    assert df.columns == ["ts", "user_id", "url", "status", "latency", "agent"]
    assert {f.dataType.simpleString() for f in df.schema.fields} == {"string"}
    ref = spark.read.csv(sorted(str(p) for p in Path(dataset["local"]).iterdir()),
                         header=True, escape='"')
    assert rows(df) == rows(ref)
    assert rows(df.filter("status = '200'")) == rows(ref.filter("status = '200'"))


@PUSHDOWN
def test_an_unknown_column_names_status_object_and_column(spark, dataset, pushdown):
    df = iostack(spark, dataset, "nosuch STRING", pushdown=pushdown)
    with pytest.raises(Exception) as info:
        df.collect()
    text = str(info.value)
    assert "no column 'nosuch'" in text and "logs/day" in text
    if pushdown:  # the proxy's answer
        assert "400" in text


def filter_nodes(df) -> list[str]:
    """The Filter nodes of the DataFrame's physical plan."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return [line for line in plan.splitlines()
            if re.match(r"^[\s+:-]*(\*\(\d+\) )?Filter ", line)]


def test_filters_are_pushed_to_the_source(spark, dataset):
    # Pushed filters leave Spark's plan: no Filter node above the scan for them.
    assert filter_nodes(
        iostack(spark, dataset).filter("status >= 500 AND url LIKE '/api%'")) == []
    kept = filter_nodes(iostack(spark, dataset).filter("status >= 500 AND url LIKE '%html'"))
    assert len(kept) == 1 and "EndsWith" in kept[0] and "500" not in kept[0], kept


NO_HEADER = b'1,"a,b",200\n2,,404\n3,"x ""y""",abc\n4,z,500\n'


@PUSHDOWN
def test_objects_without_a_header(spark, dataset, pushdown, swift_for, tmp_path):
    conn = swift_for("t1")
    conn.put_object(dataset["container"], "nohdr/a.csv", NO_HEADER)
    local = tmp_path / "a.csv"
    local.write_bytes(NO_HEADER)
    opts = {"prefix": "nohdr/", "header": False, "pushdown": pushdown}
    ref = spark.read.csv(str(local), header=False, escape='"',
                         schema="id INT, name STRING, status INT")
    by_position = iostack(spark, dataset, "id INT, name STRING, status INT", **opts)
    cond = "status >= 300 AND name IS NOT NULL"
    assert rows(by_position) == rows(ref)
    assert rows(by_position.filter(cond)) == rows(ref.filter(cond)) == [(4, "z", 500)]
    by_name = iostack(spark, dataset, "_c2 INT, _c1 STRING", **opts).filter("_c2 < 300")
    assert rows(by_name) == [(200, "a,b")]
    inferred = iostack(spark, dataset, None, **opts)
    assert inferred.columns == ["_c0", "_c1", "_c2"]
    assert rows(inferred.filter("_c1 IS NULL")) == [("2", None, "404")]


def test_storage_url_and_token_options(spark, dataset, swift_for):
    storage_url, token = swift_for("t1").get_auth()
    df = (spark.read.format("iostack")
          .options(storage_url=storage_url, token=token, container=dataset["container"],
                   prefix="logs/day3")
          .schema("ts BIGINT").load())
    assert df.count() == 60


def test_register_turns_pushdown_on_at_runtime(spark):
    from iostack.spark import FILTER_PUSHDOWN_CONF, register

    spark.conf.set(FILTER_PUSHDOWN_CONF, "false")
    register(spark)
    assert spark.conf.get(FILTER_PUSHDOWN_CONF) == "true"
