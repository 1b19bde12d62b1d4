"""Hypothesis fuzzing of hostile record, JSON and Parquet objects through the selection
engine, each input bounded in CPU time and memory: an answer or a 4xx naming the
problem, never another exception, a crash, or unbounded work."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_select_engine_unit import fetcher
from test_select_parquet_unit import SMALL, run

from iostack.filters.base import FilterContext
from iostack.filters.builtin.parquet_select import ParquetLimits
from iostack.filters.errors import FilterError
from iostack.filters.library import get_filter
from iostack.swift_middleware.select.engine import Answer, SelectError, Selecting

CONTEXT = FilterContext(account="AUTH_t1", container="c", obj="o")
CPU_SECONDS = 5.0  # per input, this process; generous for a loaded 2-core machine
MEMORY = 256 << 20  # peak RSS growth per input
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _status_kib(field: str) -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field))


class Bounded:
    """CPU seconds and peak-RSS growth of the block it wraps (the peak is reset at its
    start through ``/proc/self/clear_refs``, so earlier tests' peaks do not hide it)."""

    def __enter__(self) -> Bounded:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")  # resets VmHWM, the peak RSS, to the current RSS
        self.cpu = time.process_time()
        self.rss = _status_kib("VmRSS:") * 1024
        return self

    def __exit__(self, *exc: object) -> None:
        cpu = time.process_time() - self.cpu
        grown = _status_kib("VmHWM:") * 1024 - self.rss
        assert cpu < CPU_SECONDS, f"{cpu:.1f} CPU s for one input"
        assert grown < MEMORY, f"peak RSS grew {grown >> 20} MiB for one input"


def select(body: bytes, name: str, params: dict[str, str], max_record: int) -> bytes | None:
    """The answer, or None for a refusal with a 4xx."""
    selection = get_filter(name).selection(params, CONTEXT)
    try:
        answer = Selecting(fetcher(body), "/v1/AUTH_t1/c/o", [selection], [name], 4096,
                           max_record=max_record).run(0, None)
        assert isinstance(answer, Answer)
        return b"".join(answer.chunks)
    except SelectError as exc:
        assert exc.status in (400, 422), exc
    except FilterError as exc:  # a later block, mid-answer: the answer is cut
        assert str(exc)
    return None


# Lines of JSON-ish tokens, sometimes behind a run of openers or a long unbroken line.
json_text = st.lists(st.sampled_from(
    ['{', '}', '[', ']', '"', '\\', ':', ',', '1', 'a', '"k":', '\n', ' ', '"\\""']),
    max_size=200).map("".join)
hostile_prefix = st.sampled_from([b"", b"[" * 5000, b'{"a":' * 3000, b"x" * 20_000,
                                  b'"' + b"\\" * 999 + b'"'])


@FUZZ
@given(hostile_prefix, json_text, st.sampled_from(["", "a", "k"]))
def test_json_lines_fuzz_answers_or_refuses_within_bounds(prefix, text, columns):
    with Bounded():
        select(prefix + text.encode(), "json_select", {"columns": columns}, max_record=8192)


@FUZZ
@given(hostile_prefix, st.binary(max_size=3000), st.sampled_from(["csv_select", "grep"]))
@example(b"", b"\r\x00", "csv_select")  # csv.Error escaped: a 500, not a 422
def test_record_fuzz_answers_or_refuses_within_bounds(prefix, data, name):
    params = {"pattern": "a"} if name == "grep" else {}
    with Bounded():
        select(prefix + data, name, params, max_record=8192)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(SMALL) - 1), st.integers(0, 255)),
                min_size=1, max_size=12))
def test_parquet_fuzz_is_decoded_in_the_child_within_bounds(edits):
    body = bytearray(SMALL)
    for offset, value in edits:
        body[offset] = value
    with Bounded():
        try:
            run(bytes(body), limits=ParquetLimits(max_memory=64 << 20, time_limit=20))
        except SelectError as exc:
            assert exc.status == 422
        except FilterError as exc:
            assert "row group" in str(exc)


def test_the_bounds_themselves_catch_unbounded_work():
    with pytest.raises(AssertionError, match="peak RSS grew"):
        with Bounded():
            held = bytearray(MEMORY + (64 << 20))
            held[::4096] = b"x" * len(held[::4096])
