"""csv_select and its predicate language, checked against a plain-Python reading of the CSV."""

from __future__ import annotations

import csv
import io
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.base import FilterContext
from iostack.filters.csv_where import WhereError, parse_predicate
from iostack.filters.errors import ParamError
from iostack.filters.library import get_filter

CONTEXT = FilterContext(account="AUTH_t1", container="logs", obj="a.csv")
HEADER = b"id,name,status,note\n"


def select(body: bytes, at_start: bool = True, **params) -> bytes:
    selection = get_filter("csv_select").selection(params, CONTEXT)
    first, _, rest = body.partition(b"\n")
    prefix = selection.begin(first + b"\n" if body else None, at_start)
    return prefix + (selection.select(rest) if rest else b"")


def rows(answer: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(answer.decode())))


def test_projection_by_name_and_index_in_the_order_asked():
    body = HEADER + b"1,ann,200,x\n2,bob,500,y\n"
    assert rows(select(body, columns="status,id")) == [["status", "id"], ["200", "1"],
                                                        ["500", "2"]]
    assert rows(select(body, columns="1, 0")) == [["name", "id"], ["ann", "1"], ["bob", "2"]]


def test_quoted_fields_keep_delimiters_and_escaped_quotes():
    body = HEADER + b'1,"Smith, Ann",200,"said ""hi"""\n2,bob,404,\n'
    assert rows(select(body, columns="name,note")) == [
        ["name", "note"], ["Smith, Ann", 'said "hi"'], ["bob", ""]]


def test_answers_are_unquoted_when_no_value_needs_quotes():
    assert select(HEADER + b'1,"ann",200,x\n', columns="id,name") == b"id,name\n1,ann\n"


def test_the_header_line_is_sent_only_from_the_start_of_the_object():
    body = HEADER + b"1,ann,200,x\n"
    assert select(body, at_start=False, columns="name") == b"ann\n"


def test_headerless_objects_name_columns_as_spark_does():
    body = b"1,ann,200\n2,bob,500\n"
    selection = get_filter("csv_select").selection({"header": False, "columns": "_c1",
                                                    "where": "_c2 >= 300"}, CONTEXT)
    assert selection.begin(b"1,ann,200\n", True) == b""
    assert selection.select(body) == b"bob\n"


def test_empty_and_header_only_objects():
    assert select(b"", columns="id") == b""
    assert select(HEADER, columns="id,status") == b"id,status\n"


def test_other_delimiters():
    body = b"id;name\n1;a,b\n"
    assert rows(select(body, columns="name", delimiter=";")) == [["name"], ["a,b"]]


def test_rows_with_another_number_of_fields_are_skipped():
    assert rows(select(HEADER + b"1,ann,200,x\n2,bob\n3,cy,300,z\n", columns="id")) == [
        ["id"], ["1"], ["3"]]


@pytest.mark.parametrize(("params", "message"), [
    ({"columns": "nope"}, r"parameter 'columns': no column 'nope' \(columns: id, name"),
    ({"where": "nope = 1"}, r"parameter 'where': no column 'nope'"),
    ({"columns": "9"}, r"no column '9'"),
])
def test_unknown_columns_are_named(params, message):
    with pytest.raises(ParamError, match=message):
        select(HEADER + b"1,a,2,x\n", **params)


@pytest.mark.parametrize(("where", "message"), [
    ("status >", "expected a 'string' or a number, found the end at column 9"),
    ("status = 1 OR id = 2", "expected AND or the end, found 'OR' at column 12"),
    ("name LIKE '%x'", "LIKE takes a prefix"),
    ("name IN ('a', 1)", "IN mixes strings and numbers"),
    ("status ~ 1", "unexpected '~' at column 8"),
    ("status = 'x", "unexpected \"'\" at column 10"),
    ("= 1", "expected a column name, found '=' at column 1"),
    ("name = ann", "expected a 'string' or a number, found 'ann'"),
])
def test_bad_predicates_say_what_and_where(where, message):
    with pytest.raises(WhereError, match=re.escape(message)):
        parse_predicate(where)
    with pytest.raises(ParamError, match="parameter 'where'"):
        get_filter("csv_select").validate({"where": where})


