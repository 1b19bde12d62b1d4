"""One parameter path: every component types, defaults and hides parameters the same way.

The DSL checker (``dsl.checker.convert``), the data path (``FilterSpec.validate``,
``resolve_params``) and policy resolution (``merge_levels``) all go through the
filter's declaration (``iostack.filters.metadata``); records, answers and
logs hide secrets through ``public_params`` (its users:
tests/unit/swift_middleware/test_enforce_params_unit.py). Each test puts two
of them side by side, so a second implementation that drifts fails here.
"""

from __future__ import annotations

import json

import pytest

from iostack.dsl.ast import Value
from iostack.dsl.checker import check_text, convert
from iostack.dsl.errors import DSLError
from iostack.dsl.units import Quantity
from iostack.dsl.vocabulary import Vocabulary
from iostack.filters.errors import ParamError
from iostack.filters.metadata import (
    FilterMetadata,
    Param,
    ParamValueError,
    public_params,
    resolve_params,
)
from iostack.policy.resolve import Level, merge_levels

META = FilterMetadata(
    name="demo",
    description="every parameter type",
    params=(
        Param("count", "int", default=3, minimum=1, maximum=10),
        Param("ratio", "float", default=0.5, minimum=0, maximum=1),
        Param("size", "size", default=1024),
        Param("rate", "rate", default=0, minimum=0, unit="ops"),
        Param("wait", "duration", minimum=0),
        Param("flag", "bool", default=False),
        # Declared with capitals: a policy's value matches in any case, and comes out as declared.
        Param("mode", "enum", default="Fast", choices=("Fast", "Slow")),
        Param("label", "str", default="x"),
        Param("key", "secret"),
    ),
    stages=frozenset({"proxy", "object"}),
)


def dsl_value(text: str) -> object:
    """What ``WITH name=text`` compiles to for META (one DSL check)."""
    name, _, raw = text.partition("=")
    vocab = Vocabulary(filters={"demo": META})
    (policy,) = check_text(f"FOR ALL DO SET demo WITH {name}={raw}", vocab).policies
    return policy.actions[0].params[name]


@pytest.mark.parametrize(("written", "typed"), [
    ("count=7", 7), ("ratio=1", 1.0), ("size=4K", 4096), ("rate=0.5ops", 0.5),
    ("rate=3ops", 3), ("wait=250ms", 0.25), ("flag=YES", True), ("flag=off", False),
    ("mode=slow", "Slow"), ("mode=FAST", "Fast"), ("label=abc", "abc"), ("key=s3cr3t", "s3cr3t"),
])
def test_the_dsl_and_the_data_path_type_a_value_alike(written, typed):
    name = written.partition("=")[0]
    compiled = dsl_value(written)
    assert compiled == typed and type(compiled) is type(typed)
    # What the controller stored, as JSON, and the same value as a header's string.
    for carried in (json.loads(json.dumps(compiled)), str(compiled)):
        again = resolve_params(META, {name: carried})[name]
        assert again == typed and type(again) is type(typed)


def test_enum_case_is_the_dsls_everywhere():
    # Documented: names are case-insensitive; the declared spelling is what filters see.
    assert convert(META.param("mode"), Value("sLoW", "name", "sLoW", 1, 1)) == "Slow"
    for given in ("slow", "SLOW", "Slow"):
        assert resolve_params(META, {"mode": given})["mode"] == "Slow"
    with pytest.raises(ParamError, match="expected one of Fast, Slow, got 'medium'"):
        resolve_params(META, {"mode": "medium"})
    with pytest.raises(DSLError, match="column 31: parameter 'mode' of demo takes one of "
                                       "Fast, Slow, got 'medium'"):
        dsl_value("mode=medium")


@pytest.mark.parametrize(("written", "carried", "dsl_error", "data_error"), [
    ("count=11", 11, "must be in [1, 10], got 11", "11 is above the maximum 10"),
    ("count=2.5", 2.5, "takes a whole number, got '2.5'", "expected an integer, got 2.5"),
    ("size=1.5", 1.5, "takes a whole number of bytes", "expected an integer, got 1.5"),
    ("ratio=2", 2, "must be in [0, 1], got 2", "2.0 is above the maximum 1"),
    ("flag=maybe", "maybe", "takes true or false", "expected true or false"),
])
def test_a_value_refused_by_one_is_refused_by_the_other(written, carried, dsl_error,
                                                        data_error):
    with pytest.raises(DSLError) as dsl:
        dsl_value(written)
    assert dsl_error in str(dsl.value) and "line 1, column " in str(dsl.value)
    with pytest.raises(ParamError) as data:
        resolve_params(META, {written.partition("=")[0]: carried})
    assert data_error in str(data.value)


def test_out_of_range_is_told_apart_from_a_wrong_type():
    with pytest.raises(ParamValueError) as low:
        META.param("count").coerce(0)
    assert low.value.out_of_range and low.value.expected is None
    with pytest.raises(ParamValueError) as wrong:
        META.param("count").coerce("many")
    assert not wrong.value.out_of_range and wrong.value.expected == "an integer"


def test_resolution_and_the_data_path_fill_the_same_defaults():
    level = Level("container", "AUTH_t1/c", (
        {"id": "P1.1", "seq": 1, "verb": "set", "filter": "demo", "params": {"count": 5}},))
    (entry,), _notes = merge_levels([level], {"demo": META}, lambda conds: (True, ""))
    validated = resolve_params(META, entry.params)
    # Resolution shows what runs: every default the data path fills, none it would not.
    assert entry.params == {k: v for k, v in validated.items() if v is not None}
    assert validated["wait"] is None and validated["key"] is None
    assert entry.params["count"] == 5 and entry.params["mode"] == "Fast"


def test_public_params_leave_out_or_mask_secrets_and_undeclared_names():
    params = {"count": 2, "key": "s3cr3t", "gone": "old"}
    assert public_params(META, params) == {"count": 2}
    assert public_params(META, params, mask="***") == {"count": 2, "key": "***", "gone": "***"}
    assert public_params(None, params) == {}


def test_quantities_reach_coerce_in_base_units():
    # The DSL's part is reading units; typing is Param.coerce's.
    value = Value("2K", "quantity", Quantity(2048.0, "size"), 1, 1)
    assert convert(META.param("size"), value) == META.param("size").coerce(2048) == 2048
