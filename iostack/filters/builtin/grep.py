"""``grep``: the lines of an object that match a regular expression (GET).

Parameters: ``pattern`` (required; RE2 syntax, as pyarrow runs it: linear
time, so a tenant's pattern cannot make the proxy backtrack for ever),
``ignore_case`` and ``invert`` (lines that do *not* match). The answer is the
matching lines, each ending in ``\\n``. Same record rules as ``csv_select``:
byte ranges select the lines that start in them (``iostack.filters.records``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from iostack.filters.base import FilterContext, FilterSpec
from iostack.filters.errors import ParamError
from iostack.filters.metadata import FilterMetadata, Param

METADATA = FilterMetadata(
    name="grep",
    description="Lines of an object matching a regular expression (RE2), at the storage side.",
    params=(
        Param("pattern", "str", default="", description="regular expression (RE2 syntax)"),
        Param("ignore_case", "bool", default=False, description="match case-insensitively"),
        Param("invert", "bool", default=False, description="keep the lines that do not match"),
    ),
    methods=frozenset({"GET"}),
    stages=frozenset({"proxy", "object"}),
    default_stage="object",  # storage side; the proxy selects what object servers cannot
    changes_size=True,
)


def _matches(lines: pa.Array, params: dict[str, Any]) -> pa.Array:
    return pc.match_substring_regex(lines, params["pattern"], ignore_case=params["ignore_case"])


def _check(params: dict[str, Any]) -> None:
    if not params["pattern"]:
        raise ParamError("grep", "pattern", "a pattern is required")
    try:
        _matches(pa.array([""]), params)
    except pa.ArrowInvalid as exc:
        raise ParamError("grep", "pattern", str(exc)) from None


class GrepSelection:
    skips_first_record = False  # a first line is a line like any other
    needs_first_record = False
    content_type = "text/plain; charset=utf-8"
    random_access = False

    def __init__(self, params: dict[str, Any], context: FilterContext) -> None:
        del context
        self.params = params

    def begin(self, first_record: bytes | None, at_start: bool) -> bytes:
        return b""

    def select(self, block: bytes) -> bytes:
        whole = block[:-1] if block.endswith(b"\n") else block
        lines = pc.list_flatten(pc.split_pattern(pa.array([whole], pa.binary()), b"\n"))
        keep = _matches(lines, self.params)
        if self.params["invert"]:
            keep = pc.invert(keep)
        kept = lines.filter(keep)
        if len(kept) == 0:
            return b""
        joined = pc.binary_join(pa.ListArray.from_arrays([0, len(kept)], kept), b"\n")
        return joined[0].as_py() + b"\n"

    def end(self) -> bytes:
        return b""


SPEC = FilterSpec(METADATA, make_selection=GrepSelection, check_params=_check)
