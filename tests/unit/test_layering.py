"""The README's layering rules ("Arrows run one way"), checked over the import graph.

The graph holds every import of every module under ``iostack/``, including
imports inside functions (a lazy import is still an arrow): a new arrow
against a rule fails here, naming the file and line. Each rule below is one
sentence of the README's paragraph; change both together.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path

import pytest

from iostack.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]

# The child parses (CPython 3.11's AST builder shares its recursion depth
# between threads, gh-106905): {module: [[imported iostack module, line], ...]}.
GRAPH_SCRIPT = r"""
import ast, json, sys
from pathlib import Path
root = Path(sys.argv[1])
paths = {}
for path in sorted((root / "iostack").rglob("*.py")):
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    paths[".".join(parts)] = path
graph = {}
for module, path in paths.items():
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # ``from pkg import mod`` is an arrow to pkg.mod; to pkg only for names
            # pkg itself defines.
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.append((name if name in paths else base, node.lineno))
    graph[module] = sorted({(name, line) for name, line in found
                            if name.startswith("iostack.")})
print(json.dumps(graph))
"""


@cache
def import_graph() -> dict[str, list[tuple[str, int]]]:
    out = subprocess.run([sys.executable, "-c", GRAPH_SCRIPT, str(ROOT)],  # noqa: S603
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return {module: [tuple(edge) for edge in edges] for module, edges in json.loads(out).items()}


def within(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def arrows(importers: Iterable[str], targets: Iterable[str], allowed_importers: Iterable[str] = (),
           allowed_targets: Iterable[str] = ()) -> list[str]:
    """Every import by a module of ``importers`` (not of ``allowed_importers``) of a
    module of ``targets`` (not of ``allowed_targets``), as ``importer:line -> target``."""
    importers, targets = tuple(importers), tuple(targets)
    allowed_importers, allowed_targets = tuple(allowed_importers), tuple(allowed_targets)
    return [f"{module}:{line} -> {target}"
            for module, edges in import_graph().items()
            if within(module, importers) and not within(module, allowed_importers)
            for target, line in edges
            if within(target, targets) and not within(target, allowed_targets)]


# The README's names for each side.
SHARED = ("iostack.policy", "iostack.filters", "iostack.stored_object", "iostack.monitoring",
          "iostack.bounded_json", "iostack.private_files", "iostack.ports",
          "iostack.endpoints", "iostack.service_probes")
CONTROLLER = ("iostack.controller",)
MIDDLEWARE = ("iostack.swift_middleware",)
TOOLS = ("iostack.atrest", "iostack.doctor", "iostack.block_bridge", "iostack.spark")
EVERYTHING = ("iostack",)


def component(module: str) -> str:
    """``iostack.controller.api.base`` -> ``iostack.controller``."""
    return ".".join(module.split(".")[:2])


def components() -> set[str]:
    return {component(m) for m in import_graph() if m.count(".")}


def test_the_graph_sees_every_module_and_lazy_imports():
    graph = import_graph()
    assert set(SHARED) | set(TOOLS) | {"iostack.aio", "iostack.dsl"} <= components()
    # ``iostack.select`` imports its client inside the function: still an arrow.
    assert any(target.startswith("iostack.") and target != "iostack"
               for target, _ in graph["iostack"])
    assert len(graph) > 200


def test_the_shared_side_imports_only_the_shared_side():
    assert arrows(SHARED, EVERYTHING, allowed_targets=SHARED) == []


def test_the_controller_and_the_middleware_never_import_each_other():
    assert arrows(CONTROLLER, MIDDLEWARE) == []
    assert arrows(MIDDLEWARE, CONTROLLER) == []


def test_only_the_controller_uses_the_dsl():
    assert arrows(EVERYTHING, ("iostack.dsl",), allowed_importers=("iostack.dsl", *CONTROLLER)) \
        == []


def test_the_storlet_runtime_is_used_by_the_middleware_and_the_tools_that_deploy_or_check_it():
    assert arrows(EVERYTHING, ("iostack.storlet_runtime",), allowed_importers=(
        "iostack.storlet_runtime", *MIDDLEWARE, "iostack.aio", "iostack.doctor")) == []


CONTROLLER_CLIENT_SIDE = ("iostack.controller.client", "iostack.controller.cli",
                          "iostack.controller.formatting")


def test_outside_the_controller_only_its_client_side_is_imported():
    assert arrows(EVERYTHING, CONTROLLER, allowed_importers=CONTROLLER,
                  allowed_targets=CONTROLLER_CLIENT_SIDE) == []


def test_the_api_does_not_import_the_console():
    assert arrows(("iostack.controller.api",), ("iostack.controller.ui",)) == []
    assert arrows(("iostack.controller.ui",), ("iostack.controller.app",)) == []


def test_nothing_imports_the_all_in_one():
    # The CLIs find the stack through endpoints.py, doctor probes through service_probes.py.
    assert arrows(EVERYTHING, ("iostack.aio",), allowed_importers=("iostack.aio",)) == []


def test_the_tools_are_imported_only_by_themselves_and_the_all_in_one():
    for tool in TOOLS:
        assert arrows(EVERYTHING, (tool,), allowed_importers=(tool, "iostack.aio")) == [], tool


def test_components_form_no_cycle():
    edges: dict[str, set[str]] = {}
    for module, imports in import_graph().items():
        source = component(module)
        for target, _ in imports:
            if component(target) != source:
                edges.setdefault(source, set()).add(component(target))
    in_cycles = []
    for start in edges:
        seen, todo = set(), list(edges[start])
        while todo:
            node = todo.pop()
            if node == start:
                in_cycles.append(start)
                break
            if node not in seen:
                seen.add(node)
                todo += edges.get(node, ())
    assert sorted(in_cycles) == []


def test_a_rule_broken_in_a_function_body_is_caught(tmp_path):
    package = tmp_path / "iostack" / "policy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "lazy.py").write_text("def f():\n    from ..controller import store\n")
    (tmp_path / "iostack" / "controller").mkdir()
    (tmp_path / "iostack" / "controller" / "store.py").write_text("")
    out = subprocess.run([sys.executable, "-c", GRAPH_SCRIPT, str(tmp_path)],  # noqa: S603
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert ["iostack.controller.store", 2] in json.loads(out)["iostack.policy.lazy"]


def test_filter_upload_is_the_storlet_runtimes_upload_mounted_by_the_command():
    parser = build_parser()
    argv = ["upload", "f.py", "--name", "rot13", "--main", "Rot13.Rot13", "--tenant", "t1"]
    via_filter = parser.parse_args(["filter", *argv])
    via_storlet = parser.parse_args(["storlet", *argv])
    keys = ("file", "name", "main", "tenant")
    assert [getattr(via_filter, k) for k in keys] == [getattr(via_storlet, k) for k in keys] \
        == ["f.py", "rot13", "Rot13.Rot13", "t1"]
    assert via_filter.func.__code__ is via_storlet.func.__code__
    assert via_filter.func.__closure__[0].cell_contents is \
        via_storlet.func.__closure__[0].cell_contents  # the same cmd_upload


@pytest.mark.parametrize("module", ["iostack.controller.server", "iostack.controller.cli"])
def test_the_controller_loads_nothing_of_the_middleware_the_runtime_or_the_tools(module):
    code = (f"import sys, json, {module}; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('iostack'))))")
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True,  # noqa: S603
                                       text=True, check=True, timeout=120).stdout)
    assert [m for m in loaded if within(m, (*MIDDLEWARE, "iostack.storlet_runtime",
                                            "iostack.aio", *TOOLS))] == []
