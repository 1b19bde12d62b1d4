"""``TO OBJECT_AGE``: the language accepts it with a duration, resolution compares the age."""

from __future__ import annotations

import pytest

from iostack.atrest.inspect import stored_object
from iostack.atrest.simulate import request_info
from iostack.controller.builtins import CLASSES, METRICS, OBJECT_TYPES
from iostack.dsl import DSLError
from iostack.dsl.checker import check_text
from iostack.dsl.vocabulary import Vocabulary
from iostack.filters.library import builtin_metadata
from iostack.policy.resolve import Level, RequestInfo, resolve

FILTERS = {m.name: m for m in builtin_metadata()}
VOCAB = Vocabulary(filters=FILTERS, metrics={m.name: m for m in METRICS},
                   classes={c.name: c for c in CLASSES}, groups={},
                   object_types=dict(OBJECT_TYPES), tenants={"AUTH_t1"})
DAY = 86400


def test_object_age_takes_a_duration_in_days_or_smaller_units():
    (policy,) = check_text("FOR TENANT t1 DO SET COMPRESSION TO OBJECT_AGE > 30d, "
                           "OBJECT_SIZE > 1K", VOCAB).policies
    assert policy.object_conds == ({"kind": "age", "op": ">", "value": 30 * DAY},
                                   {"kind": "size", "op": ">", "value": 1024})
    (hours,) = check_text("FOR TENANT t1 DO SET COMPRESSION TO OBJECT_AGE >= 12h",
                          VOCAB).policies
    assert hours.object_conds == ({"kind": "age", "op": ">=", "value": 12 * 3600},)
    with pytest.raises(DSLError, match="OBJECT_AGE takes a duration"):
        check_text("FOR TENANT t1 DO SET COMPRESSION TO OBJECT_AGE > 30M", VOCAB)


def _pipeline(info: RequestInfo) -> list[str]:
    rule = {"id": "P1.1", "policy": "P1", "verb": "set", "filter": "compression",
            "params": {}, "object_conds": [{"kind": "age", "op": ">", "value": 30 * DAY}]}
    resolution = resolve(info, [Level("tenant", "AUTH_t1", (rule,))], FILTERS, {})
    return [e.filter for e in resolution.pipeline], [n.reason for n in resolution.notes]


def test_a_write_is_a_new_object_and_a_stored_one_has_its_age():
    fresh = RequestInfo("PUT", "AUTH_t1", "logs", "a.csv", 10)
    assert _pipeline(fresh) == ([], ["age 0 s is not > 2592000 s"])
    stored = stored_object("AUTH_t1", "logs", "a.csv",
                           {"Content-Length": "10", "X-Backend-Timestamp": "1000000000.00000"})
    assert _pipeline(request_info(stored, 1000000000 + 29 * DAY))[0] == []
    assert _pipeline(request_info(stored, 1000000000 + 31 * DAY))[0] == ["compression"]
