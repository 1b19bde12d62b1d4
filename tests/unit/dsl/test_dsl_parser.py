"""Grammar corpus: every construct of the policy language, and every syntax error class."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.dsl import DSLError, parse
from iostack.dsl.ast import BoolOp, ClassDef, Comparison, Policy, condition_text
from iostack.dsl.lexer import KEYWORDS
from iostack.dsl.units import UnitError, parse_size


def one(text: str) -> Policy:
    statements = parse(text)
    assert len(statements) == 1
    return statements[0]


def error_of(text: str) -> str:
    with pytest.raises(DSLError) as info:
        parse(text)
    return str(info.value)


# -- the paper's and Crystal's examples -------------------------------------


def test_paper_container_policy_means_that_container_in_any_account():
    policy = one("FOR CONTAINER C1 DO SET CACHING")
    assert [(t.kind, t.name) for t in policy.targets] == [("container", "*/C1")]
    assert [(a.verb, a.name) for a in policy.actions] == [("SET", "CACHING")]
    assert policy.condition is None


def test_paper_dynamic_policy():
    policy = one("FOR TENANT T1 WHEN PUTS_SEC > 3 DO SET COMPRESSION")
    assert policy.targets[0].kind == "tenant" and policy.targets[0].name == "T1"
    assert isinstance(policy.condition, Comparison)
    assert (policy.condition.metric, policy.condition.op) == ("PUTS_SEC", ">")
    assert policy.condition.value.data.value == 3


def test_paper_bandwidth_param_with_rate_unit():
    policy = one("FOR TENANT T2 DO SET BANDWIDTH WITH PARAM1=30MBps")
    (param,) = policy.actions[0].params
    assert param.name == "param1"
    assert param.value.data.kind == "rate" and param.value.data.value == 30_000_000


def test_crystal_form_with_stage_and_object_conditions():
    policy = one(
        "FOR TENANT:t1 DO SET compression WITH level=6 ON PROXY, SET encryption "
        "TO OBJECT_TYPE=DOCS, OBJECT_SIZE > 1M"
    )
    compression, encryption = policy.actions
    assert compression.name == "compression" and compression.stage == "proxy"
    assert [(p.name, p.value.data.value) for p in compression.params] == [("level", 6)]
    assert encryption.name == "encryption" and encryption.params == ()
    kinds = [(c.kind, c.op) for c in policy.object_conds]
    assert kinds == [("type", "=="), ("size", ">")]
    assert policy.object_conds[1].value.data.value == 1024 * 1024


@pytest.mark.parametrize(
    "text, expected",
    [
        ("FOR TENANT t1 DO SET x", [("tenant", "t1")]),
        ("FOR TENANT:t1 DO SET x", [("tenant", "t1")]),
        ("FOR CONTAINER AUTH_t1/logs DO SET x", [("container", "AUTH_t1/logs")]),
        ("FOR CONTAINER:t1/logs DO SET x", [("container", "t1/logs")]),
        ("FOR OBJECT t1/logs/a/b.csv DO SET x", [("object", "t1/logs/a/b.csv")]),
        ("FOR OBJECT:t1/logs/a.csv DO SET x", [("object", "t1/logs/a.csv")]),
        ('FOR OBJECT "t1/logs/a b.csv" DO SET x', [("object", "t1/logs/a b.csv")]),
        ("FOR GROUP gold DO SET x", [("group", "gold")]),
        ("FOR G:gold DO SET x", [("group", "gold")]),
        ("FOR TENANT G DO SET x", [("tenant", "G")]),
        ("FOR VOLUME vol7 DO SET x", [("volume", "vol7")]),
        ("FOR STORAGE_GROUP sg-1 DO SET x", [("storage_group", "sg-1")]),
        ("FOR ALL DO SET x", [("global", "*")]),
        ("for tenant t1, container t2/c, g:grp do set x",
         [("tenant", "t1"), ("container", "t2/c"), ("group", "grp")]),
    ],
)
def test_targets(text, expected):
    assert [(t.kind, t.name) for t in one(text).targets] == expected


def test_keywords_are_case_insensitive_but_names_keep_their_case():
    policy = one("fOr TeNaNt Alice wHeN puts_sec > 3 dO sEt Compression")
    assert policy.targets[0].name == "Alice"
    assert policy.condition.metric == "PUTS_SEC"
    assert policy.actions[0].name == "Compression"


def test_conditions_and_binds_tighter_than_or_and_parentheses_group():
    cond = one("FOR ALL WHEN A > 1 OR B > 2 AND C > 3 DO SET x").condition
    assert condition_text(cond) == "(A > 1 OR (B > 2 AND C > 3))"
    cond = one("FOR ALL WHEN (A > 1 OR B > 2) AND C >= 3 DO SET x").condition
    assert isinstance(cond, BoolOp) and cond.op == "AND"
    assert condition_text(cond) == "((A > 1 OR B > 2) AND C >= 3)"


@pytest.mark.parametrize("op, canonical", [(">", ">"), (">=", ">="), ("<", "<"), ("<=", "<="),
                                           ("==", "=="), ("=", "=="), ("!=", "!=")])
def test_comparison_operators(op, canonical):
    assert one(f"FOR ALL WHEN GET_BW {op} 10MBps DO SET x").condition.op == canonical


def test_several_actions_params_and_modifiers():
    policy = one(
        "FOR TENANT t1 DO SET bandwidth WITH get=100MBps, put=50MiBps ON OBJECT ORDER 2, "
        "SET grep WITH pattern='a,b' ON GET, DELETE caching, SET x TRANSIENT"
    )
    bandwidth, grep, delete, x = policy.actions
    assert [p.name for p in bandwidth.params] == ["get", "put"]
    assert bandwidth.params[1].value.data.value == 50 * 1024 * 1024
    assert (bandwidth.stage, bandwidth.order) == ("object", 2)
    assert grep.methods == ("GET",) and grep.params[0].value.data == "a,b"
    assert (delete.verb, delete.name) == ("DELETE", "caching")
    assert x.transient


def test_class_definition_and_use_in_one_submission():
    defn, policy = parse(
        "DEFINE CLASS gold AS SET COMPRESSION, SET BANDWIDTH WITH get=100MBps\n"
        "FOR TENANT t1 DO SET GOLD"
    )
    assert isinstance(defn, ClassDef) and defn.name == "GOLD"
    assert [a.name for a in defn.actions] == ["COMPRESSION", "BANDWIDTH"]
    assert policy.actions[0].name == "GOLD"


def test_block_policy_with_hex_key():
    policy = one("FOR VOLUME vol7 DO SET XOR WITH key=0x5a, SET IOPS WITH read=500ops, write=200")
    xor, iops = policy.actions
    assert xor.params[0].value.kind == "hex" and xor.params[0].value.data == 0x5A
    assert iops.params[0].value.data.kind == "ops"


@pytest.mark.parametrize(
    "raw, kind, value",
    [("512K", "size", 512 * 1024), ("1M", "size", 1024**2), ("2GiB", "size", 2 * 1024**3),
     ("3GB", "size", 3 * 10**9), ("100B", "size", 100), ("30MBps", "rate", 30 * 10**6),
     ("1MiB/s", "rate", 1024**2), ("500ops", "ops", 500), ("5s", "duration", 5),
     ("250ms", "duration", 0.25), ("2min", "duration", 120), ("1.5", "number", 1.5)],
)
def test_units(raw, kind, value):
    param = one(f"FOR ALL DO SET x WITH v={raw}").actions[0].params[0]
    assert param.value.data.kind == kind
    assert param.value.data.value == pytest.approx(value)


def test_object_conditions():
    policy = one(
        "FOR TENANT t1 DO SET x TO OBJECT_TYPE=DOCS, OBJECT_SIZE <= 512K, "
        "OBJECT_TAG=class:hot, OBJECT_NAME=~\\.csv$, OBJECT_NAME=~ \"^logs/.*, x\""
    )
    typ, size, tag, name, quoted = policy.object_conds
    assert typ.value.data == "DOCS"
    assert (size.op, size.value.data.value) == ("<=", 512 * 1024)
    assert (tag.key, tag.value.data) == ("class", "hot")
    assert name.value.data == r"\.csv$"
    assert quoted.value.data == "^logs/.*, x"


def test_statements_split_on_newlines_and_semicolons_with_comments():
    statements = parse(
        "# policies for the demo\n"
        "FOR TENANT t1 DO SET a; FOR TENANT t2 DO SET b  # trailing comment\n\n"
        "FOR TENANT t3 DO SET c\n"
    )
    assert [s.targets[0].name for s in statements] == ["t1", "t2", "t3"]
    assert statements[1].text == "FOR TENANT t2 DO SET b"
    assert statements[2].line == 4


def test_empty_text_has_no_statements():
    assert parse("") == []
    assert parse(" ;\n# nothing\n") == []


# -- errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, message",
    [
        ("FOR TENANT t1 DO SET compression blah",
         "line 1, column 34: unexpected 'blah' (expected ',', NATIVE, ON, ORDER, SANDBOXED, TO, "
         "TRANSIENT, WITH, end of policy)"),
        ("FOR ALL DO SET x SANDBOXED NATIVE", "SANDBOXED/NATIVE given twice"),
        ("FOR TENANT t1 DO", "line 1, column 17: unexpected end of policy"),
        ("FOR TENANT t1 SET x", "line 1, column 15: unexpected keyword SET"),
        ("FOR TENANT t1 DO SET x WITH l=5Mq", "line 1, column 31: unknown unit 'Mq'"),
        ("FOR TENANT t1 DO SET x $", "line 1, column 24: unexpected character '$'"),
        ("FOR OBJECT t1/c DO SET x", "line 1, column 12: OBJECT needs account/container/object"),
        ("FOR TENANT a/b DO SET x", "line 1, column 12: TENANT needs a name without '/'"),
        ("FOR CONTAINER a/b/c DO SET x", "line 1, column 15: CONTAINER needs account/container"),
        ("FOR ALL DO SET x TO OBJECT_NAME=~(a", "bad regular expression '(a'"),
        ("FOR ALL DO SET x ON SOMEWHERE", "ON takes PROXY, OBJECT or a method"),
        ("FOR ALL DO SET x ON PROXY ON OBJECT", "ON given twice"),
        ("FOR ALL DO SET x ORDER 1.5", "ORDER takes a whole number"),
        ("FOR ALL DO DELETE x, level=3", "parameter 'level' outside a SET ... WITH clause"),
        ("FOR ALL WHEN (A > 1 DO SET x", "unexpected keyword DO"),
        ("FOR ALL DO SET x TO OBJECT_SIZE > big", "unexpected 'big'"),
    ],
)
def test_syntax_errors_name_line_column_and_problem(text, message):
    assert message in error_of(text)


def test_every_broken_line_is_reported():
    with pytest.raises(DSLError) as info:
        parse("FOR TENANT t1 DO SET ok\nFOR TENANT DO SET x\nFOR ALL DO SET y WITH z=1Q")
    lines = [d.line for d in info.value.diagnostics]
    assert lines == [2, 3]


def test_overlong_conditions_are_rejected_not_crashing():
    text = "FOR ALL WHEN " + " AND ".join(f"M{i} > 1" for i in range(200)) + " DO SET x"
    assert "condition too long" in error_of(text)
    deep = "FOR ALL WHEN " + "(" * 5000 + "M > 1" + ")" * 5000 + " DO SET x"
    assert one(deep).condition.metric == "M"


# -- fuzz: the parser raises nothing but DSLError ---------------------------

_WORDS = sorted(KEYWORDS) + [
    "t1", "a/b", "a/b/c", "G:", "=", "==", ">", "<=", "!=", ",", ";", "\n", ":", "(", ")",
    "=~", "=~(", "1M", "30MBps", "0x5a", "'q'", '"', "'", "2.5", "9Q", "\\", "#", "$", "-",
]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=25))
def test_fuzz_token_soup_raises_only_dsl_error(words):
    try:
        parse(" ".join(words))
    except DSLError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=120))
def test_fuzz_arbitrary_text_raises_only_dsl_error(text):
    try:
        parse(text)
    except DSLError:
        pass


def test_runtime_modifiers():
    (policy,) = parse("FOR CONTAINER a/c DO SET noop SANDBOXED, SET compression native")
    assert [(a.name, a.runtime) for a in policy.actions] == [
        ("noop", "storlet"), ("compression", "native")]
    (plain,) = parse("FOR ALL DO SET noop")
    assert plain.actions[0].runtime is None


@pytest.mark.parametrize(
    "raw, value",
    [("30Mbps", 30 * 10**6 / 8), ("1Gbps", 10**9 / 8), ("30Mb/s", 30 * 10**6 / 8),
     ("100kbps", 100 * 1000 / 8), ("8bps", 1), ("30Mbit/s", 30 * 10**6 / 8),
     ("1Mibps", 1024**2 / 8)],
)
def test_bit_rates_mean_bits(raw, value):
    quantity = one(f"FOR ALL DO SET x WITH v={raw}").actions[0].params[0].value.data
    assert (quantity.kind, quantity.bits) == ("rate", True)
    assert quantity.value == pytest.approx(value)


def test_byte_rates_stay_bytes_and_are_not_flagged_as_bits():
    quantity = one("FOR ALL DO SET x WITH v=30MBps").actions[0].params[0].value.data
    assert (quantity.value, quantity.bits) == (30 * 10**6, False)


@pytest.mark.parametrize("raw, message", [
    ("10Mb", "'Mb' is megabits; sizes are in bytes: write 10MB (decimal) or 10MiB (binary)"),
    ("4Kib", "'Kib' is kilobits; sizes are in bytes: write 4KB (decimal) or 4KiB (binary)"),
    ("3gb", "'gb' is gigabits; sizes are in bytes: write 3GB (decimal) or 3GiB (binary)"),
])
def test_a_size_in_bits_is_refused_with_the_byte_spellings(raw, message):
    assert f"line 1, column 25: {message}" in error_of(f"FOR ALL DO SET x WITH v={raw}")


@pytest.mark.parametrize("text", ["FOR ALL DO SET csv_select WITH columns=user_id,status",
                                  "FOR ALL DO SET csv_select WITH columns=a, b TO OBJECT_TYPE=CSV"])
def test_an_unquoted_list_suggests_quoting_it(text):
    assert "a list is one quoted value: columns=" in error_of(text)


@pytest.mark.parametrize(("text", "size"), [
    ("2M", 2 << 20), ("2MB", 2_000_000), ("512KiB", 512 << 10), ("10", 10)])
def test_a_size_outside_a_policy_reads_as_in_the_language(text, size):
    # The CLI's --size and the console's explain form both read sizes this way.
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["-1", "2Mbps", "3s", "many"])
def test_what_is_not_a_size_is_refused_naming_it(text):
    with pytest.raises(UnitError, match=f"not a size: {text!r}"):
        parse_size(text)
