"""``iostack.select``: a container's selected rows as one pyarrow.Table, then DuckDB on it."""

from __future__ import annotations

import io
import uuid

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import iostack
from iostack.select_client import IOStackError

pytestmark = pytest.mark.integration


@pytest.fixture
def account(aio, swift_for) -> dict[str, str]:
    creds = aio["tenants"]["t1"]
    return {"auth_url": aio["auth_url"], "user": creds["user"], "key": creds["key"]}


def test_select_csv_objects_under_a_prefix_and_query_them_with_duckdb(t1, account):
    container = f"client-{uuid.uuid4().hex[:8]}"
    t1.put_container(container)
    for day in range(3):
        t1.put_object(container, f"2024/day{day}.csv", "user_id,status,url\n" + "".join(
            f"u{i % 4},{[200, 500, 503][(i + day) % 3]},/p{i}\n" for i in range(100)))
    t1.put_object(container, "2023/old.csv", "user_id,status,url\nold,500,/x\n")
    logs = iostack.select(container, "2024/", columns=["user_id", "status"],
                          where="status >= 500", **account)
    assert isinstance(logs, pa.Table) and logs.column_names == ["user_id", "status"]
    assert logs.num_rows == 200 and "old" not in logs.column("user_id").to_pylist()
    counts = duckdb.sql("SELECT user_id, count(*) AS n FROM logs GROUP BY 1 ORDER BY 1").fetchall()
    assert counts == [("u0", 50), ("u1", 50), ("u2", 50), ("u3", 50)]


def test_select_parquet_with_the_proxy_stage(t1, account):
    container = f"client-{uuid.uuid4().hex[:8]}"
    t1.put_container(container)
    table = pa.table({"id": range(1000), "v": [i * 0.5 for i in range(1000)]})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=100)
    t1.put_object(container, "t.parquet", out.getvalue())
    got = iostack.select(container, columns=["v"], where="id >= 990", format="parquet",
                         stage="proxy", **account)
    assert got.to_pydict() == {"v": [i * 0.5 for i in range(990, 1000)]}
    with pytest.raises(IOStackError, match="no column 'w'") as info:
        iostack.select(container, columns=["w"], format="parquet", **account)
    assert info.value.status == 400
