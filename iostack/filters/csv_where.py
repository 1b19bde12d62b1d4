"""The row predicates of the record filters: a small language, parsed by hand, run vectorized.

Grammar (keywords are case-insensitive)::

    where  := term (AND term)*
    term   := column op value
            | column [NOT] IN ( value [, value]* )
            | column IS [NOT] NULL
            | column LIKE 'prefix%'
    op     := =  !=  <>  <  <=  >  >=
    column := name | "quoted name" | _c<index>
    value  := 'string' | number

``''`` inside a string and ``""`` inside a quoted name stand for one quote.
A number literal compares numerically: fields that are not numbers never
match. A string literal compares as strings, in byte order. An empty field
is NULL, as in Spark's CSV reader: only ``IS NULL`` matches it. ``LIKE``
takes a prefix only (one ``%``, at the end).

Nothing here is evaluated as code: the parser builds ``Term`` values and
``row_mask`` turns them into pyarrow compute calls over a batch of string
columns (``csv_select``); ``typed_row_mask`` does the same over typed columns
(``json_select``, ``parquet_select``), where NULL is a real null.

A predicate is tenant input (``X-Iostack-Param-Where``), so the work it can
cause is bounded: at most ``MAX_WHERE_BYTES`` bytes (UTF-8), ``MAX_TERMS``
terms and ``MAX_IN_VALUES`` values per ``IN`` list, each cap a ``WhereError``
naming it; tokenizing and parsing take time linear in the text (no regex
backtracking, no rescans of the rest of the text). ``parse_predicate`` returns
an immutable ``Predicate`` that a request can hold and pass along; it keeps
the last ``PARSE_CACHE_SIZE`` parses, so the parameter check and the selection
built from the same text parse it once.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

COMPARISONS = {"=": "equal", "!=": "not_equal", "<>": "not_equal", "<": "less",
               "<=": "less_equal", ">": "greater", ">=": "greater_equal"}
# Unambiguous (digits before a point cannot also be digits after it), so a
# long run of digits is matched once, never re-split.
NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_NUMBER_FIELD = f"^{NUMBER}$"  # RE2 syntax, run by pyarrow
# Atomic and possessive groups: a token that fails its lookahead or its closing
# quote is given up at once instead of being retried at every shorter length
# (``1111...1a`` cost quadratic time, 4 s for 8 KB, before they were).
_TOKEN = re.compile(
    rf"""(?:
        (?P<number>(?>{NUMBER}))(?![\w.])
      | (?P<string>'(?:[^']++|'')*+')
      | (?P<quoted>"(?:[^"]++|"")*+")
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*+)
      | (?P<op><=|>=|!=|<>|=|<|>)
      | (?P<punct>[(),])
    )""",
    re.VERBOSE,
)
_SPACE = re.compile(r"\s*+")
MAX_WHERE_BYTES = 4096
MAX_TERMS = 64
MAX_IN_VALUES = 1000
PARSE_CACHE_SIZE = 256


class WhereError(ValueError):
    """A predicate that does not parse; ``position`` is the 1-based column in the text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at column {position}")
        self.position = position


Value = str | float


@dataclass(frozen=True)
class Term:
    """One condition on one column: ``op`` is a COMPARISONS key, IN, NOT IN,
    IS NULL, IS NOT NULL or LIKE; ``values`` holds its literal(s)."""

    column: str
    op: str
    values: tuple[Value, ...] = ()

    @property
    def numeric(self) -> bool:
        return any(isinstance(v, float) for v in self.values)


@dataclass
class _Token:
    kind: str
    text: str
    position: int


