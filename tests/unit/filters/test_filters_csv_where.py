"""csv_where on tenant input: bounded size, bounded terms, linear time, one parse per text.

Times are CPU time of this thread (``time.thread_time``), so other engineers'
load on the machine does not make them flaky; the bounds are two orders of
magnitude above what the parser needs and far below what it used to take
(an 8 KB predicate cost ~4 s of CPU before the tokenizer was linear).
"""

from __future__ import annotations

import dataclasses
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.base import FilterContext
from iostack.filters.csv_where import (
    MAX_IN_VALUES,
    MAX_TERMS,
    MAX_WHERE_BYTES,
    Predicate,
    WhereError,
    parse_predicate,
)
from iostack.filters.errors import ParamError
from iostack.filters.library import get_filter

# Seconds of CPU per predicate: the quadratic parser took 1-4 s, the linear one
# ~10 ms (30 times that seen under a load average of 20: the bound sits between).
BOUND = 0.6
CONTEXT = FilterContext(account="AUTH_t1", container="logs", obj="a.csv")


def timed_parse(text: str) -> tuple[Predicate | WhereError, float]:
    """Parse without the cache; the outcome and the CPU seconds it took."""
    start = time.thread_time()
    try:
        outcome: Predicate | WhereError = parse_predicate.__wrapped__(text)
    except WhereError as exc:
        outcome = exc
    return outcome, time.thread_time() - start


# Shapes that made the old tokenizer retry a token at every length, or rescan the rest.
ADVERSARIAL = {
    "digits then a letter": lambda n: "1" * (n - 1) + "a",
    "digits with a point then a letter": lambda n: "1." + "1" * (n - 3) + "a",
    "unterminated string": lambda n: "a = '" + "''" * ((n - 5) // 2),
    "unterminated quoted name": lambda n: '"' + 'x""' * ((n - 1) // 3),
    "blanks then garbage": lambda n: "a = 1" + " " * (n - 6) + "~",
    "a long IN list": lambda n: "a IN (" + ",".join(["1"] * ((n - 7) // 2)) + ")",
}


@pytest.mark.parametrize("shape", sorted(ADVERSARIAL))
def test_an_8k_predicate_is_refused_at_once_naming_the_cap(shape):
    text = ADVERSARIAL[shape](8192)
    outcome, seconds = timed_parse(text)
    assert isinstance(outcome, WhereError)
    assert f"longer than {MAX_WHERE_BYTES} bytes (MAX_WHERE_BYTES" in str(outcome)
    assert outcome.position == MAX_WHERE_BYTES + 1
    assert seconds < 0.005


@pytest.mark.parametrize("shape", sorted(ADVERSARIAL))
def test_a_predicate_just_under_the_cap_takes_linear_time(shape):
    text = ADVERSARIAL[shape](MAX_WHERE_BYTES)
    assert len(text.encode()) <= MAX_WHERE_BYTES
    outcome, seconds = timed_parse(text)
    assert seconds < BOUND, f"{shape}: {seconds:.3f} s"
    if shape != "a long IN list":
        assert isinstance(outcome, WhereError)
        assert "MAX_" not in str(outcome)  # refused for what it says, not for its size
    else:
        assert isinstance(outcome, WhereError)
        assert f"IN has more than {MAX_IN_VALUES} values (MAX_IN_VALUES" in str(outcome)


def test_a_valid_predicate_at_the_cap_parses_quickly():
    term = "status >= 500 AND url LIKE '/api%' AND "
    text = (term * (MAX_TERMS // 2 - 1))[:-len(" AND ")]
    text += " AND x IN (" + ",".join(["'v'"] * 1000) + ")"
    text = text[:MAX_WHERE_BYTES - 1].rsplit(",", 1)[0] + ")"
    assert MAX_WHERE_BYTES - 8 < len(text) <= MAX_WHERE_BYTES
    outcome, seconds = timed_parse(text)
    assert isinstance(outcome, Predicate), outcome
    assert len(outcome.terms) == MAX_TERMS - 1
    assert seconds < BOUND


def test_the_cap_counts_utf8_bytes_and_points_at_the_first_character_past_it():
    text = "name = '" + "é" * 3000 + "'"  # 3009 characters, 6009 bytes
    with pytest.raises(WhereError, match="MAX_WHERE_BYTES") as info:
        parse_predicate(text)
    assert info.value.position == 8 + (MAX_WHERE_BYTES - 8) // 2 + 1
    assert isinstance(parse_predicate("name = '" + "é" * 2000 + "'"), Predicate)


def test_more_than_max_terms_is_refused_naming_the_cap():
    text = " AND ".join(f"c{i} = {i}" for i in range(MAX_TERMS + 1))
    assert len(text) < MAX_WHERE_BYTES
    with pytest.raises(WhereError, match=rf"more than {MAX_TERMS} terms \(MAX_TERMS"):
        parse_predicate(text)
    assert len(parse_predicate(text.rsplit(" AND ", 1)[0]).terms) == MAX_TERMS


def test_the_filter_turns_a_cap_into_a_parameter_error():
    with pytest.raises(ParamError, match="parameter 'where': longer than 4096 bytes"):
        get_filter("csv_select").validate({"where": "a = 1 AND " * 500})


def test_a_predicate_is_immutable_and_parsed_once_per_text():
    parse_predicate.cache_clear()
    where = "status >= 500 AND url LIKE '/api%'"
    selection = get_filter("csv_select").selection({"where": where}, CONTEXT)
    info = parse_predicate.cache_info()
    assert (info.misses, info.hits) == (1, 1)  # checked, then built from the same parse
    predicate = parse_predicate(where)
    assert selection.terms is predicate.terms
    with pytest.raises(dataclasses.FrozenInstanceError):
        predicate.terms = ()  # type: ignore[misc]
    assert isinstance(predicate.terms, tuple)
    assert all(isinstance(term.values, tuple) for term in predicate.terms)


FRAGMENTS = ["1", "1.", ".5", "e", "e+", "-", "'", "''", '"', '""', "a", "_c1", " ", "  ",
             "AND", "and", "IN", "NOT", "IS", "NULL", "LIKE", "(", ",", ")", "=", "<=", "<>",
             "!", "%", "é", "\t", "\n", "x'y", "\\"]


@st.composite
def predicate_texts(draw) -> str:
    """Token-ish soup, repeated so that many inputs land near (and past) the cap."""
    unit = "".join(draw(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=12)))
    repeat = draw(st.integers(1, MAX_WHERE_BYTES // len(unit) + 2))
    return draw(st.sampled_from(["", "a = 1 AND ", "x IN ("])) + unit * repeat


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(predicate_texts(), st.text(max_size=300)))
def test_any_text_parses_or_is_refused_quickly(text):
    outcome, seconds = timed_parse(text)
    assert isinstance(outcome, (Predicate, WhereError))  # never another exception
    assert seconds < BOUND, f"{len(text)} characters took {seconds:.3f} s"
    if isinstance(outcome, WhereError):
        assert 1 <= outcome.position <= len(text) + 1
