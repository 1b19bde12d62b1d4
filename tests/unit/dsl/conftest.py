"""A vocabulary for checker tests: the library's filters plus GET-only, block and secret ones."""

from __future__ import annotations

import pytest

from iostack.controller.builtins import CLASSES, METRICS, OBJECT_TYPES
from iostack.dsl.vocabulary import Vocabulary
from iostack.filters.library import builtin_metadata
from iostack.filters.metadata import FilterMetadata, Param

EXTRA_FILTERS = (
    FilterMetadata("csv_select", "CSV projection", params=(Param("columns", "str"),),
                   methods=frozenset({"GET"}), stages=frozenset({"proxy", "object"}),
                   default_stage="object"),
    FilterMetadata("bandwidth", "rate limit",
                   params=(Param("get", "rate", minimum=1), Param("put", "rate", minimum=1),
                           Param("ops", "rate", unit="ops"), Param("burst", "duration"),
                           Param("strict", "bool"), Param("ratio", "float", maximum=1.0),
                           Param("share", "float")),
                   methods=frozenset({"GET", "PUT"})),
    FilterMetadata("xor", "block xor", params=(Param("key", "int", minimum=0, maximum=255),),
                   extra={"domain": "block"}),
    FilterMetadata("vault", "secret", params=(Param("key", "secret"),)),
)


@pytest.fixture
def vocab() -> Vocabulary:
    filters = {m.name: m for m in (*builtin_metadata(), *EXTRA_FILTERS)}
    return Vocabulary(
        filters=filters, metrics={m.name: m for m in METRICS},
        classes={c.name: c for c in CLASSES}, groups={"gold": ["AUTH_t1", "AUTH_t2"]},
        object_types=dict(OBJECT_TYPES), tenants={"AUTH_t1", "AUTH_t2"},
    )
