"""Filter catalogs come through entry points; a missing registration fails loudly."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from iostack.block_bridge import catalog as block_catalog
from iostack.controller import builtins
from iostack.filters.catalogs import (
    GROUP,
    CatalogError,
    FilterCatalog,
    load_catalogs,
    registered_catalogs,
)

PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"


def point(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=GROUP)


def test_no_registered_catalog_is_an_error_that_says_how_to_fix_it():
    with pytest.raises(CatalogError, match=r"block filters would be missing.*pip install -e \."):
        load_catalogs([])


def test_an_entry_point_that_is_not_a_catalog_is_refused():
    with pytest.raises(CatalogError, match="block_filters .* is not a FilterCatalog"):
        load_catalogs([point("block", "iostack.block_bridge.catalog:block_filters")])


def test_the_block_catalog_loads_through_its_entry_point():
    [catalog] = load_catalogs([point("block", "iostack.block_bridge.catalog:CATALOG")])
    assert isinstance(catalog, FilterCatalog)
    names = {meta.name for meta in catalog.filters()}
    assert {"xor", "aes_xts", "iops"} <= names
    with pytest.raises(ValueError):
        catalog.validators()["xor"]({"key": 999})


def test_pyproject_registers_the_block_catalog():
    section = PYPROJECT.read_text("utf-8").split(f'[project.entry-points."{GROUP}"]\n', 1)[1]
    assert section.split("\n\n", 1)[0].splitlines() == [
        'block = "iostack.block_bridge.catalog:CATALOG"']


def test_the_installed_metadata_has_the_block_catalog_and_the_controller_seeds_it():
    # Fails (CatalogError) on an install older than the entry point: pip install -e .
    assert block_catalog.CATALOG in registered_catalogs()
    seeded = {meta.name for meta in builtins.builtin_filters()}
    assert {"compression", "xor", "aes_xts"} <= seeded
    assert "aes_xts" in builtins.builtin_validators()
