"""JSON nesting is measured before pyarrow parses: deep records are refused, no crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.filters.builtin.json_depth import TooDeep, check_depth, nesting_depth

# Strings full of what could fool a scanner: brackets, quotes, backslashes.
tricky = st.text(alphabet='[]{}"\\ab\n\t', max_size=8)
values = st.recursive(
    st.none() | st.integers() | tricky,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky, inner, max_size=3),
    max_leaves=30)


def depth(value) -> int:
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    return 0


@settings(max_examples=400, deadline=None)
@given(st.lists(values, min_size=1, max_size=5), st.integers(0, 12))
def test_a_block_is_refused_exactly_when_a_record_nests_deeper_than_the_limit(records, limit):
    block = b"".join(json.dumps(r).encode() + b"\n" for r in records)
    deepest = max(map(depth, records))
    assert nesting_depth(block, 0) == deepest  # no fast path: the exact count
    if deepest > limit:
        with pytest.raises(TooDeep, match=rf"over the JSON depth limit \({limit}\)"):
            check_depth(block, limit)
    else:
        check_depth(block, limit)


def test_a_string_closer_never_cancels_a_real_opener():
    # ["]",["]",... : 200 levels whose strings each hold a closer
    line = b'["]",' * 200 + b"1" + b"]" * 200 + b"\n"
    assert json.loads(line)  # valid JSON, 200 levels deep
    assert nesting_depth(line) == 200
    with pytest.raises(TooDeep):
        check_depth(b'{"x": 1}\n' + line)


def test_each_line_counts_from_its_own_start():
    # Closers on one line do not hide the openers of the next.
    assert nesting_depth(b"]" * 500 + b"\n" + b"[" * 70 + b"\n") == 70
    # An unterminated string on one line does not hide the next line's brackets.
    assert nesting_depth(b'"\n' + b"[" * 70 + b"]" * 70 + b"\n") == 70
    assert nesting_depth(b'{"a":"[[[[[[\\"[[[","b":[1]}\n') <= 2


def test_a_deep_record_that_crashed_pyarrow_is_refused_quickly():
    deep = b'{"a":' * 10_000 + b"1" + b"}" * 10_000 + b"\n"
    with pytest.raises(TooDeep, match="10000 levels deep"):
        check_depth(b'{"x": 1}\n' + deep)
    with pytest.raises(TooDeep):  # 4 MiB of openers: linear, in C
        check_depth(b"[" * (4 << 20))
