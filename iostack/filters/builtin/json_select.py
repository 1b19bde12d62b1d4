"""``json_select``: the fields and records of a JSON Lines object that a query needs (GET).

One JSON object per line, as Spark's JSON reader (without ``multiLine``) and
most log shippers write them. Parameters:

- ``columns``: comma-separated top-level field names, in the order wanted;
  empty (default) keeps the fields of the object's first record.
- ``where``: a predicate on top-level fields, in ``csv_select``'s language
  (``iostack.filters.csv_where``, evaluated on typed values: a missing field
  or ``null`` is NULL, numbers compare as numbers).
- ``output``: ``csv`` (default), ``jsonl`` or ``arrow`` (``iostack.filters.output``).

The object's first record fixes each field's type, so that every answer,
including a byte-range split's, has the same schema; a field absent or null
there takes its type from the answer's first block of records (a string if
it is null there too). A later value that does not convert to that type
(text in a numeric field) makes the object unreadable for the selection:
``422`` before the first selected byte, a cut answer after. Byte ranges select the
records that start in them (``iostack.filters.records``). Parsing and
filtering are pyarrow's (vectorized C++); a record nested deeper than
``json_depth.MAX_DEPTH`` levels is refused before pyarrow sees it
(``iostack.filters.builtin.json_depth``).
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

from iostack.filters.base import FilterContext, FilterSpec
from iostack.filters.builtin.json_depth import check_depth
from iostack.filters.csv_where import WhereError, parse_predicate, typed_row_mask
from iostack.filters.errors import FilterError, ParamError
from iostack.filters.output import selection_metadata, writer

METADATA = selection_metadata(
    "json_select",
    "Storage-side JSON Lines selection for analytics: keeps the named top-level fields "
    "and the records a predicate holds for; byte ranges select whole records.",
    columns="top-level fields to keep, comma-separated (default: all)",
    record="record",
)


def column_refs(text: str) -> list[str]:
    return [ref.strip() for ref in text.split(",")] if text.strip() else []


def check_projection(filter_name: str, params: dict[str, Any]) -> None:
    """The ``columns`` and ``where`` checks every typed record filter shares."""
    try:
        parse_predicate(params["where"])
    except WhereError as exc:
        raise ParamError(filter_name, "where", str(exc)) from None
    if any(not ref for ref in column_refs(params["columns"])):
        raise ParamError(filter_name, "columns", "an empty column name")


def check_typed_terms(filter_name: str, terms: Any, schema: pa.Schema) -> None:
    """``ParamError`` for a term that cannot be evaluated on ``schema``'s columns
    (a string comparison on a nested field), before any byte is answered."""
    try:
        typed_row_mask(terms, {f.name: pa.array([], f.type) for f in schema})
    except TypeError as exc:
        raise ParamError(filter_name, "where", str(exc)) from None


def _check(params: dict[str, Any]) -> None:
    check_projection("json_select", params)


def _read(data: bytes) -> pa.Table:
    check_depth(data)  # pyarrow's reader recurses per level: a deep record crashes it
    try:
        return pa_json.read_json(io.BytesIO(data), read_options=pa_json.ReadOptions(
            use_threads=False, block_size=max(len(data), 1 << 20)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise FilterError(f"not JSON Lines: {str(exc).splitlines()[0]}") from None


class JsonSelection:
    """One request's projection and predicate; the first record fixes the schema."""

    skips_first_record = False  # the first record is data
    needs_first_record = True  # and it gives the schema, for a range too
    random_access = False

    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        del context
        self.refs = column_refs(params["columns"])
        self.terms = parse_predicate(params["where"]).terms
        self.writer = writer(params["output"])
        self.content_type = self.writer.content_type
        self._schema = pa.schema([])  # of the fields read: output and predicate ones
        self._output: list[str] = []
        self._at_start = True
        self._begun = False

    def begin(self, first_record: bytes | None, at_start: bool) -> bytes:
        first = _read(first_record) if first_record and first_record.strip() else pa.table({})
        names = self.refs or first.schema.names
        needed = list(dict.fromkeys(names + [t.column for t in self.terms]))
        fields = []
        for name in needed:
            index = first.schema.get_field_index(name)
            fields.append(pa.field(name, first.schema.field(index).type if index >= 0
                                   else pa.null()))
        self._schema = pa.schema(fields)
        self._output = names
        self._at_start = at_start
        check_typed_terms("json_select", self.terms, self._fixed(None))
        if any(pa.types.is_null(f.type) for f in self._schema):
            return b""  # the first block gives those fields their types
        return self._start()

    def _fixed(self, table: pa.Table | None) -> pa.Schema:
        """The schema with the fields still untyped (absent or null in the first record)
        typed as in ``table``, or as strings."""
        fields = []
        for field in self._schema:
            if pa.types.is_null(field.type):
                index = -1 if table is None else table.schema.get_field_index(field.name)
                kind = table.schema.field(index).type if index >= 0 else pa.null()
                field = field.with_type(pa.string() if pa.types.is_null(kind) else kind)
            fields.append(field)
        return pa.schema(fields)

    def _start(self) -> bytes:
        self._begun = True
        return self.writer.begin(pa.schema([self._schema.field(n) for n in self._output]),
                                 self._at_start)

    def select(self, block: bytes) -> bytes:
        table = _read(block)
        prefix = b""
        if not self._begun:
            self._schema = self._fixed(table)
            check_typed_terms("json_select", self.terms, self._schema)
            prefix = self._start()
        columns = {}
        for field in self._schema:
            index = table.schema.get_field_index(field.name)
            if index < 0:
                columns[field.name] = pa.nulls(table.num_rows, field.type)
                continue
            column = table.column(index)
            try:
                columns[field.name] = column if column.type == field.type else column.cast(
                    field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise FilterError(f"field {field.name!r} holds {column.type} values where "
                                  f"earlier records had {field.type}") from None
        typed = pa.table(columns, schema=self._schema)
        mask = typed_row_mask(self.terms, columns)
        if mask is not None:
            typed = typed.filter(mask, null_selection_behavior="drop")
        return prefix + self.writer.write(typed.select(self._output))

    def end(self) -> bytes:
        if not self._begun:  # no block: the untyped fields are strings
            self._schema = self._fixed(None)
            return self._start() + self.writer.end()
        return self.writer.end()


SPEC = FilterSpec(METADATA, make_selection=JsonSelection, check_params=_check)
