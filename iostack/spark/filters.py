"""Spark's pushed filters as ``csv_select`` predicates, and their local evaluation.

``translate(filters, kinds)`` splits the filters Spark offers a reader
(``pyspark.sql.datasource.EqualTo`` and friends, ANDed) into the ones the
storage side can evaluate with *exactly* Spark's result, as ``Term`` values,
and the rest, which Spark keeps evaluating after the scan. ``where_text``
renders terms in the ``csv_select`` predicate language
(``iostack/filters/csv_where.py``); ``row_mask`` evaluates the same terms on
typed Arrow columns with Spark's semantics (the ``pushdown=false`` baseline,
and the re-check of terms on non-string columns after a storage-side
selection).

The storage side compares raw CSV fields: a number literal numerically
(fields that are not numbers never match), a string literal in byte order,
and an empty field is NULL. Spark compares the values its CSV reader parsed
(unparseable: NULL). What is pushed, by column kind:

- ``string``: ``= != < <= > >=``, ``IN``, ``NOT IN``, ``IS [NOT] NULL``,
  ``StringStartsWith`` (as ``LIKE 'prefix%'``, unless the prefix holds ``%``:
  the storage side's LIKE only takes one trailing ``%``). Exact.
- integers (``byte short int long``): comparisons, ``IN``, ``NOT IN`` with
  integer literals (for ``long`` only ``|v| < 2**53``, where float64
  comparison is exact), ``IS NOT NULL``. The storage side may keep a few rows
  Spark would not (a field ``1e3`` is a number to it but NULL to Spark's
  integer parser), never fewer, so these terms are re-checked on the parsed
  values. ``IS NULL`` is not pushed: Spark's NULL also covers unparseable
  fields, which the storage side does not see as NULL.
- ``double``: like integers with finite int/float literals. Caveat: fields
  Spark's (Java's) parser accepts but which are not plain numbers - ``NaN``,
  ``Infinity``, ``Inf``, numbers padded with spaces or with a ``d``/``f``
  suffix - never match at the storage side; set the reader option
  ``push_double=false`` for data holding such fields.
- ``float``, ``boolean``: only ``IS NOT NULL`` (float32 rounding and
  ``TRUE``/``True`` spellings have no exact storage-side equivalent).

``Not`` of a comparison, ``In``, ``IsNull`` or ``IsNotNull`` is pushed as
the opposite term (SQL's three-valued logic keeps NULL rows out of both).
Never pushed: ``EqualNullSafe``, ``StringEndsWith``, ``StringContains``,
``Not`` of anything else, nested columns, literals of another type than the
column's, NULL literals, and strings or column names with characters other
than printable ASCII (they travel in HTTP headers, which are Latin-1 at the
proxy).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

# Column kinds (from Spark types, see ``datasource.column_kind``).
STRING = "string"
INTEGER_KINDS = frozenset({"byte", "short", "int", "long"})
DOUBLE = "double"

_COMPARISON_OPS: dict[type, str] = {
    EqualTo: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
_NEGATED_OPS = {"=": "!=", ">": "<=", ">=": "<", "<": ">=", "<=": ">",
                "!=": "=", "IN": "NOT IN", "NOT IN": "IN",
                "IS NULL": "IS NOT NULL", "IS NOT NULL": "IS NULL"}
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_KEYWORDS = frozenset({"AND", "IN", "IS", "NOT", "NULL", "LIKE"})
_PRINTABLE = re.compile(r"[\x20-\x7e]*\Z")
_EXACT_FLOAT_INT = 2 ** 53


@dataclass(frozen=True)
class Term:
    """One pushed condition: ``op`` is ``= != < <= > >=``, ``IN``, ``NOT IN``,
    ``IS NULL``, ``IS NOT NULL`` or ``LIKE`` (``values[0]`` is then the prefix)."""

    column: str
    op: str
    values: tuple[Any, ...] = ()


def printable(text: str) -> bool:
    """Whether ``text`` can travel in an HTTP header unchanged (printable ASCII)."""
    return bool(_PRINTABLE.match(text))


def quote_column(name: str) -> str:
    """A column reference of the predicate language: bare when it can be, else ``"quoted"``."""
    if _IDENTIFIER.match(name) and name.upper() not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def quote_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _number(value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _literal_ok(kind: str, value: Any, push_double: bool) -> bool:
    """Whether ``value`` can be pushed as a literal compared with a column of ``kind``."""
    if kind == STRING:
        return isinstance(value, str) and printable(value)
    if isinstance(value, bool):
        return False
    if kind in INTEGER_KINDS:
        return isinstance(value, int) and (kind != "long" or abs(value) < _EXACT_FLOAT_INT)
    if kind == DOUBLE and push_double:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return False


def _lookup(attribute: Sequence[str], kinds: Mapping[str, str]) -> str | None:
    if len(attribute) != 1:
        return None  # a nested field
    name = attribute[0]
    if name in kinds:
        return name
    folded = [k for k in kinds if k.lower() == name.lower()]
    return folded[0] if len(folded) == 1 else None


def _raw_term(flt: Filter, kinds: Mapping[str, str], push_double: bool) -> Term | None:
    """The term with ``flt``'s meaning, or None; whether the storage side evaluates it
    exactly for the column's kind is ``_allowed``'s to say."""
    if isinstance(flt, Not):
        inner = _raw_term(flt.child, kinds, push_double)
        if inner is None or inner.op not in _NEGATED_OPS:
            return None
        return Term(inner.column, _NEGATED_OPS[inner.op], inner.values)
    attribute = getattr(flt, "attribute", None)
    if attribute is None:
        return None
    column = _lookup(attribute, kinds)
    if column is None or not printable(column):
        return None
    kind = kinds[column]
    if type(flt) in _COMPARISON_OPS:
        if _literal_ok(kind, flt.value, push_double):
            return Term(column, _COMPARISON_OPS[type(flt)], (flt.value,))
    elif isinstance(flt, In):
        values = tuple(flt.value)
        if values and all(_literal_ok(kind, v, push_double) for v in values):
            return Term(column, "IN", values)
    elif isinstance(flt, IsNull):
        return Term(column, "IS NULL")
    elif isinstance(flt, IsNotNull):
        return Term(column, "IS NOT NULL")
    elif isinstance(flt, StringStartsWith):
        if kind == STRING and _literal_ok(kind, flt.value, push_double) and "%" not in flt.value:
            return Term(column, "LIKE", (flt.value,))
    return None


def _term(flt: Filter, kinds: Mapping[str, str], push_double: bool) -> Term | None:
    """The term that is exactly ``flt`` for Spark, or None when there is none."""
    term = _raw_term(flt, kinds, push_double)
    if term is None or not _allowed(term, kinds[term.column]):
        return None
    return term


def _allowed(term: Term, kind: str) -> bool:
    if kind == STRING:
        return True
    if term.op == "IS NOT NULL":
        return True
    if term.op in ("IS NULL", "LIKE"):
        return False  # NULL also means "unparseable" to Spark; LIKE is for strings
    return kind in INTEGER_KINDS or kind == DOUBLE


def translate(filters: Iterable[Filter], kinds: Mapping[str, str], *,
              push_double: bool = True) -> tuple[list[Term], list[Filter]]:
    """``(pushed terms, filters left to Spark)``: the terms hold exactly where the
    pushed filters do; every filter left is one of ``filters`` (by reference)."""
    pushed: list[Term] = []
    left: list[Filter] = []
    for flt in filters:
        term = _term(flt, kinds, push_double)
        if term is None:
            left.append(flt)
        else:
            pushed.append(term)
    return pushed, left


def term_text(term: Term, column_ref: str | None = None) -> str:
    """One term in the predicate language; ``column_ref`` overrides the column's name
    (``_c3`` for an object without a header)."""
    col = quote_column(column_ref if column_ref is not None else term.column)
    if term.op in ("IS NULL", "IS NOT NULL"):
        return f"{col} {term.op}"
    if term.op == "LIKE":
        return f"{col} LIKE {quote_string(term.values[0] + '%')}"
    rendered = [quote_string(v) if isinstance(v, str) else _number(v) for v in term.values]
    if term.op in ("IN", "NOT IN"):
        return f"{col} {term.op} ({', '.join(rendered)})"
    return f"{col} {term.op} {rendered[0]}"


def where_text(terms: Iterable[Term], column_refs: Mapping[str, str] | None = None) -> str:
    """The ``X-Iostack-Param-Where`` value for ``terms`` (empty: no predicate)."""
    refs = column_refs or {}
    return " AND ".join(term_text(t, refs.get(t.column)) for t in terms)


# -- local evaluation, with Spark's semantics, on typed Arrow columns -----------------

def _pc() -> Any:
    import pyarrow.compute as pc

    return pc


def _comparable(column: Any, kind: str) -> tuple[Any, Any]:
    """The column and the Arrow type its literals take."""
    import pyarrow as pa

    if kind == STRING:
        return column, pa.string()
    if kind in INTEGER_KINDS:
        return _pc().cast(column, pa.int64()), pa.int64()
    return _pc().cast(column, pa.float64()), pa.float64()


_FUNCTIONS = {"=": "equal", "!=": "not_equal", "<": "less", "<=": "less_equal",
              ">": "greater", ">=": "greater_equal"}


def term_mask(term: Term, column: Any, kind: str) -> Any:
    """The rows of ``column`` (a typed Arrow array) ``term`` holds for (null or false: no)."""
    import pyarrow as pa

    pc = _pc()
    if term.op == "IS NULL":
        return pc.is_null(column)
    if term.op == "IS NOT NULL":
        return pc.is_valid(column)
    if term.op == "LIKE":
        return pc.starts_with(column, pattern=term.values[0])
    values, value_type = _comparable(column, kind)
    if term.op in ("IN", "NOT IN"):
        found = pc.is_in(values, value_set=pa.array(term.values, value_type))
        if term.op == "NOT IN":
            found = pc.invert(found)
        return pc.and_(found, pc.is_valid(values))
    return getattr(pc, _FUNCTIONS[term.op])(values, pa.scalar(term.values[0], value_type))


def row_mask(terms: Iterable[Term], columns: Mapping[str, Any],
             kinds: Mapping[str, str]) -> Any | None:
    """The rows every term holds for, or None without terms; ``columns`` maps a term's
    column to its typed Arrow array."""
    pc = _pc()
    mask = None
    for term in terms:
        this = term_mask(term, columns[term.column], kinds[term.column])
        mask = this if mask is None else pc.and_kleene(mask, this)
    return mask
