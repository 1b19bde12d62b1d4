"""``parquet_select``: the columns and rows of a Parquet object that a query needs (GET).

Parquet is not a stream of records: its footer says where each row group's
column chunks lie and what values they hold (min, max, null count). So this
filter does not read the object; it plans what to read, and the data path
(``iostack.swift_middleware.select.parquet``) fetches exactly that, by
byte ranges, on the object server that holds the object (``ON OBJECT``,
the default) or through the proxy:

1. the footer (one suffix range; a second one when the metadata is larger
   than ``FOOTER_PROBE``);
2. ``plan``: the row groups whose first byte lies in the request's byte
   range (so splits of an object at any offsets read each row group once),
   less those whose statistics prove that no row satisfies the predicate,
   and for each the byte ranges of the needed column chunks only (the
   projection's and the predicate's columns); done by ``plan_footer`` in
   ``parquet_decode``'s bounded child (crafted footers abort pyarrow), which
   answers a plain JSON plan, unless ``parquet_decode_in_child = false``;
3. ``read_row_group``: those chunks decoded by pyarrow, the predicate
   applied row by row (``csv_where.typed_row_mask``), the answer written
   (``iostack.filters.output``).

Parameters: ``columns`` (top-level columns, comma-separated; default all),
``where`` (``csv_select``'s predicate language, on typed values: nulls are
NULL, numbers compare numerically, strings in byte order; booleans, dates
and times by their ISO text), ``output`` (``csv`` default, ``jsonl``,
``arrow``). With CSV output, the header line is sent when the range starts
at byte 0.

Tenant Parquet is hostile until proved otherwise (MinIO disables Parquet
select because crafted files crashed it). ``ParquetLimits`` bounds the work
one object can cause: footer size, row groups, leaf columns, the memory one
row group's read columns may take (from the metadata's uncompressed sizes
row counts and compressed sizes, checked before reading), and the time one answer may take
(checked between row groups). A file that breaks a limit, or that is not
Parquet, truncated or corrupt, is a ``FilterError`` naming what is wrong;
the data path answers ``422`` naming the object (or cuts a started answer).
"""

from __future__ import annotations

import base64
import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from iostack.filters.base import FilterContext, FilterSpec
from iostack.filters.builtin.json_select import check_projection, check_typed_terms, column_refs
from iostack.filters.csv_where import Term, parse_predicate, typed_row_mask
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.output import selection_metadata, writer

METADATA = selection_metadata(
    "parquet_select",
    "Storage-side Parquet selection: reads only the needed column chunks of the row "
    "groups whose statistics may match the predicate, by byte ranges.",
    columns="top-level columns to keep, comma-separated (default: all)",
)

MAGIC = b"PAR1"
FOOTER_PROBE = 64 * 1024  # bytes of the object's end fetched first: most footers fit
_TAIL = struct.Struct("<I4s")  # metadata length, magic
_KNOWN_SHOWN = 20
# Bytes per value a decoded column may take beyond its uncompressed pages
# (an all-null int64 column is 8 bytes a row however well it compresses).
_BYTES_PER_VALUE = 9


@dataclass(frozen=True)
class ParquetLimits:
    """What one Parquet object may make a server do (``parquet_*`` in the middlewares'
    configuration)."""

    max_footer: int = 8 << 20  # bytes of footer metadata
    max_row_groups: int = 100_000
    max_columns: int = 10_000  # leaf columns in the schema
    max_memory: int = 512 << 20  # bytes one row group's read columns may decode to
    time_limit: float = 300.0  # seconds per answer
    decode_in_child: bool = True  # plan and decode in a bounded child (false: the worker exposed)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> ParquetLimits:
        default = cls()
        return cls(
            max_footer=int(conf.get("parquet_max_footer", default.max_footer)),
            max_row_groups=int(conf.get("parquet_max_row_groups", default.max_row_groups)),
            max_columns=int(conf.get("parquet_max_columns", default.max_columns)),
            max_memory=int(conf.get("parquet_max_memory", default.max_memory)),
            time_limit=float(conf.get("parquet_time_limit", default.time_limit)),
            decode_in_child=str(conf.get("parquet_decode_in_child", default.decode_in_child)
                                ).lower() in ("true", "1", "yes", "on"),
        )


