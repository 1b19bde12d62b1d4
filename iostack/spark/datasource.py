"""``spark.read.format("iostack")``: the objects of a Swift container as a DataFrame,
with the projection and the row filters run at the storage side.

Use::

    from iostack.spark import register

    register(spark)  # the data source, and filter pushdown for Python sources
    df = (spark.read.format("iostack")
          .option("auth_url", "http://127.0.0.1:8080/auth/v1.0")
          .option("user", "t1:alice").option("key", "secret")
          .option("container", "logs").option("prefix", "2024/")
          .schema("user_id STRING, url STRING, status INT")
          .load())
    df.filter("status >= 500 AND url LIKE '/api%'").groupBy("user_id").count().show()

Each object (or ``split_size`` byte range of one) is a partition, read with
one GET that asks the storage side for the schema's columns and the pushed
filters (``X-Iostack-Filter: csv_select`` / ``parquet_select`` /
``json_select``, ``X-Iostack-Param-Columns``, ``X-Iostack-Param-Where``; a
``Range`` selects the records, or the Parquet row groups, that start in it)
and for an Arrow answer (``X-Iostack-Param-Output: arrow``): the Python
worker reads record batches, it parses no text. An answer cut short lacks
the Arrow end-of-stream marker and fails the task (``IOStackError``).

Options:

- ``auth_url``, ``user``, ``key``: Swift v1 (tempauth) credentials; or
  ``storage_url`` and ``token`` directly.
- ``container`` (required); ``prefix`` (default ``""``): the objects read.
- ``format`` (default ``csv``): ``csv``, ``parquet`` or ``json`` (JSON Lines:
  one object per line; top-level fields). Parquet and JSON columns are read
  by name and typed by the object; the read schema's types are cast to
  (BYTE ... DOUBLE, BOOLEAN, STRING; a JSON field absent from a record is
  NULL). Without a read schema, a Parquet object's footer gives it (as
  ``spark.read.parquet`` does for these types; other types fail with a
  message: give a schema without them) and a JSON Lines object's first MiB
  gives it as ``spark.read.json`` infers it (integers BIGINT, fields sorted
  by name, times as STRING).
- ``header`` (default ``true``): CSV objects' first line names the columns.
- ``answer`` (default ``arrow``): the storage side's answer format; ``csv``
  (CSV objects only) has the worker parse the CSV answer, as before Arrow
  answers existed (the benchmark's comparison).
  Without a header, columns are ``_c0``, ``_c1``, ... (Spark's names); a read
  schema whose names are not all ``_cN`` then maps to the columns by position.
- ``split_size`` (bytes, default 134217728): larger objects are read as
  several byte-range partitions.
- ``pushdown`` (default ``true``): ``false`` GETs the raw objects and selects
  columns and rows here with the same semantics (the baseline to compare
  against; the results are identical).
- ``stage`` (default: the storage's choice, the object servers): ``proxy``
  or ``object``, where the selection runs (``X-Iostack-Stage``).
- ``push_double`` (default ``true``): push comparisons on DOUBLE columns (see
  ``iostack.spark.filters`` for the one caveat).
- ``timeout`` (seconds, default 60): of each HTTP connection.
- ``user_agent`` (default ``iostack-spark``): the User-Agent of the data GETs, which
  names them in the proxy's access log (the pushdown benchmark counts bytes by it).

Schema: a read schema (``.schema("user_id STRING, status INT")``) selects
columns by name (they must be in the objects' header) and gives their types:
STRING, BYTE, SHORT, INT, BIGINT, FLOAT, DOUBLE, BOOLEAN. As with Spark's CSV
reader (PERMISSIVE), empty fields and values that do not parse are NULL.
Without a schema, the first non-empty object's header gives the columns, all
STRING. Spark does not offer column pruning to Python data sources: the read
schema is the projection.

Filter pushdown needs ``spark.sql.python.filterPushdown.enabled=true``
(``register`` sets it at runtime; without it Spark refuses to read from a
source that implements ``pushFilters``: ``DATA_SOURCE_PUSHDOWN_DISABLED``).
Spark never pushes ``OR``. What is pushed and why it is exact:
``iostack.spark.filters``. Terms on numeric columns are checked again on
the parsed values (cheap: only the selected rows are), so that a field the
storage side reads as a number but Spark's parser does not (``1e3`` in an
INT column) is not let through.

Spark 4.3.0 caveat: after a query with pushed filters, a later query of the
*same* DataFrame that pushes no filters (``df.count()`` after
``df.filter(...).count()``) reuses the read Spark planned for the first one,
so it sees only the filtered rows. This is Spark's (the planned read is kept
on the relation; later versions scope it to the scan); ``load()`` a fresh
DataFrame per query, as the tests do.

Objects are UTF-8. Records end at ``\n`` (one must fit in 4 MiB); fields
may be quoted (``""`` for a quote) but may not hold line breaks, as for
Spark's CSV reader without ``multiLine``. Rows whose field count differs
from the header's are skipped (the storage side does the same); Spark's own
reader would pad or cut them.

The package's modules: ``options`` (the options above, checked), ``swift``
(an object's header line, byte ranges and bodies over HTTP), ``partitions``
(objects and byte ranges to partitions), ``schema`` (read schema to object
columns and the selection request; Parquet and JSON Lines schemas),
``arrow`` (CSV to Arrow batches, Spark's parsing of typed columns),
``filters`` (Spark's filters to the storage side's predicate),
``partition_reader`` (what the workers run) and this module, the data source Spark registers.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StringType, StructField, StructType

from iostack.select_client import IOStackError, authenticate, list_objects
from iostack.spark.arrow import convert_column, csv_batches, drop_first_line
from iostack.spark.options import Settings
from iostack.spark.partition_reader import IOStackReader
from iostack.spark.partitions import ObjectSplit, plan_partitions, split_range
from iostack.spark.schema import plan_columns, selection_headers, typed_schema
from iostack.spark.swift import header_line

# The data source, and the helpers tests and tools use, from the modules that own them.
__all__ = ["IOStackDataSource", "IOStackError", "ObjectSplit", "Settings", "convert_column",
           "csv_batches", "drop_first_line", "plan_columns", "plan_partitions",
           "selection_headers", "split_range"]


class IOStackDataSource(DataSource):
    """``spark.read.format("iostack")``: see the module's documentation."""

    @classmethod
    def name(cls) -> str:
        return "iostack"

    def schema(self) -> StructType:
        settings = Settings.from_options(self.options)
        storage_url, token = authenticate(settings)
        for name, size in list_objects(storage_url, token, settings.container,
                                       settings.prefix, settings.timeout):
            if size <= 0:
                continue
            if settings.format != "csv":
                return typed_schema(storage_url, token, settings, name, size)
            fields = header_line(storage_url, token, settings.container, name,
                                 settings.timeout)
            if not fields:
                continue
            names = fields if settings.header else [f"_c{i}" for i in range(len(fields))]
            return StructType([StructField(n, StringType(), True) for n in names])
        raise ValueError(f"iostack: no non-empty object in {settings.container!r} under "
                         f"prefix {settings.prefix!r} to read a header from; give a schema")

    def reader(self, schema: StructType) -> DataSourceReader:
        return IOStackReader(Settings.from_options(self.options), schema)
