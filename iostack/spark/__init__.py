"""Spark (4.x) reads of IOStack-managed Swift objects, with storage-side pushdown.

``spark.read.format("iostack")`` (``iostack.spark.datasource``) reads the CSV,
Parquet or JSON Lines objects of a container as a DataFrame; the read
schema's columns and the filters Spark pushes (``iostack.spark.filters``) are
sent to the storage side's record filter (``csv_select``, ``parquet_select``,
``json_select``), which answers in Arrow, so only the needed rows and columns
travel and the workers parse no text::

    from iostack.spark import register

    register(spark)
    df = (spark.read.format("iostack")
          .option("auth_url", auth_url).option("user", "t1:alice").option("key", key)
          .option("container", "logs")
          .schema("user_id STRING, status INT")
          .load())
    df.filter("status >= 500").groupBy("user_id").count().show()
"""

from __future__ import annotations

from typing import Any

from iostack.spark.datasource import IOStackDataSource

FILTER_PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"

__all__ = ["FILTER_PUSHDOWN_CONF", "IOStackDataSource", "register"]


def register(spark: Any) -> None:
    """Register ``format("iostack")`` with a SparkSession and turn on filter pushdown
    for Python data sources (a runtime SQL setting; it can also be given to the
    session builder)."""
    spark.dataSource.register(IOStackDataSource)
    spark.conf.set(FILTER_PUSHDOWN_CONF, "true")
