"""The test tree's layout rule: pytest imports test modules by file name.

Test directories are not packages (test helpers import their siblings by
name), so two files with the same name in different directories, or an
``__init__.py`` turning two directories into same-named packages, break
collection of the whole suite.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_packages_under_tests():
    assert sorted(TESTS.rglob("__init__.py")) == []


def test_module_names_are_unique():
    names = Counter(p.name for p in TESTS.rglob("*.py") if p.name != "conftest.py")
    assert [name for name, count in names.items() if count > 1] == []
