"""Text and Arrow: CSV records to Arrow batches, string columns to the read schema's
types with Spark's CSV parsing rules, and Arrow types to Spark's."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
)

from iostack.filters.records import prepend
from iostack.spark.filters import INTEGER_KINDS, STRING

READ_BUFFER = 1 << 20  # bytes buffered for pyarrow's CSV reader
CSV_BLOCK = 1 << 22  # pyarrow block: a record must fit in one

_KINDS: list[tuple[type, str, Any]] = [
    (StringType, STRING, pa.string()),
    (ByteType, "byte", pa.int8()),
    (ShortType, "short", pa.int16()),
    (IntegerType, "int", pa.int32()),
    (LongType, "long", pa.int64()),
    (FloatType, "float", pa.float32()),
    (DoubleType, "double", pa.float64()),
    (BooleanType, "boolean", pa.bool_()),
]
_INT_DIGITS = {"byte": 3, "short": 5, "int": 10, "long": 19}
_INT_RANGE = {"byte": (-(2 ** 7), 2 ** 7 - 1), "short": (-(2 ** 15), 2 ** 15 - 1),
              "int": (-(2 ** 31), 2 ** 31 - 1), "long": (-(2 ** 63), 2 ** 63 - 1)}


# Java's Double.parseDouble: trimmed of chars <= ' ', NaN, Infinity, d/f suffixes
# (hexadecimal floats are not recognized here); plus Spark's "Inf" and "-Inf".
_JAVA_FLOAT = (r"^[\x00-\x20]*[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[fFdD]?)"
               r"[\x00-\x20]*$")


def column_kind(data_type: DataType) -> str:
    """The conversion kind of a Spark type (ValueError for the unsupported ones)."""
    for spark_type, kind, _ in _KINDS:
        if isinstance(data_type, spark_type):
            return kind
    supported = ", ".join(t.typeName().upper() for t, _, _ in _KINDS)
    raise ValueError(f"iostack: column type {data_type.simpleString()} is not supported "
                     f"(one of: {supported})")


def arrow_type(kind: str) -> Any:
    return next(t for _, k, t in _KINDS if k == kind)


def _null(arrow: Any) -> Any:
    return pa.scalar(None, arrow)


def convert_column(values: Any, kind: str) -> Any:
    """CSV fields (an Arrow string array) as Spark's CSV reader reads them for ``kind``:
    empty and unparseable fields are null."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    empty = pc.equal(values, "")
    strings = pc.if_else(empty, _null(pa.string()), values)
    if kind == STRING:
        return strings
    if kind in INTEGER_KINDS:
        valid = pc.match_substring_regex(strings, r"^[+-]?[0-9]+$")
        unsigned = pc.replace_substring_regex(strings, r"^[+-]?0*", "")
        digits = pc.utf8_length(unsigned)
        limit = _INT_DIGITS[kind]
        # Under the digit count that may overflow: certainly in range; cast the rest via
        # decimal text comparison only for longs (int64 is the widest cast available).
        fits = pc.less(digits, limit)
        if kind == "long":
            negative = pc.starts_with(strings, "-")
            max_text = pc.if_else(negative, "9223372036854775808", "9223372036854775807")
            fits = pc.or_(fits, pc.and_(pc.equal(digits, limit),
                                        pc.less_equal(unsigned, max_text)))
        else:
            fits = pc.or_(fits, pc.equal(digits, limit))
        ok = pc.and_(valid, fits)
        text = pc.if_else(ok, pc.replace_substring_regex(strings, r"^\+", ""),
                          _null(pa.string()))
        numbers = pc.cast(text, pa.int64())
        if kind != "long":
            low, high = _INT_RANGE[kind]
            inside = pc.and_(pc.greater_equal(numbers, low), pc.less_equal(numbers, high))
            numbers = pc.if_else(inside, numbers, _null(pa.int64()))
        return pc.cast(numbers, arrow_type(kind))
    if kind in ("double", "float"):
        ok = pc.or_kleene(pc.match_substring_regex(strings, _JAVA_FLOAT),
                          pc.is_in(strings, value_set=pa.array(["Inf", "-Inf"])))
        text = pc.if_else(ok, strings, _null(pa.string()))
        text = pc.utf8_trim(text, characters="".join(chr(c) for c in range(0x21)))
        text = pc.replace_substring_regex(text, r"([0-9.])[fFdD]$", r"\1")
        text = pc.replace_substring_regex(text, r"^([+-]?)(Inf|Infinity)$", r"\1inf")
        text = pc.replace_substring_regex(text, r"^[+-]?NaN$", "nan")
        return pc.cast(text, arrow_type(kind))
    if kind == "boolean":
        lower = pc.utf8_lower(strings)
        known = pc.is_in(lower, value_set=pa.array(["true", "false"]))
        return pc.if_else(known, pc.equal(lower, "true"), _null(pa.bool_()))
    raise ValueError(f"iostack: no conversion for {kind!r}")


