"""Filter catalogs: filters other components ship, for the controller's vocabulary.

The filter library (``iostack.filters.library``) is the controller's own
vocabulary. A component that ships further filters (the block bridge's block
filters) publishes a ``FilterCatalog`` under the entry-point group
``iostack.filter_catalogs`` in ``pyproject.toml``, as Storlets' gateways are
published under ``storlets.gateways``::

    [project.entry-points."iostack.filter_catalogs"]
    block = "iostack.block_bridge.catalog:CATALOG"

and the controller seeds its registry from ``load_catalogs()`` without
importing the component. Entry points are read from the installed
distribution's metadata: after adding one, reinstall (``pip install -e .``).
A group with no catalog at all (metadata older than this mechanism) is an
error, not an empty list: the block filters would silently be missing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from iostack.filters.metadata import FilterMetadata

GROUP = "iostack.filter_catalogs"

Validator = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class FilterCatalog:
    """``filters()``: the metadata to register; ``validators()``: each filter's own
    parameter check by name (raises ValueError with the reason)."""

    filters: Callable[[], list[FilterMetadata]]
    validators: Callable[[], dict[str, Validator]]


class CatalogError(RuntimeError):
    """No catalog registered, or an entry point that is not a ``FilterCatalog``."""


def load_catalogs(found: Iterable[EntryPoint]) -> list[FilterCatalog]:
    """The catalogs the entry points name, by entry-point name."""
    catalogs = []
    for point in sorted(found, key=lambda p: p.name):
        catalog = point.load()
        if not isinstance(catalog, FilterCatalog):
            raise CatalogError(f"entry point {point.name} = {point.value} in {GROUP} is not "
                               "a FilterCatalog")
        catalogs.append(catalog)
    if not catalogs:
        raise CatalogError(f"no filter catalog is registered under the entry-point group "
                           f"{GROUP} (the block filters would be missing): reinstall iostack "
                           "(pip install -e .) so that its entry points are installed")
    return catalogs


@functools.cache
def registered_catalogs() -> tuple[FilterCatalog, ...]:
    """The installed distribution's catalogs (read once per process)."""
    return tuple(load_catalogs(entry_points(group=GROUP)))
