"""``SET EXPIRY WITH after=<duration>``: checked like any filter, errors at line and column."""

from __future__ import annotations

import dataclasses

import pytest

from iostack.controller.builtins import builtin_validators
from iostack.dsl import DSLError
from iostack.dsl.checker import check_text
from iostack.filters.builtin.expiry import MAX_AFTER, delete_at


@pytest.fixture
def lifecycle_vocab(vocab):
    return dataclasses.replace(vocab, validators=builtin_validators())


def test_expiry_takes_a_duration_in_seconds(lifecycle_vocab):
    (policy,) = check_text("FOR CONTAINER AUTH_t1/logs DO SET EXPIRY WITH after=90d",
                           lifecycle_vocab).policies
    assert policy.actions[0].filter == "expiry"
    assert policy.actions[0].params == {"after": 90 * 86400}
    (policy,) = check_text("FOR TENANT t1 DO SET expiry WITH after=12h TO OBJECT_TYPE=LOGS",
                           lifecycle_vocab).policies
    assert policy.actions[0].params == {"after": 12 * 3600}


@pytest.mark.parametrize(("text", "column", "message"), [
    ("FOR TENANT t1 DO SET EXPIRY WITH after=soon", 40, "takes a duration (e.g. 5s), got 'soon'"),
    ("FOR TENANT t1 DO SET EXPIRY WITH after=0s", 40, "must be in [1, 3153600000], got 0s"),
    ("FOR TENANT t1 DO SET EXPIRY WITH after=101000d", 40, "must be in [1, 3153600000]"),
    ("FOR TENANT t1 DO SET EXPIRY WITH after=9y", 40, "unknown unit 'y'"),
    ("FOR TENANT t1 DO SET EXPIRY WITH afer=9d", 34, "did you mean after?"),
    ("FOR TENANT t1 DO SET EXPIRY", 22, "'after': required: how long objects live"),
    ("FOR TENANT t1 DO SET EXPIRY WITH after=9d ON OBJECT", 22, "cannot run ON OBJECT"),
])
def test_bad_expiry_is_an_error_at_its_line_and_column(lifecycle_vocab, text, column, message):
    with pytest.raises(DSLError) as err:
        check_text("FOR TENANT t2 DO SET COMPRESSION\n" + text, lifecycle_vocab)
    (diagnostic,) = err.value.diagnostics
    assert (diagnostic.line, diagnostic.column) == (2, column), diagnostic
    assert message in diagnostic.message, diagnostic.message


def test_the_delete_at_is_the_write_plus_after_or_the_tenants_when_sooner():
    assert delete_at({"after": 3600}, 1_000_000.7) == 1_003_600
    assert delete_at({"after": 3600}, 1_000_000, tenant_delete_at=1_000_100) == 1_000_100
    assert delete_at({"after": 3600}, 1_000_000, tenant_delete_at=9_000_000) == 1_003_600
    assert MAX_AFTER == 100 * 365 * 86400