class _ChunkStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks (for pyarrow's streaming reader)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        while not self._buffer:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._buffer = chunk
        size = min(len(target), len(self._buffer))
        target[:size] = self._buffer[:size]
        self._buffer = self._buffer[size:]
        return size


def drop_first_line(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The bytes after the first ``\\n`` (nothing if there is none)."""
    for chunk in chunks:
        cut = chunk.find(b"\n")
        if cut >= 0:
            if cut + 1 < len(chunk):
                yield chunk[cut + 1:]
            yield from chunks
            return


def csv_batches(chunks: Iterator[bytes], n_fields: int) -> Iterator[pa.RecordBatch]:
    """CSV records (no header line) as batches of ``n_fields`` string columns
    ``c0``, ``c1``...; records with another field count are skipped."""
    it = iter(chunks)
    first = b""
    for chunk in it:
        if chunk.strip():
            first = chunk
            break
    if not first:
        return
    names = [f"c{i}" for i in range(n_fields)]
    reader = pa_csv.open_csv(
        io.BufferedReader(_ChunkStream(prepend(first, it)), READ_BUFFER),
        read_options=pa_csv.ReadOptions(column_names=names, use_threads=False,
                                        block_size=CSV_BLOCK),
        parse_options=pa_csv.ParseOptions(invalid_row_handler=lambda _row: "skip"),
        convert_options=pa_csv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                              strings_can_be_null=False,
                                              quoted_strings_can_be_null=False),
    )
    for batch in reader:
        if batch.num_rows:
            yield batch


def peek_line(chunks: Iterator[bytes]) -> tuple[bytes | None, Iterator[bytes]]:
    """The first line of a byte stream, and the stream unchanged."""
    seen: list[bytes] = []
    it = iter(chunks)
    for chunk in it:
        seen.append(chunk)
        if b"\n" in chunk:
            break
    data = b"".join(seen)
    if not data.strip():
        return None, iter(())
    return data.split(b"\n", 1)[0], prepend(data, it)


_SPARK_TYPES: list[tuple[Any, DataType]] = [
    (pa.types.is_boolean, BooleanType()), (pa.types.is_int8, ByteType()),
    (pa.types.is_int16, ShortType()), (pa.types.is_int32, IntegerType()),
    (pa.types.is_int64, LongType()), (pa.types.is_float32, FloatType()),
    (pa.types.is_float64, DoubleType()),
]


def spark_type(arrow: Any) -> DataType:
    """The Spark type the data source reads an Arrow type as (text: STRING)."""
    for test, spark in _SPARK_TYPES:
        if test(arrow):
            return spark
    if pa.types.is_string(arrow) or pa.types.is_large_string(arrow) or pa.types.is_null(arrow):
        return StringType()
    if pa.types.is_timestamp(arrow):
        return StringType()  # JSON text that looks like a time: Spark infers STRING too
    raise ValueError(f"iostack: a column of type {arrow} cannot be read (give a schema "
                     f"without it)")
