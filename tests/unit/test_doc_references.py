"""Every module a docstring or a doc names exists: dotted ``iostack.…`` names, ``….py``
paths, and the submodules a package's docstring lists. A module moved or renamed
without its mentions fails here, not in a reader's hands."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOTTED = re.compile(r"\biostack(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
PATH = re.compile(r"`+((?:[a-z_][a-z0-9_-]*/)*[a-z_][a-z0-9_]*\.py)`+")  # not NAME placeholders
LISTED = re.compile(r"^\s*- ((?:``\w+``(?:,| and)?\s*)+):", re.M)  # "- ``a``, ``b``: ..."
# "Modules of ``pkg``: ``a`` (what it does), ``b`` (...)" and "the ``a`` module".
MODULES = re.compile(r"Modules(?: of ``(?P<pkg>[\w.]+)``)?:(?P<items>.*?)(?:\n\n|$)", re.S)
MODULE_WORD = re.compile(r"``(\w+)`` module\b")
# Dotted names that are not modules: WSGI environ keys, entry-point groups, metadata keys.
NOT_MODULES = {"iostack.view", "iostack.filter_catalogs", "iostack.code_sha256",
               "iostack.storlet"}
# Files named as what a user writes or an attacker plants, not files of the tree.
NOT_FILES = {"my_xor.py", "json.py"}
SEARCHED = ("iostack", "tests", "bench", "deploy", "docs")


# The trees are built in a child interpreter: CPython 3.11 keeps the AST builder's
# recursion depth in interpreter-wide state (gh-106905), so a thread an earlier test
# left running that parses at the same time fails ast.parse here with "AST constructor
# recursion depth mismatch" (seen in a full CI run, three tries in a row).
SUMMARIZE = """
import ast, json, sys
from pathlib import Path
out = {}
for path in map(Path, sys.argv[1:]):
    tree = ast.parse(path.read_text("utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    docs = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            text = ast.get_docstring(node, clean=False)
            if text:
                docs.append([text, node is tree])
    out[str(path)] = {"names": sorted(names), "docstrings": docs}
json.dump(out, sys.stdout)
"""


@cache
def summaries() -> dict[str, dict]:
    """Top-level names and docstrings (text, is the module's) of every file in iostack/."""
    files = [str(p) for p in sorted((ROOT / "iostack").rglob("*.py"))]
    child = subprocess.run([sys.executable, "-c", SUMMARIZE, *files],
                           capture_output=True, text=True, check=True)
    return json.loads(child.stdout)


def module_file(dotted: str) -> Path | None:
    base = ROOT.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def top_level_names(path: Path) -> frozenset[str]:
    return frozenset(summaries()[str(path)]["names"])


def resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = module_file(".".join(parts[:cut]))
        if path is not None:
            rest = parts[cut:]
            return not rest or rest[0] in top_level_names(path)
    return False


@cache
def docstrings() -> tuple[tuple[str, str, bool], ...]:
    """(where, text, is a package's docstring) of every docstring in iostack/."""
    return tuple((str(Path(path).relative_to(ROOT)), text,
                  module_doc and path.endswith("/__init__.py"))
                 for path, summary in summaries().items()
                 for text, module_doc in summary["docstrings"])


def texts() -> list[tuple[str, str]]:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [(w, t) for w, t, _ in docstrings()] + [
        (str(p.relative_to(ROOT)), p.read_text("utf-8")) for p in docs]


@cache
def python_files() -> frozenset[str]:
    return frozenset(str(p.relative_to(ROOT)) for d in SEARCHED for p in (ROOT / d).rglob("*.py"))


def path_exists(path: str) -> bool:
    return any(f == path or f.endswith("/" + path) for f in python_files())


def test_every_dotted_iostack_name_resolves():
    broken = sorted({(where, m.group(0)) for where, text in texts()
                     for m in DOTTED.finditer(text)
                     if m.group(0) not in NOT_MODULES and not resolves(m.group(0))})
    assert broken == []


def test_every_python_file_named_exists():
    broken = sorted({(where, m.group(1)) for where, text in texts()
                     for m in PATH.finditer(text)
                     if m.group(1) not in NOT_FILES and not path_exists(m.group(1))})
    assert broken == []


def test_the_modules_a_package_docstring_lists_exist():
    broken = []
    for where, text, package in docstrings():
        if not package:
            continue
        dotted = where.removesuffix("/__init__.py").replace("/", ".")
        for item in LISTED.finditer(text):
            for name in re.findall(r"``(\w+)``", item.group(1)):
                if module_file(f"{dotted}.{name}") is None:
                    broken.append((where, name))
    assert broken == []


def test_modules_named_as_modules_exist():
    broken = []
    for where, text, _ in docstrings():
        package = where.rsplit("/", 1)[0].replace("/", ".")
        for listing in MODULES.finditer(text):
            home = listing.group("pkg") or package
            broken += [(where, f"{home}.{name}") for name in
                       re.findall(r"``(\w+)``\s*\(", listing.group("items"))
                       if module_file(f"{home}.{name}") is None]
        broken += [(where, name) for name in MODULE_WORD.findall(text)
                   if module_file(f"{package}.{name}") is None]
    assert broken == []


def test_the_checks_catch_a_stale_name():
    assert not resolves("iostack.controller.resolve") and resolves("iostack.policy.resolve")
    assert resolves("iostack.policy.reader.PolicyReader")
    assert not resolves("iostack.policy.reader.NoSuchThing")
    assert path_exists("enforce/proxy.py") and not path_exists("controller/resolve.py")


def test_the_filter_table_lists_every_library_filter():
    from iostack.filters.library import builtin_metadata

    text = (ROOT / "docs" / "filters.md").read_text("utf-8")
    table = text[:text.index("## The contract")]
    listed = set(re.findall(r"^\| `(\w+)` \|", table, re.M))
    assert listed == {m.name for m in builtin_metadata()}