def test_bad_delimiters_are_refused():
    for delimiter in ('"', "ab", "\n", ""):
        with pytest.raises(ParamError, match="delimiter"):
            get_filter("csv_select").validate({"delimiter": delimiter})


# -- predicates against a reference evaluation ---------------------------------------------

NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")


def reference(term_text: str, value: str) -> bool:
    """The documented semantics, evaluated the slow, obvious way on one field."""
    (term,) = parse_predicate(term_text).terms
    if term.op == "IS NULL":
        return value == ""
    if term.op == "IS NOT NULL":
        return value != ""
    if value == "" or (term.numeric and not NUMBER.match(value)):
        return False
    field = float(value) if term.numeric else value
    if term.op == "LIKE":
        return field.startswith(term.values[0])
    if term.op in ("IN", "NOT IN"):
        return (field in term.values) == (term.op == "IN")
    compare = {"=": "__eq__", "!=": "__ne__", "<>": "__ne__", "<": "__lt__", "<=": "__le__",
               ">": "__gt__", ">=": "__ge__"}[term.op]
    if not term.numeric:
        return getattr(field.encode(), compare)(term.values[0].encode())
    return getattr(field, compare)(term.values[0])


fields = st.one_of(st.sampled_from(["", "0", "7", "-3.5", "1e2", "abc", "ab", "b", "ZZ", "7x",
                                    " 7", "é", "a'b"]),
                   st.integers(-1000, 1000).map(str))
literals = st.one_of(st.sampled_from(["'ab'", "'b'", "''", "'a''b'", "'é'"]),
                     st.integers(-20, 20).map(str), st.sampled_from(["3.5", "-3.5", "1e2"]))
terms = st.one_of(
    st.tuples(st.sampled_from(["=", "!=", "<>", "<", "<=", ">", ">="]), literals).map(
        lambda t: f"v {t[0]} {t[1]}"),
    st.sampled_from(["v IS NULL", "v IS NOT NULL", "v LIKE 'a%'", "v LIKE '%'",
                     "v IN ('ab', 'b')", "v NOT IN ('ab', '')", "v IN (7, 100)",
                     "v NOT IN (0, -3.5)"]),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(fields, min_size=1, max_size=20), terms)
def test_predicates_match_the_reference_semantics(values, term):
    body = b"v\n" + "".join(f'"{v}"\n' for v in values).encode()
    got = [row[0] for row in rows(select(body, where=term))[1:]]
    assert got == [v for v in values if reference(term, v)]


def test_terms_combine_with_and():
    body = HEADER + b"1,ann,200,x\n2,bob,500,y\n3,al,503,\n"
    assert rows(select(body, columns="id", where="status >= 500 AND name LIKE 'a%'")) == [
        ["id"], ["3"]]
    assert rows(select(body, columns="id", where='"note" IS NULL and id > 2')) == [
        ["id"], ["3"]]


# -- grep ------------------------------------------------------------------------------------


def test_grep_keeps_matching_lines_and_can_invert_or_ignore_case():
    grep = get_filter("grep")
    block = b"GET /a 200\nPUT /b 500\nget /c 404\n"
    assert grep.selection({"pattern": r" [45]\d\d$"}, CONTEXT).select(block) == (
        b"PUT /b 500\nget /c 404\n")
    assert grep.selection({"pattern": "^get", "ignore_case": True}, CONTEXT).select(block) == (
        b"GET /a 200\nget /c 404\n")
    assert grep.selection({"pattern": "^GET", "invert": True}, CONTEXT).select(block) == (
        b"PUT /b 500\nget /c 404\n")
    assert grep.selection({"pattern": "nothing"}, CONTEXT).select(block) == b""


def test_grep_needs_a_valid_pattern():
    with pytest.raises(ParamError, match="a pattern is required"):
        get_filter("grep").validate({})
    with pytest.raises(ParamError, match="missing \\)"):
        get_filter("grep").validate({"pattern": "(a"})