def _tokens(text: str) -> list[_Token]:
    tokens, pos = [], _SPACE.match(text).end()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if not match:
            raise WhereError(f"unexpected {text[pos]!r}", pos + 1)
        kind = match.lastgroup or ""
        tokens.append(_Token(kind, match.group(kind), pos + 1))
        pos = _SPACE.match(text, match.end()).end()
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokens(text)
        self.index = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def fail(self, expected: str) -> WhereError:
        token = self.peek()
        if token is None:
            return WhereError(f"expected {expected}, found the end", len(self.text) + 1)
        return WhereError(f"expected {expected}, found {token.text!r}", token.position)

    def take(self, kind: str, expected: str) -> _Token:
        token = self.peek()
        if token is None or token.kind != kind:
            raise self.fail(expected)
        self.index += 1
        return token

    def keyword(self, *words: str) -> str | None:
        token = self.peek()
        if token is not None and token.kind == "word" and token.text.upper() in words:
            self.index += 1
            return token.text.upper()
        return None

    def punct(self, char: str) -> bool:
        token = self.peek()
        if token is not None and token.kind == "punct" and token.text == char:
            self.index += 1
            return True
        return False

    def parse(self) -> list[Term]:
        terms = [self.term()]
        while self.keyword("AND"):
            terms.append(self.term())
            if len(terms) > MAX_TERMS:
                raise WhereError(f"more than {MAX_TERMS} terms (MAX_TERMS, the cap on a predicate)",
                                 self.tokens[self.index - 1].position)
        if self.peek() is not None:
            raise self.fail("AND or the end")
        return terms

    def column(self) -> str:
        token = self.peek()
        if token is not None and token.kind == "quoted":
            self.index += 1
            return token.text[1:-1].replace('""', '"')
        if token is not None and token.kind == "word" and token.text.upper() not in (
                "AND", "IN", "IS", "NOT", "NULL", "LIKE"):
            self.index += 1
            return token.text
        raise self.fail("a column name")

    def value(self) -> Value:
        token = self.peek()
        if token is not None and token.kind == "string":
            self.index += 1
            return token.text[1:-1].replace("''", "'")
        if token is not None and token.kind == "number":
            self.index += 1
            return float(token.text)
        raise self.fail("a 'string' or a number")

    def term(self) -> Term:
        column = self.column()
        token = self.peek()
        if token is not None and token.kind == "op":
            self.index += 1
            return Term(column, token.text, (self.value(),))
        if self.keyword("IS"):
            negated = self.keyword("NOT")
            if not self.keyword("NULL"):
                raise self.fail("NULL")
            return Term(column, "IS NOT NULL" if negated else "IS NULL")
        if self.keyword("LIKE"):
            start = self.peek()
            pattern = self.value()
            if (not isinstance(pattern, str) or not pattern.endswith("%")
                    or "%" in pattern[:-1]):
                raise WhereError("LIKE takes a prefix: 'text%' (one %, at the end)",
                                 start.position if start else len(self.text) + 1)
            return Term(column, "LIKE", (pattern[:-1],))
        negated = self.keyword("NOT")
        if self.keyword("IN"):
            return Term(column, "NOT IN" if negated else "IN", self.in_list())
        raise self.fail("an operator (=, !=, <, <=, >, >=, IN, NOT IN, IS [NOT] NULL, LIKE)")

    def in_list(self) -> tuple[Value, ...]:
        if not self.punct("("):
            raise self.fail("(")
        start = self.peek()
        values = [self.value()]
        while self.punct(","):
            values.append(self.value())
        if not self.punct(")"):
            raise self.fail(", or )")
        if len({type(v) for v in values}) > 1:
            raise WhereError("IN mixes strings and numbers", start.position if start else 1)
        if len(values) > MAX_IN_VALUES:
            raise WhereError(f"IN has more than {MAX_IN_VALUES} values (MAX_IN_VALUES, the cap)",
                             start.position if start else 1)
        return tuple(values)


