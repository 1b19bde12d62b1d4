"""The read schema: which object column each field reads (``plan_columns``), the
storage-side selection that asks for them (``selection_headers``), and the schema
of a Parquet or JSON Lines object when no read schema is given (``typed_schema``)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq
from pyspark.sql.types import StructField, StructType

from iostack.filters.builtin.parquet_select import ParquetLimits, footer_length
from iostack.select_client import selection_request
from iostack.spark.arrow import column_kind, spark_type
from iostack.spark.filters import Term, printable, where_text
from iostack.spark.options import Settings
from iostack.spark.swift import read_range

JSON_PROBE = 1 << 20  # bytes of the first JSON Lines object read to infer a schema


@dataclass(frozen=True)
class Column:
    """One output column: its Spark name, conversion kind, the object column it reads
    (``ref``: a header name, or ``index`` when known) and its name in predicates."""

    name: str
    kind: str
    ref: str
    index: int | None
    where_name: str


def safe_ref(name: str) -> bool:
    """Whether a header name can be listed in ``X-Iostack-Param-Columns`` as is."""
    return bool(name) and printable(name) and "," not in name and name == name.strip()


def plan_columns(schema: StructType, header: bool,
                 header_fields: Sequence[str] | None) -> list[Column]:
    """How each schema field is read: by header name (header objects), by ``_cN`` name
    or by position (objects without a header). ``header_fields`` (the first object's
    first line, when read) resolves names that cannot be sent as names."""
    names = [field.name for field in schema.fields]
    kinds = [column_kind(field.dataType) for field in schema.fields]
    columns: list[Column] = []
    if not header:
        positional = not all(_is_cn(n) for n in names)
        for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
            index = i if positional else int(name[2:])
            columns.append(Column(name, kind, str(index), index, f"_c{index}"))
        return columns
    for name, kind in zip(names, kinds, strict=True):
        index = None
        if header_fields is not None and name in header_fields:
            index = list(header_fields).index(name)
        if not safe_ref(name) and index is None:
            raise ValueError(
                f"iostack: column {name!r} is not in the header of the first object"
                + (f" (columns: {', '.join(header_fields)})" if header_fields else ""))
        ref = name if safe_ref(name) else str(index)
        columns.append(Column(name, kind, ref, index, name))
    return columns


def _is_cn(name: str) -> bool:
    return name.startswith("_c") and name[2:].isdigit()


def selection_headers(columns: Sequence[Column], terms: Sequence[Term],
                      header: bool, data_format: str = "csv",
                      answer: str = "arrow") -> dict[str, str]:
    """The request headers of a storage-side selection of ``columns`` where ``terms``,
    answered as an Arrow stream (no text to parse here) or as CSV."""
    where = where_text(terms, {c.name: c.where_name for c in columns})
    return selection_request(data_format, [c.ref for c in columns], where, header, answer)


def typed_schema(storage_url: str, token: str, settings: Settings, name: str,
                 size: int) -> StructType:
    """The schema of a Parquet object (from its footer) or of a JSON Lines object (from
    its first MiB, fields sorted by name as Spark's JSON reader sorts them)."""
    if settings.format == "parquet":
        tail = read_range(storage_url, token, settings, name, "bytes=-65536")
        need = footer_length(tail, size, ParquetLimits())
        if need > len(tail):
            tail = read_range(storage_url, token, settings, name, f"bytes=-{need}")
        arrow = pq.read_metadata(pa.BufferReader(tail[-need:])).schema.to_arrow_schema()
        return StructType([StructField(f.name, spark_type(f.type), True) for f in arrow])
    head = read_range(storage_url, token, settings, name, f"bytes=0-{JSON_PROBE - 1}")
    head = head[: head.rfind(b"\n") + 1] or head
    arrow = pa_json.read_json(io.BytesIO(head)).schema
    return StructType([StructField(f.name, spark_type(f.type), True)
                       for f in sorted(arrow, key=lambda f: f.name)])