def footer_length(tail: bytes, size: int, limits: ParquetLimits) -> int:
    """How many bytes at the object's end hold its footer (metadata, length, magic)."""
    if size < 12 or len(tail) < 8:
        raise FilterError(f"not a Parquet file ({size} bytes)")
    length, magic = _TAIL.unpack(tail[-8:])
    if magic != MAGIC:
        raise FilterError("not a Parquet file (no PAR1 at its end)")
    if length > limits.max_footer:
        raise FilterError(f"its footer metadata ({length} bytes) is larger than the "
                          f"parquet_max_footer limit ({limits.max_footer})")
    if length + 12 > size:
        raise FilterError(f"its footer claims {length} bytes of a {size}-byte object")
    return length + 8


@dataclass(frozen=True)
class RowGroupRead:
    """One row group to read: its index and the byte ranges ``(offset, length)`` of
    the needed column chunks (adjacent ones merged)."""

    index: int
    ranges: tuple[tuple[int, int], ...]

    @property
    def nbytes(self) -> int:
        return sum(length for _, length in self.ranges)


class _Pieces(io.RawIOBase):
    """A read-only file of ``size`` bytes of which only ``pieces`` were fetched; a
    read elsewhere is an error (pyarrow then wanted bytes the plan did not name)."""

    def __init__(self, size: int, pieces: list[tuple[int, bytes]]) -> None:
        self.size = size
        self.pieces = pieces
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self.pos = {0: 0, 1: self.pos, 2: self.size}[whence] + offset
        return self.pos

    def readinto(self, target: Any) -> int:
        size = min(len(target), self.size - self.pos)
        if size <= 0:
            return 0
        for offset, piece in self.pieces:
            if offset <= self.pos and self.pos + size <= offset + len(piece):
                start = self.pos - offset
                target[:size] = piece[start:start + size]
                self.pos += size
                return size
        raise OSError(f"read of {size} bytes at {self.pos} outside the column chunks")


def chunk_start(chunk: Any) -> int:
    """Where a column chunk's pages begin (its dictionary page, if it has one)."""
    if chunk.has_dictionary_page and chunk.dictionary_page_offset:
        return min(chunk.dictionary_page_offset, chunk.data_page_offset)
    return chunk.data_page_offset


def row_group_start(group: Any) -> int:
    """A row group's first byte: the split whose byte range holds it reads the group."""
    return min((chunk_start(group.column(i)) for i in range(group.num_columns)), default=0)


def _may_match(term: Term, stats: Any, num_rows: int) -> bool:
    """Whether a row group with these column statistics may hold a row ``term`` keeps."""
    if stats is None:
        return True
    if term.op in ("IS NULL", "IS NOT NULL"):
        if not stats.has_null_count:
            return True
        return stats.null_count > 0 if term.op == "IS NULL" else stats.null_count < num_rows
    if not stats.has_min_max:
        return True
    low, high = stats.min, stats.max
    if term.numeric:
        usable = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (low, high))
    else:
        usable = isinstance(low, str) and isinstance(high, str)
    if not usable:
        return True  # compared by text or numeric parsing: no cheap bound
    values = term.values
    op = term.op
    if op in ("!=", "<>", "NOT IN") and isinstance(low, float):
        return True  # NaN is in no float statistics, yet NaN != 5 holds
    if op == "=":
        return low <= values[0] <= high
    if op in ("!=", "<>"):
        return not (low == high == values[0])
    if op == "<":
        return low < values[0]
    if op == "<=":
        return low <= values[0]
    if op == ">":
        return high > values[0]
    if op == ">=":
        return high >= values[0]
    if op == "IN":
        return any(low <= v <= high for v in values)
    if op == "NOT IN":
        return not (low == high and low in values)
    if op == "LIKE":
        prefix = str(values[0])
        return high >= prefix and (low <= prefix or low.startswith(prefix))
    return True


def _check(params: dict[str, Any]) -> None:
    check_projection("parquet_select", params)


