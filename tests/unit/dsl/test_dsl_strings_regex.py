"""Quoted regexes keep their backslashes; OBJECT_NAME=~ patterns are RE2, checked when written."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.dsl import DSLError, check_text, parse
from iostack.policy.resolve import RequestInfo, match_object_conds

LONG_NAME = "d" * 1000 + "/" + "7" * 22 + "!"  # 1024 characters


def string_value(literal: str) -> str:
    (policy,) = parse(f"FOR ALL DO SET grep WITH pattern={literal}")
    return policy.actions[0].params[0].value.data


@pytest.mark.parametrize(("literal", "value"), [
    (r'"^\d+$"', r"^\d+$"),              # a backslash before anything else is kept
    (r"'^\d+\.log$'", r"^\d+\.log$"),
    (r'"tab\there"', r"tab\there"),      # no C escapes: \t stays two characters
    (r'"say \"hi\""', 'say "hi"'),       # \" is a double quote
    (r"'it\'s'", "it's"),                # \' is a single quote
    (r'"a\\b"', "a\\b"),                 # \\ is one backslash
    (r'"a\\\d"', r"a\\d"),               # \\ then \d kept
    (r'"end\\"', "end\\"),
])
def test_string_literal_rules(literal, value):
    assert string_value(literal) == value


def conds_of(text: str, vocab):
    (policy,) = check_text(text, vocab).policies
    return policy.object_conds


def matches(conds, name: str) -> bool:
    request = RequestInfo.from_path("PUT", f"/v1/AUTH_t1/c/{name}")
    return match_object_conds(conds, request, {})[0]


@pytest.mark.parametrize("quote", ['"', "'"])
def test_a_quoted_regex_keeps_its_backslashes(vocab, quote):
    conds = conds_of(f"FOR CONTAINER t1/c DO SET COMPRESSION TO OBJECT_NAME=~{quote}^\\d+${quote}",
                     vocab)
    assert conds == ({"kind": "name", "value": r"^\d+$"},)
    assert matches(conds, "2024")
    assert not matches(conds, "ddd")  # what the old unescaping (^d+$) matched
    assert not matches(conds, "2024.log")


def test_the_issue_form_with_to_before_do_matches_digits(vocab):
    conds = conds_of(r'FOR CONTAINER t1/c TO OBJECT_NAME=~"^\d+$" DO SET COMPRESSION', vocab)
    assert matches(conds, "123") and not matches(conds, "ddd")
    (policy,) = check_text("FOR CONTAINER t1/c TO OBJECT_SIZE > 1M, OBJECT_TYPE=DOCS "
                           "WHEN PUTS_SEC > 3 DO SET compression, SET encryption", vocab).policies
    assert [c["kind"] for c in policy.object_conds] == ["size", "type"]
    assert [a.filter for a in policy.actions] == ["compression", "encryption"]
    assert policy.condition == {"metric": "PUTS_SEC", "op": ">", "value": 3}
    with pytest.raises(DSLError, match="unexpected keyword TO"):
        parse("FOR ALL TO OBJECT_SIZE > 1 DO SET x TO OBJECT_SIZE > 2")


def test_a_bare_regex_is_taken_as_written(vocab):
    conds = conds_of(r"FOR CONTAINER t1/c DO SET COMPRESSION TO OBJECT_NAME=~^\d+\.csv$", vocab)
    assert matches(conds, "17.csv") and not matches(conds, "17xcsv")


@pytest.mark.parametrize(("pattern", "reason"), [
    (r"(a)\1", r"invalid escape sequence: \1"),
    (r"^x(?=y)", "invalid perl operator: (?="),
    (r"x\Z", r"invalid escape sequence: \Z"),
])
def test_a_regex_re2_refuses_is_an_error_at_its_line_and_column(vocab, pattern, reason):
    text = f'FOR ALL DO SET noop\nFOR ALL DO SET compression TO OBJECT_NAME=~"{pattern}"'
    with pytest.raises(DSLError) as info:
        check_text(text, vocab)
    (diagnostic,) = info.value.diagnostics
    assert (diagnostic.line, diagnostic.column) == (2, text.split("\n")[1].index('"') + 1)
    assert "bad regular expression" in diagnostic.message
    assert "not a valid RE2 regular expression" in diagnostic.message
    assert reason in diagnostic.message


PIECES = ["a", "d", "7", ".", "*", "+", "?", "|", "(", ")", "[", "]", "^", "$", "\\d", "\\w",
          "\\1", "{3}", "{1000}", "(?=", "/", "!", "\\\\", '\\"']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=30).map("".join))
def test_fuzz_object_name_regexes_check_and_match_a_long_name_quickly(pattern):
    text = f'FOR CONTAINER t1/c DO SET compression TO OBJECT_NAME=~"{pattern}"'
    start = time.thread_time()
    try:
        (policy,) = parse(text)
    except DSLError as exc:
        assert all("line 1" in str(d) for d in exc.diagnostics)
        return
    conds = [{"kind": "name", "value": c.value.data} for c in policy.object_conds]
    matches(conds, LONG_NAME)
    assert time.thread_time() - start < 0.2, pattern
