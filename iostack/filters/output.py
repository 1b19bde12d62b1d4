"""The answer formats of the record filters: CSV, JSON Lines, Arrow IPC stream.

``csv_select``, ``json_select`` and ``parquet_select`` take an ``output``
parameter (``X-Iostack-Param-Output: arrow``, ``?iostack-output=arrow``):

- ``csv`` (default): comma-separated values, fields quoted only when a value
  needs it, a header line of the column names when the answer covers the
  object's start (so byte-range splits concatenate to one CSV document);
- ``jsonl``: one JSON object per selected row, ``{"column": value, ...}``
  (nulls as ``null``, NaN and infinities as ``null``: JSON has none);
- ``arrow``: an Arrow IPC stream (``application/vnd.apache.arrow.stream``):
  the schema first, in every answer (each is a stream of its own), then one
  record batch per block, then the end-of-stream marker. Engines read it
  without parsing text (the Spark data source, ``iostack.select``).

A writer is made per request, for the last selection of a chain (the
others hand CSV or JSON Lines to the next). Serialisation is vectorized
(pyarrow; no Python per row) except for nested values in JSON Lines.
Errors mid-stream stay detectable whatever the format: the data path frames
or cuts the answer (``iostack.swift_middleware.select.frames``); an Arrow
stream cut short also lacks its end-of-stream marker.
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from iostack.filters.metadata import FilterMetadata, Param

FORMATS = ("csv", "jsonl", "arrow")
CONTENT_TYPES = {"csv": "text/csv; charset=utf-8", "jsonl": "application/x-ndjson",
                 "arrow": "application/vnd.apache.arrow.stream"}
OUTPUT_PARAM = Param("output", "enum", default="csv", choices=FORMATS,
                     description="answer format: csv, jsonl or arrow (Arrow IPC stream)")


def selection_metadata(name: str, description: str, columns: str, record: str = "row",
                       extra: tuple[Param, ...] = ()) -> FilterMetadata:
    """What every record filter declares: ``columns``, ``where`` (the ``csv_where``
    language over a ``record``), any ``extra`` parameters, ``output``; GET only,
    on the object servers by default (the proxy selects what they cannot)."""
    return FilterMetadata(
        name=name,
        description=description,
        params=(
            Param("columns", "str", default="", description=columns),
            Param("where", "str", default="",
                  description=f"{record} predicate, e.g. status >= 500 AND url LIKE '/api%'"),
            *extra,
            OUTPUT_PARAM,
        ),
        methods=frozenset({"GET"}),
        stages=frozenset({"proxy", "object"}),
        default_stage="object",
        changes_size=True,
    )

_UNQUOTED = pa_csv.WriteOptions(include_header=False, quoting_style="none")
_QUOTED = pa_csv.WriteOptions(include_header=False, quoting_style="needed")
_CONTROL = "".join(chr(c) for c in range(0x20))


class TableWriter:
    """Serialises one answer's tables; ``begin`` once, ``write`` per block, ``end`` once."""

    content_type = CONTENT_TYPES["csv"]

    def begin(self, schema: pa.Schema, at_start: bool) -> bytes:
        return b""

    def write(self, table: pa.Table) -> bytes:
        raise NotImplementedError

    def end(self) -> bytes:
        return b""


class CsvWriter(TableWriter):
    def begin(self, schema: pa.Schema, at_start: bool) -> bytes:
        if not at_start or not schema.names:
            return b""
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerow(schema.names)
        return out.getvalue().encode()

    def write(self, table: pa.Table) -> bytes:
        if table.num_rows == 0:
            return b""
        out = io.BytesIO()
        # Quotes cost bytes: none unless a value needs them (then every string gets them).
        # One empty column unquoted would make a blank line, which CSV readers skip.
        if (table.num_columns == 1 and pa.types.is_string(table.schema.field(0).type)
                and pc.any(pc.equal(table.column(0), "")).as_py()):
            pa_csv.write_csv(table, out, _QUOTED)
            return out.getvalue()
        try:
            pa_csv.write_csv(table, out, _UNQUOTED)
        except pa.ArrowInvalid:
            out = io.BytesIO()
            pa_csv.write_csv(table, out, _QUOTED)
        return out.getvalue()


def _json_strings(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value of ``column`` as JSON text (``null`` for nulls)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        text = pc.replace_substring(pc.replace_substring(column, "\\", "\\\\"), '"', '\\"')
        if pc.any(pc.match_substring_regex(text, "[\\x00-\\x1f]")).as_py():
            for char in _CONTROL:
                text = pc.replace_substring(text, char, f"\\u{ord(char):04x}")
        text = pc.binary_join_element_wise('"', text, '"', "")
    elif pa.types.is_boolean(kind) or pa.types.is_integer(kind):
        text = pc.cast(column, pa.string())
    elif pa.types.is_floating(kind):
        finite = pc.is_finite(column)
        text = pc.if_else(finite, pc.cast(column, pa.string()), pa.scalar(None, pa.string()))
    elif pa.types.is_temporal(kind) or pa.types.is_decimal(kind):
        text = pc.binary_join_element_wise('"', pc.cast(column, pa.string()), '"', "")
    else:  # nested, binary ...: rare in selections; Python per value
        text = pa.array([None if v is None else json.dumps(v, default=str, allow_nan=False)
                         for v in column.to_pylist()], pa.string())
    return pc.fill_null(text, "null")


class JsonLinesWriter(TableWriter):
    content_type = CONTENT_TYPES["jsonl"]

    def write(self, table: pa.Table) -> bytes:
        if table.num_rows == 0:
            return b""
        if not table.num_columns:
            return b"{}\n" * table.num_rows
        parts: list[Any] = []
        for i, name in enumerate(table.schema.names):
            parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
            parts.append(_json_strings(table.column(i)))
        parts.append("}\n")
        lines = pc.binary_join_element_wise(*parts, "")
        return pc.binary_join(pa.ListArray.from_arrays([0, len(lines)], lines), "")[0].as_py(
        ).encode()


class _Sink:
    """A write-only file that hands back what was written since the last ``take``."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> int:
        self.parts.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


class ArrowStreamWriter(TableWriter):
    content_type = CONTENT_TYPES["arrow"]

    def __init__(self) -> None:
        self._sink = _Sink()
        self._writer: pa.ipc.RecordBatchStreamWriter | None = None

    def begin(self, schema: pa.Schema, at_start: bool) -> bytes:
        self._writer = pa.ipc.new_stream(self._sink, schema)
        return self._sink.take()

    def write(self, table: pa.Table) -> bytes:
        if self._writer is None:
            raise RuntimeError("ArrowStreamWriter: begin() first")
        if table.num_rows == 0:
            return b""
        self._writer.write_table(table)
        return self._sink.take()

    def end(self) -> bytes:
        if self._writer is None:
            return b""
        self._writer.close()
        return self._sink.take()


def writer(output: str) -> TableWriter:
    """A fresh writer for the ``output`` parameter's value."""
    return {"csv": CsvWriter, "jsonl": JsonLinesWriter, "arrow": ArrowStreamWriter}[output]()
