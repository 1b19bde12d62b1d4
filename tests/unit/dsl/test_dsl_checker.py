"""The checker resolves names against the vocabulary, converts values and reports every mistake."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iostack.dsl import DSLError
from iostack.dsl.checker import CheckedAction, check_text
from iostack.dsl.vocabulary import QosClass
from iostack.filters.metadata import FilterMetadata, Param
from iostack.monitoring.metric import Metric


def error_of(text, vocab) -> str:
    with pytest.raises(DSLError) as info:
        check_text(text, vocab)
    return str(info.value)


def test_issue_example_checks_to_accounts_params_and_conditions(vocab):
    (policy,) = check_text(
        "FOR TENANT:t1 DO SET compression WITH level=6 ON PROXY, SET encryption "
        "TO OBJECT_TYPE=DOCS, OBJECT_SIZE > 1M", vocab).policies
    assert policy.targets == (("tenant", "AUTH_t1"),)
    assert policy.actions == (
        CheckedAction("set", "compression", {"level": 6}, stage="proxy"),
        CheckedAction("set", "encryption"),
    )
    assert policy.object_conds == ({"kind": "type", "value": "DOCS"},
                                   {"kind": "size", "op": ">", "value": 1048576})
    assert not policy.dynamic


def test_filter_names_are_case_insensitive(vocab):
    (policy,) = check_text("FOR TENANT T1 WHEN PUTS_SEC > 3 DO SET COMPRESSION", vocab).policies
    assert policy.actions[0].filter == "compression"
    assert policy.condition == {"metric": "PUTS_SEC", "op": ">", "value": 3}
    assert policy.dynamic


def test_param_types_and_units_convert(vocab):
    (policy,) = check_text(
        "FOR TENANT t1 DO SET bandwidth WITH get=30MBps, put=1000, ops=500ops, burst=250ms, "
        "strict=yes, ratio=0.5, SET compression WITH algorithm=GZIP, frame_size=128K", vocab
    ).policies
    bandwidth, compression = policy.actions
    assert bandwidth.params == {"get": 30_000_000, "put": 1000, "ops": 500, "burst": 0.25,
                                "strict": True, "ratio": 0.5}
    assert compression.params == {"algorithm": "gzip", "frame_size": 131072}


def test_classes_expand_and_can_be_defined_in_the_same_submission(vocab):
    result = check_text(
        "DEFINE CLASS PLATINUM AS SET compression WITH level=3, SET bandwidth WITH get=1GBps\n"
        "FOR TENANT t1 DO SET platinum\nFOR TENANT t2 DO SET GOLD\nFOR ALL DO DELETE SILVER", vocab)
    assert [c.name for c in result.classes] == ["PLATINUM"]
    assert result.classes[0].qos_class.actions == \
        "SET compression WITH level=3, SET bandwidth WITH get=1GBps"
    platinum, gold, silver = result.policies
    assert [(a.filter, a.params, a.via_class) for a in platinum.actions] == [
        ("compression", {"level": 3}, "PLATINUM"), ("bandwidth", {"get": 10**9}, "PLATINUM")]
    assert [(a.filter, a.params) for a in gold.actions] == [("caching", {"head": 16 << 20}),
                                                            ("bandwidth", {"share": 4.0})]
    assert [(a.verb, a.filter) for a in silver.actions] == [("delete", "caching"),
                                                            ("delete", "bandwidth")]


def test_block_targets_take_block_filters(vocab):
    (policy,) = check_text("FOR VOLUME vol7 DO SET XOR WITH key=0x5a", vocab).policies
    assert policy.targets == (("volume", "vol7"),)
    assert policy.actions[0].params == {"key": 0x5A}


def test_unknown_tenant_is_a_warning_not_an_error(vocab):
    result = check_text("FOR TENANT t9 DO SET noop\nFOR CONTAINER t8/c DO SET noop", vocab)
    assert len(result.policies) == 2
    assert [str(w) for w in result.warnings] == [
        "line 1, column 5: tenant 'AUTH_t9' is not known yet (the policy applies once it exists)",
        "line 2, column 5: container 't8/c' of tenant 'AUTH_t8' is not known yet (the policy "
        "applies once it exists)",
    ]


def test_registry_changes_are_picked_up_without_code_changes(vocab):
    assert "unknown filter 'rot13'" in error_of("FOR ALL DO SET rot13", vocab)
    assert "unknown metric 'ERRORS'" in error_of("FOR ALL WHEN ERRORS > 1 DO SET noop", vocab)
    vocab.filters["rot13"] = FilterMetadata("rot13", "toy", params=(Param("n", "int"),))
    vocab.metrics["ERRORS"] = Metric("ERRORS")
    (policy,) = check_text("FOR ALL WHEN ERRORS > 1 DO SET ROT13 WITH n=13", vocab).policies
    assert policy.actions[0].params == {"n": 13}


@pytest.mark.parametrize(
    "text, message",
    [
        ("FOR TENANT T1 DO SET COMPRESION",
         "line 1, column 22: unknown filter 'COMPRESION' (did you mean COMPRESSION?)"),
        ("FOR TENANT t1 DO SET compression WITH levl=3",
         "line 1, column 39: unknown parameter 'levl' for compression (did you mean level?)"),
        ("FOR TENANT t1 DO SET noop WITH x=1", "unknown parameter 'x' for noop; it takes none"),
        ("FOR TENANT t1 DO SET compression WITH level=fast",
         "line 1, column 45: parameter 'level' of compression takes a whole number, got 'fast'"),
        ("FOR TENANT t1 DO SET compression WITH level=30",
         "parameter 'level' of compression must be in [1, 22], got 30"),
        ("FOR TENANT t1 DO SET compression WITH level=2.5", "takes a whole number"),
        ("FOR TENANT t1 DO SET compression WITH algorithm=lz4", "takes one of gzip, zstd"),
        ("FOR TENANT t1 DO SET compression WITH frame_size=10s", "takes a size"),
        ("FOR TENANT t1 DO SET bandwidth WITH get=100ops", "takes a rate"),
        ("FOR TENANT t1 DO SET bandwidth WITH ops=3MBps", "takes an operation rate"),
        ("FOR TENANT t1 DO SET bandwidth WITH strict=maybe", "takes true or false"),
        ("FOR TENANT t1 DO SET compression WITH level=3, level=4", "'level' given twice"),
        ("FOR TENANT t1 DO SET encryption ON OBJECT",
         "encryption cannot run ON OBJECT (it runs on: proxy)"),
        ("FOR TENANT t1 DO SET encryption SANDBOXED",
         "encryption cannot run SANDBOXED (it does not declare itself sandbox-capable)"),
        ("FOR TENANT t1 DO SET csv_select ON PUT",
         "csv_select applies to GET only: ON PUT would never run"),
        ("FOR TENANT t1 WHEN PUT_SEC > 3 DO SET noop",
         "line 1, column 20: unknown metric 'PUT_SEC' (did you mean PUTS_SEC or "),
        ("FOR TENANT t1 WHEN GET_BW > 5s DO SET noop", "GET_BW is a rate; 5s is a duration"),
        ("FOR TENANT t1 WHEN LATENCY > fast DO SET noop", "compared with a number"),
        ("FOR G:silver DO SET noop", "unknown group 'silver'"),
        ("FOR GROUP gld DO SET noop", "unknown group 'gld' (did you mean gold?)"),
        ("FOR ALL DO SET noop TO OBJECT_TYPE=DOC",
         "unknown object type 'DOC' (did you mean DOCS?)"),
        ("FOR ALL DO SET noop TO OBJECT_SIZE > 5s", "OBJECT_SIZE takes a size"),
        ("FOR ALL DO SET noop TRANSIENT", "TRANSIENT needs a WHEN condition"),
        ("FOR ALL DO SET GOLD WITH head=1M", "class GOLD is applied as a whole"),
        ("FOR TENANT t1 DO SET xor", "xor is a block filter: it applies to VOLUME/STORAGE_GROUP"),
        ("FOR VOLUME v1 DO SET compression",
         "compression is an object filter: it applies to object-storage targets only"),
        ("FOR VOLUME v1, TENANT t1 DO SET xor", "cannot mix VOLUME/STORAGE_GROUP targets"),
        ("FOR VOLUME v1 DO SET xor TO OBJECT_SIZE > 1M", "TO object conditions do not apply"),
        ("DEFINE CLASS COMPRESSION AS SET noop", "would hide the filter"),
        ("DEFINE CLASS X AS SET GOLD", "cannot contain the class GOLD"),
        ("FOR ALL DO SET noop ORDER 0", "ORDER counts from 1"),
    ],
)
def test_semantic_errors(vocab, text, message):
    assert message in error_of(text, vocab)


def test_every_bad_policy_is_reported_and_nothing_is_returned(vocab):
    with pytest.raises(DSLError) as info:
        check_text("FOR ALL DO SET noop\nFOR ALL DO SET nop\nFOR G:x DO SET noop", vocab)
    assert [d.line for d in info.value.diagnostics] == [2, 3]


def test_a_class_that_no_longer_checks_is_reported_where_it_is_used(vocab):
    vocab.classes["OLD"] = QosClass("OLD", "SET retired_filter")
    assert "line 1, column 16: class OLD no longer checks: unknown filter 'retired_filter'" in \
        error_of("FOR ALL DO SET OLD", vocab)


def test_redefining_a_class_warns(vocab):
    result = check_text("DEFINE CLASS GOLD AS SET noop", vocab)
    assert "redefines class GOLD" in str(result.warnings[0])


_PIECES = ["FOR", "TENANT", "t1", "CONTAINER", "t1/c", "G:gold", "VOLUME v", "DO", "SET",
           "DELETE", "compression", "GOLD", "xor", "bandwidth", "WITH", "level=", "get=",
           "key=", "0x5a", "30MBps", "9", "99", "5s", "WHEN", "PUTS_SEC", ">", "3", "AND", "TO",
           "OBJECT_TYPE=DOCS", "OBJECT_SIZE", "1M", "ON", "PROXY", "OBJECT", "GET", "PUT",
           "TRANSIENT", "ORDER", "2", ",", ";", "\n", "DEFINE CLASS X AS", "strict=maybe"]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(_PIECES), max_size=20))
def test_fuzz_check_raises_only_dsl_error(vocab, pieces):
    try:
        check_text(" ".join(pieces), vocab)
    except DSLError:
        pass


# -- the paper's positional parameters ----------------------------------------------------


def test_paramn_is_the_filters_nth_declared_parameter(vocab):
    (policy,) = check_text("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=30MBps", vocab).policies
    assert policy.actions[0].params == {"get": 30_000_000}
    declared = [p.name for p in vocab.filters["bandwidth"].params]
    (mixed,) = check_text("FOR TENANT T2 DO SET bandwidth WITH put=10MBps, param3=100ops, "
                          "PARAM1=30MBps", vocab).policies
    assert mixed.actions[0].params == {declared[1]: 10_000_000, declared[2]: 100,
                                       declared[0]: 30_000_000}


def test_paramn_in_a_class_definition_expands_to_names(vocab):
    result = check_text("DEFINE CLASS FAST AS SET bandwidth WITH PARAM1=1GBps\n"
                        "FOR TENANT t1 DO SET FAST", vocab)
    assert result.policies[0].actions[0].params == {"get": 10**9}


@pytest.mark.parametrize(("text", "message"), [
    ("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM8=30MBps",
     "line 1, column 37: PARAM8: bandwidth declares 7 parameters (get, put, ops, burst, "
     "strict, ratio, share)"),
    ("FOR TENANT T2 DO SET noop WITH PARAM1=1", "line 1, column 32: PARAM1: noop declares 0 "
                                               "parameters (none)"),
    ("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=30MBps, get=1MBps",
     "line 1, column 52: parameter 'get' given twice (as PARAM1 and as get)"),
    ("FOR TENANT T2 DO SET noop\nFOR TENANT T2 DO SET BANDWIDTH WITH get=1MBps, PARAM1=3MBps",
     "line 2, column 48: parameter 'get' given twice (as get and as PARAM1)"),
    ("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=3ops",
     "line 1, column 44: parameter 'get' (PARAM1) of bandwidth takes a rate, got '3ops'"),
    ("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM0=3", "unknown parameter 'param0' for bandwidth"),
])
def test_paramn_mistakes_are_errors_at_their_line_and_column(vocab, text, message):
    assert message in error_of(text, vocab)


def test_a_filter_declaring_a_param_called_paramn_keeps_it(vocab):
    vocab.filters["legacy"] = FilterMetadata("legacy", "x", params=(
        Param("level", "int"), Param("param1", "int")))
    (policy,) = check_text("FOR ALL DO SET legacy WITH PARAM1=3, level=4", vocab).policies
    assert policy.actions[0].params == {"param1": 3, "level": 4}


def warnings_of(text, vocab) -> list[str]:
    return [str(w) for w in check_text(text, vocab).warnings]


def test_bit_rates_convert_to_bytes_and_say_so(vocab):
    text = "FOR TENANT t1 DO SET bandwidth WITH get=30Mbps, put=1Gb/s"
    (policy,) = check_text(text, vocab).policies
    assert policy.actions[0].params == {"get": 3_750_000, "put": 125_000_000}
    assert warnings_of(text, vocab) == [
        "line 1, column 41: get=30Mbps is in bits: taken as 3,750,000 bytes/s (3.75 MB/s)",
        "line 1, column 53: put=1Gb/s is in bits: taken as 125,000,000 bytes/s (125 MB/s)"]


@pytest.mark.parametrize("text, warning", [
    ("FOR TENANT t1 DO SET bandwidth WITH get=30",
     "line 1, column 41: get=30 has no unit: taken as 30 bytes/s (write the unit, e.g. 30MBps)"),
    ("FOR TENANT t1 DO SET bandwidth WITH burst=2",
     "burst=2 has no unit: taken as 2 seconds (write the unit, e.g. 2ms)"),
    ("FOR TENANT t1 WHEN PUT_LATENCY_P95 > 200 DO SET noop",
     "line 1, column 38: PUT_LATENCY_P95 > 200 has no unit: taken as 200 seconds"),
    ("FOR TENANT t1 WHEN GET_BW > 100 DO SET noop",
     "GET_BW > 100 has no unit: taken as 100 bytes/s"),
])
def test_a_bare_rate_or_duration_warns_naming_the_unit_taken(vocab, text, warning):
    (found,) = warnings_of(text, vocab)
    assert warning in found


@pytest.mark.parametrize("text", [
    "FOR TENANT t1 DO SET bandwidth WITH get=30MBps, ops=500, burst=250ms",
    "FOR TENANT t1 DO SET bandwidth WITH burst=0",  # zero needs no unit
    "FOR TENANT t1 WHEN PUTS_SEC > 3 AND LATENCY > 200ms DO SET noop",
    "FOR TENANT t1 DO SET compression WITH frame_size=65536",  # bytes are what a size means
])
def test_values_with_units_or_unitless_kinds_do_not_warn(vocab, text):
    assert warnings_of(text, vocab) == []


@pytest.mark.parametrize("text, message", [
    ("FOR TENANT t1 DO SET bandwidth WITH get=30MB",
     "parameter 'get' of bandwidth takes a rate, got '30MB' (did you mean 30MBps?)"),
    ("FOR TENANT t1 WHEN GET_BW > 30MB DO SET noop",
     "GET_BW is a rate; 30MB is a size (did you mean 30MBps?)"),
    ("FOR TENANT t1 WHEN PUT_LATENCY > 1s DO SET noop",
     "unknown metric 'PUT_LATENCY' (did you mean PUT_LATENCY_P99 or PUT_LATENCY_P95 or "
     "PUT_LATENCY_P50?)"),
    ("FOR TENANT t1 WHEN ZZZ > 1 DO SET noop", "unknown metric 'ZZZ'; known metrics: "),
])
def test_unit_and_metric_mistakes_suggest_the_fix(vocab, text, message):
    assert message in error_of(text, vocab)


@pytest.mark.parametrize(("text", "where"), [
    ("FOR CONTAINER t3/x DO SET mine", "container AUTH_t3/x"),
    ("FOR TENANT t1, TENANT t3 DO SET mine", "tenant AUTH_t3"),
    ("FOR G:gold DO SET mine", "group gold"),
    ("FOR ALL DO SET mine", "every tenant"),
])
def test_a_tenants_own_filter_set_for_another_tenant_is_an_error_at_the_action(vocab, text,
                                                                               where):
    vocab.filters["mine"] = FilterMetadata("mine", "t1's upload", sandboxable=True,
                                           extra={"runtime": "storlet", "tenant": "AUTH_t1"})
    with pytest.raises(DSLError) as err:
        check_text(f"FOR CONTAINER t1/a DO SET noop\n{text}", vocab)
    (diagnostic,) = err.value.diagnostics
    assert (diagnostic.line, diagnostic.column) == (2, text.index("SET mine") + 5)  # at the name
    assert f"mine is tenant AUTH_t1's own filter: it cannot be set for {where}" \
        in diagnostic.message
    # On the owner's own data it checks, under every kind of target.
    checked = check_text("FOR TENANT t1 DO SET mine\nFOR OBJECT t1/c/o DO SET mine", vocab)
    assert [a.filter for p in checked.policies for a in p.actions] == ["mine", "mine"]