class ParquetSelection:
    """One request's projection and predicate over one Parquet object."""

    skips_first_record = False
    needs_first_record = False
    random_access = True  # the data path reads the object by ranges for ``plan``

    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        del context
        self.refs = column_refs(params["columns"])
        self.terms = parse_predicate(params["where"]).terms
        self.writer = writer(params["output"])
        self.content_type = self.writer.content_type
        self.where = params["where"]
        self.metadata: pq.FileMetaData | None = None
        self.footer = b""
        self.size = 0
        self.schema = pa.schema([])  # of the columns read
        self._read: list[str] = []  # top-level columns read: output, then predicate ones
        self._output: list[str] = []

    def plan(self, footer: bytes, size: int, start: int, end: int | None,
             limits: ParquetLimits, planner: Planner | None = None) -> list[RowGroupRead]:
        """The row groups and column chunks to read for rows in groups starting in
        ``[start, end]``: planned here, or by ``planner`` (``parquet_decode``: in the
        bounded child, so that a crafted footer cannot abort this process).
        ``ParamError`` for unknown columns, ``FilterError`` for a file that is not
        Parquet or breaks a limit."""
        job = PlanJob(footer, size, start, end, self.refs, self.where)
        if planner is None:
            self.metadata = parse_footer(footer)
            answer = plan_footer(self.metadata, job, limits)
        else:
            answer = planner(job)
        self.footer, self.size = footer, size
        try:
            self._output, self._read = list(answer["output"]), list(answer["read"])
            self.schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(answer["schema"])))
            reads = [RowGroupRead(int(index), tuple((int(offset), int(length))
                                                    for offset, length in ranges))
                     for index, ranges in answer["reads"]]
        except (KeyError, TypeError, ValueError, pa.ArrowException) as exc:
            raise FilterError(f"the planner broke its protocol ({exc})") from None
        _check_reads(reads, size - len(footer), limits)
        return reads

    def begin(self, first_record: bytes | None, at_start: bool) -> bytes:
        return self.writer.begin(pa.schema([self.schema.field(n) for n in self._output]),
                                 at_start)

    def read_row_group(self, group: RowGroupRead, pieces: list[tuple[int, bytes]],
                       decode: Decoder | None = None) -> bytes:
        """The answer's bytes for one planned row group, from its fetched chunks:
        decoded here, or by ``decode`` (``iostack.filters.builtin.parquet_decode``: in a
        bounded child process)."""
        if decode is None:
            table = decode_row_group(self.metadata, self.size, group.index, pieces,
                                     self._read, self.terms)
        else:
            table = decode(DecodeJob(self.footer, self.size, group.index, pieces,
                                     self._read, self.where))
        return self.writer.write(table.select(self._output))

    def select(self, block: bytes) -> bytes:
        raise FilterError("parquet_select reads by ranges, not by records")

    def end(self) -> bytes:
        return self.writer.end()


@dataclass(frozen=True)
class PlanJob:
    """One answer's footer and request, as plain data a child process can be sent."""

    footer: bytes
    size: int
    start: int
    end: int | None
    refs: list[str]  # the projection's columns
    where: str


Planner = Callable[[PlanJob], dict[str, Any]]


def parse_footer(footer: bytes) -> pq.FileMetaData:
    """The footer's metadata; ``FilterError`` for what is not Parquet metadata."""
    try:
        metadata = pq.read_metadata(pa.BufferReader(footer))
        metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise FilterError(f"its footer is not Parquet metadata: "
                          f"{str(exc).splitlines()[0]}") from None
    return metadata


