"""The built-in filter library, by name.

Each filter lives in its own module of ``iostack.filters.builtin`` with a
``METADATA`` declaration and a ``SPEC`` (``iostack.filters.base.FilterSpec``);
this module only lists them.
The controller publishes ``builtin_metadata()`` as the filter vocabulary; the
data path calls ``get_filter(name)`` to obtain encoders and views.
"""

from __future__ import annotations

import difflib
import functools
import importlib

from iostack.filters.base import FilterSpec
from iostack.filters.errors import UnknownFilterError
from iostack.filters.metadata import FilterMetadata

BUILTIN_MODULES = ("noop", "compression", "encryption", "caching", "bandwidth", "csv_select",
                   "json_select", "parquet_select", "grep", "expiry")


@functools.cache
def _specs() -> dict[str, FilterSpec]:
    specs = {}
    for module_name in BUILTIN_MODULES:
        spec = importlib.import_module(f"iostack.filters.builtin.{module_name}").SPEC
        specs[spec.name.lower()] = spec
    return specs


def builtin_metadata() -> list[FilterMetadata]:
    """Metadata of every built-in filter, in a stable order."""
    return [spec.metadata for spec in _specs().values()]


def filter_names() -> list[str]:
    return list(_specs())


def get_filter(name: str) -> FilterSpec:
    """The filter called ``name`` (case-insensitive); ``UnknownFilterError`` if none is."""
    spec = _specs().get(name.lower())
    if spec is None:
        known = filter_names()
        near = difflib.get_close_matches(name.lower(), known, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise UnknownFilterError(f"unknown filter {name!r} (known: {', '.join(known)}){hint}")
    return spec
