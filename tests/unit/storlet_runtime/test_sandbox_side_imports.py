"""The storlet runtime's sandbox side imports only what the sandbox holds.

The sandbox runs the system Python with ``/usr``, the ``iostack`` package and
the site-packages directory of Storlets bound read-only: the modules directly
in ``iostack/storlet_runtime/`` import the standard library, each other,
Storlets' agent side (``storlets.agent``, ``storlets.sbus``: what the sandbox
is built to run) and the filter library (``iostack.filters``, which
``filter_runner`` runs), never the host side (``host/``, ``tools/``), Swift,
eventlet or anything else. The storlets shipped as files (``storlets/``)
import the standard library alone: the sandbox loads them by file name.
Imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import iostack.storlet_runtime

PACKAGE = Path(iostack.storlet_runtime.__file__).resolve().parent
ALLOWED_BEYOND_STDLIB = ("storlets.agent", "storlets.sbus", "iostack.filters")

# Parsed in a child interpreter: CPython 3.11's AST builder keeps its recursion depth in
# interpreter-wide state (gh-106905), so a thread another test left parsing at the same
# time would fail ast.parse here (see tests/unit/test_doc_references.py).
IMPORTS = """
import ast, json, sys
out = {}
for item in sys.argv[1:]:
    dotted, is_package, path = item.split("=", 2)
    package = dotted if is_package == "1" else dotted.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            found += [[alias.name, node.lineno] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            # "from pkg import name": name may be a module of pkg
            found += [[base, node.lineno]] + [[f"{base}.{alias.name}", node.lineno]
                                              for alias in node.names if alias.name != "*"]
    out[dotted] = found
json.dump(out, sys.stdout)
"""


def imports_of(modules: dict[str, Path]) -> dict[str, list[tuple[str, int]]]:
    """What each module (dotted name -> file) imports: absolute names, with line numbers."""
    argv = [f"{dotted}={int(path.name == '__init__.py')}={path}"
            for dotted, path in modules.items()]
    child = subprocess.run([sys.executable, "-c", IMPORTS, *argv],  # noqa: S603
                           capture_output=True, text=True, check=True, timeout=60)
    return {m: [(name, line) for name, line in found]
            for m, found in json.loads(child.stdout).items()}


def sandbox_side() -> dict[str, Path]:
    modules = {"iostack.storlet_runtime": PACKAGE / "__init__.py"}
    modules |= {f"iostack.storlet_runtime.{p.stem}": p for p in sorted(PACKAGE.glob("*.py"))
                if p.name != "__init__.py"}
    return modules


def shipped_storlets() -> dict[str, Path]:
    return {f"iostack.storlet_runtime.storlets.{p.stem}": p
            for p in sorted((PACKAGE / "storlets").glob("*.py"))}


def is_stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def allowed_in_sandbox(name: str) -> bool:
    parts = name.split(".")
    if is_stdlib(name) or name == "iostack":
        return True
    if parts[:2] == ["iostack", "storlet_runtime"]:
        # the package itself, or a sandbox-side module of it (and the names in one)
        return len(parts) == 2 or ".".join(parts[:3]) in sandbox_side()
    return any(name == p or name.startswith(p + ".") for p in ALLOWED_BEYOND_STDLIB)


def violations(modules: dict[str, Path], allowed) -> list[tuple[str, int, str]]:
    return sorted((module, line, name) for module, found in imports_of(modules).items()
                  for name, line in found if not allowed(name))


def test_the_sandbox_side_imports_only_what_the_sandbox_holds():
    assert {"iostack.storlet_runtime.agent", "iostack.storlet_runtime.filter_runner",
            "iostack.storlet_runtime.sdk"} <= set(sandbox_side())
    assert violations(sandbox_side(), allowed_in_sandbox) == []


def test_the_shipped_storlets_import_only_the_standard_library():
    assert "iostack.storlet_runtime.storlets.upper" in shipped_storlets()
    assert violations(shipped_storlets(), is_stdlib) == []


def test_the_check_catches_swift_the_host_side_and_imports_inside_functions(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import json\n"
                   "from . import pipes\n"
                   "from iostack.storlet_runtime import sdk\n"
                   "from storlets.agent.common.utils import get_logger\n"
                   "from iostack.filters.library import get_filter\n"
                   "def later():\n"
                   "    import swift.common.utils\n"
                   "    from iostack.storlet_runtime.host import gateway\n"
                   "    from .host.runner import SandboxRunner\n"
                   "    from storlets.gateway.common.stob import StorletData\n"
                   "    import storletsx\n")
    found = violations({"iostack.storlet_runtime.bad": bad}, allowed_in_sandbox)
    assert [(line, name) for _, line, name in found] == [
        (7, "swift.common.utils"), (8, "iostack.storlet_runtime.host"),
        (8, "iostack.storlet_runtime.host.gateway"), (9, "iostack.storlet_runtime.host.runner"),
        (9, "iostack.storlet_runtime.host.runner.SandboxRunner"),
        (10, "storlets.gateway.common.stob"), (10, "storlets.gateway.common.stob.StorletData"),
        (11, "storletsx")]
    shipped = violations({"iostack.storlet_runtime.storlets.bad": bad}, is_stdlib)
    assert sorted({line for _, line, _ in shipped}) == [2, 3, 4, 5, 7, 8, 9, 10, 11]


def test_stored_storlet_code_imports_the_sandbox_side_by_its_published_names(tmp_path):
    """Library filters' storlets, the wrapper ``iostack filter upload`` appends to
    Storlets-API code and tenants' SDK filters are stored in Swift (and objects
    record the SHA-256 of the code that encoded them): the names they import
    must keep resolving to these sandbox-side modules."""
    from iostack.storlet_runtime.host.deploy import SDK_MODULE
    from iostack.storlet_runtime.host.packaging import filter_storlet
    from iostack.storlet_runtime.storlets_api import wrapped_code

    library, wrapper = tmp_path / "library.py", tmp_path / "wrapper.py"
    library.write_bytes(filter_storlet("noop").code)
    wrapper.write_bytes(wrapped_code(b"class S:\n    pass\n", "S"))
    stored = imports_of({"library": library, "wrapper": wrapper})
    assert {name for name, _ in stored["library"]} == {
        "iostack.storlet_runtime.filter_runner",
        *(f"iostack.storlet_runtime.filter_runner.{f}"
          for f in ("end_request_process", "load_filter", "run_filter"))}
    assert {name for name, _ in stored["wrapper"]} == {
        "iostack.storlet_runtime.storlets_api",
        "iostack.storlet_runtime.storlets_api.StorletsApiRunner"}
    assert SDK_MODULE == "iostack.storlet_runtime.sdk"
    assert {"iostack.storlet_runtime.filter_runner", "iostack.storlet_runtime.storlets_api",
            SDK_MODULE} <= set(sandbox_side())