def plan_footer(metadata: pq.FileMetaData, job: PlanJob,
                limits: ParquetLimits) -> dict[str, Any]:
    """``ParquetSelection.plan``'s answer as JSON-able data: the row groups to read
    (``reads``: index and ranges), the ``output`` and ``read`` columns and the read
    columns' Arrow ``schema`` (base64 IPC). Touches the tenant's metadata: in the
    bounded child unless ``parquet_decode_in_child = false``."""
    schema = metadata.schema.to_arrow_schema()
    if metadata.num_columns > limits.max_columns:
        raise FilterError(f"{metadata.num_columns} columns, over the parquet_max_columns "
                          f"limit ({limits.max_columns})")
    if metadata.num_row_groups > limits.max_row_groups:
        raise FilterError(f"{metadata.num_row_groups} row groups, over the "
                          f"parquet_max_row_groups limit ({limits.max_row_groups})")
    terms = parse_predicate(job.where).terms
    names = schema.names
    for ref in job.refs + [t.column for t in terms]:
        if ref not in names:
            shown = ", ".join(names[:_KNOWN_SHOWN]) + (", ..." if len(names) > _KNOWN_SHOWN
                                                       else "")
            param = "columns" if ref in job.refs else "where"
            raise ParamError("parquet_select", param, f"no column {ref!r} (columns: {shown})")
    output = job.refs or names
    read = list(dict.fromkeys(output + [t.column for t in terms]))
    read_schema = pa.schema([schema.field(n) for n in read])
    check_typed_terms("parquet_select", terms, read_schema)
    data_end = job.size - len(job.footer)
    reads = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        chunks = [group.column(i) for i in range(group.num_columns)]
        starts = [chunk_start(c) for c in chunks]
        first = row_group_start(group)
        if first < job.start or (job.end is not None and first > job.end):
            continue  # another split's row group
        top = [c.path_in_schema.split(".")[0] for c in chunks]
        if not all(_may_match(t, chunks[top.index(t.column)].statistics, group.num_rows)
                   for t in terms if top.count(t.column) == 1):
            continue  # its statistics rule every row out
        needed = [i for i, name in enumerate(top) if name in read]
        ranges = []
        for i in needed:
            offset, length = starts[i], chunks[i].total_compressed_size
            if offset < 4 or length < 0 or offset + length > data_end:
                raise FilterError(f"row group {index}: column chunk "
                                  f"{chunks[i].path_in_schema!r} lies outside the file")
            ranges.append((offset, length))
        # The fetched chunks, their pages decoded, and the values.
        memory = sum(chunks[i].total_compressed_size + chunks[i].total_uncompressed_size
                     for i in needed) + _BYTES_PER_VALUE * group.num_rows * len(needed)
        if memory > limits.max_memory:
            raise FilterError(f"row group {index} would take {memory} bytes to decode, "
                              f"over the parquet_max_memory limit ({limits.max_memory})")
        reads.append([index, [list(r) for r in _merged(ranges)]])
    return {"reads": reads, "output": output, "read": read,
            "schema": base64.b64encode(read_schema.serialize().to_pybytes()).decode()}


@dataclass(frozen=True)
class DecodeJob:
    """One row group to decode, as plain data a child process can be sent."""

    footer: bytes
    size: int
    index: int
    pieces: list[tuple[int, bytes]]
    columns: list[str]  # read: output and predicate columns
    where: str


Decoder = Callable[[DecodeJob], pa.Table]


class OverMemory(FilterError):
    """Decoding a row group ran out of the memory it may use."""


def decode_row_group(metadata: pq.FileMetaData, size: int, index: int,
                     pieces: list[tuple[int, bytes]], columns: list[str],
                     terms: list[Term]) -> pa.Table:
    """Row group ``index``'s rows that ``terms`` keep, in ``columns``, from the fetched
    column chunks ``pieces``; ``FilterError`` for what pyarrow cannot decode."""
    try:
        source = pq.ParquetFile(_Pieces(size, pieces), metadata=metadata, pre_buffer=False)
        table = source.read_row_group(index, columns=columns)
        mask = typed_row_mask(terms, {t.column: table[t.column] for t in terms})
    except MemoryError:  # pyarrow's ArrowMemoryError too: the decoder's cap, in a child
        raise OverMemory(f"row group {index}: decoding it needed more memory than the "
                         f"parquet_max_memory limit allows") from None
    except (pa.ArrowException, OSError, ValueError, TypeError) as exc:
        raise FilterError(f"row group {index}: {str(exc).splitlines()[0]}") from None
    if mask is not None:
        table = table.filter(mask, null_selection_behavior="drop")
    return table


def _check_reads(reads: list[RowGroupRead], data_end: int, limits: ParquetLimits) -> None:
    """``FilterError`` for a plan that reads outside the data or more than the memory
    limit: the child that planned it parsed the tenant's bytes, so it is checked too."""
    for read in reads:
        if any(offset < 4 or length < 0 or offset + length > data_end
               for offset, length in read.ranges) or read.nbytes > limits.max_memory:
            raise FilterError(f"row group {read.index}: the plan reads outside the file "
                              f"or over the parquet_max_memory limit")


def _merged(ranges: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for offset, length in sorted(ranges):
        if out and offset <= out[-1][0] + out[-1][1]:
            last_offset, last_length = out[-1]
            out[-1] = (last_offset, max(last_length, offset + length - last_offset))
        else:
            out.append((offset, length))
    return tuple(out)


SPEC = FilterSpec(METADATA, make_selection=ParquetSelection, check_params=_check)