@dataclass(frozen=True)
class Predicate:
    """A parsed predicate: its text and its terms, all of them immutable."""

    text: str
    terms: tuple[Term, ...]


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def parse_predicate(text: str) -> Predicate:
    """Parse a predicate; ``WhereError`` says what is wrong and where (or which cap it passes).

    Cached: a ``Predicate`` is immutable, so every holder of the same text may
    share one. Errors are not cached (a rejected text costs at most one
    linear parse of ``MAX_WHERE_BYTES``).
    """
    head = text[:MAX_WHERE_BYTES + 1].encode("utf-8", "surrogatepass")
    if len(head) > MAX_WHERE_BYTES:
        # The column of the first character past the cap (characters may be several bytes).
        raise WhereError(f"longer than {MAX_WHERE_BYTES} bytes (MAX_WHERE_BYTES, the cap on "
                         f"a predicate)",
                         len(head[:MAX_WHERE_BYTES].decode("utf-8", "ignore")) + 1)
    if not text.strip():
        return Predicate(text, ())
    return Predicate(text, tuple(_Parser(text).parse()))


def _null_when_empty(column: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(column, ""), pa.scalar(None, pa.string()), column)


def _as_numbers(column: pa.Array) -> pa.Array:
    is_number = pc.match_substring_regex(column, _NUMBER_FIELD)
    return pc.cast(pc.if_else(is_number, column, pa.scalar(None, pa.string())), pa.float64())


def _term_mask(term: Term, column: pa.Array) -> pa.Array:
    if term.op == "IS NULL":
        return pc.equal(column, "")
    if term.op == "IS NOT NULL":
        return pc.not_equal(column, "")
    values = _as_numbers(column) if term.numeric else _null_when_empty(column)
    return _compare(term, values)


def row_mask(terms: Sequence[Term], columns: dict[str, pa.Array]) -> pa.Array | None:
    """The rows of a batch every term holds for (null: no); ``None`` when there are no terms.

    ``columns`` maps each term's column to that column of the batch, as strings.
    """
    mask = None
    for term in terms:
        this = _term_mask(term, columns[term.column])
        mask = this if mask is None else pc.and_kleene(mask, this)
    return mask


def _typed_term_mask(term: Term, column: pa.Array) -> pa.Array:
    kind = column.type
    if term.op == "IS NULL":
        return pc.is_null(column)
    if term.op == "IS NOT NULL":
        return pc.is_valid(column)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        values = _as_numbers(column) if term.numeric else column
    elif term.numeric and (pa.types.is_integer(kind) or pa.types.is_floating(kind)
                           or pa.types.is_decimal(kind)):
        values = pc.cast(column, pa.float64())
    elif term.numeric:
        return pa.nulls(len(column), pa.bool_())  # a number never equals a non-number
    else:
        try:  # booleans as true/false, dates and times in ISO 8601: they compare as text
            values = pc.cast(column, pa.string())
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
            raise TypeError(f"column {term.column!r} of type {kind} cannot be compared "
                            f"with a string") from None
    return _compare(term, values)


def typed_row_mask(terms: Sequence[Term], columns: dict[str, pa.Array]) -> pa.Array | None:
    """``row_mask`` over typed columns (JSON Lines, Parquet): a null is NULL (an empty
    string is a string); a number literal compares numbers (and numeric strings) as
    ``float64``, never other types; a string literal compares strings, and booleans,
    dates and times by their text (``true``, ``2024-01-31``). ``TypeError`` for a
    column that has no text (a nested one) under a string comparison."""
    mask = None
    for term in terms:
        column = columns[term.column]
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        this = _typed_term_mask(term, column)
        mask = this if mask is None else pc.and_kleene(mask, this)
    return mask


def _compare(term: Term, values: pa.Array) -> pa.Array:
    """LIKE, [NOT] IN or a comparison of ``values`` with the term's literal(s)."""
    if term.op == "LIKE":
        return pc.starts_with(values, pattern=str(term.values[0]))
    if term.op in ("IN", "NOT IN"):
        value_set = pa.array(term.values, pa.float64() if term.numeric else pa.string())
        found = pc.is_in(values, value_set=value_set)
        return pc.and_(pc.invert(found), pc.is_valid(values)) if term.op == "NOT IN" else found
    return getattr(pc, COMPARISONS[term.op])(values, term.values[0])
