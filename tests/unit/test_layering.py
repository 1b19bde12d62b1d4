"""Arrows run one way: clients find the stack without importing ``iostack.aio``, the
controller does not import the storlet runtime's CLI or the block bridge, and the
``iostack`` command assembles the verbs one component adds to another's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from iostack.cli import build_parser


def imported_after(module: str) -> set[str]:
    """The iostack modules a fresh interpreter holds after importing ``module``."""
    code = (f"import sys, {module}; import json; "
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('iostack'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,  # noqa: S603
                         check=True, timeout=120).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("module, forbidden", [
    ("iostack.controller.cli", ("iostack.aio", "iostack.storlet_runtime")),
    ("iostack.controller.builtins", ("iostack.aio", "iostack.block_bridge")),
    ("iostack.storlet_runtime.cli", ("iostack.aio",)),
    ("iostack.doctor.cli", ("iostack.aio",)),  # doctor checks clusters aio never built
])
def test_a_module_does_not_import_what_sits_above_it(module, forbidden):
    found = {m for m in imported_after(module) if m.startswith(forbidden)}
    assert found == set()


CONTROLLER = "iostack.controller.server"
MIDDLEWARES = ("iostack.swift_middleware.enforce.proxy", "iostack.swift_middleware.enforce.object",
               "iostack.swift_middleware.select.proxy", "iostack.swift_middleware.select.object",
               "iostack.swift_middleware.qos", "iostack.swift_middleware.cache.middleware")
# What README's "Arrows run one way" names as shared, and each side's own.
SHARED = {"iostack.policy", "iostack.filters", "iostack.monitoring", "iostack.bounded_json",
          "iostack.stored_object"}


def packages(modules: set[str]) -> set[str]:
    return {".".join(m.split(".")[:2]) for m in modules if m.count(".")}


def test_the_controller_and_the_middleware_share_what_readme_says_and_nothing_else():
    controller = packages(imported_after(CONTROLLER))
    middleware = packages(imported_after(", ".join(MIDDLEWARES)))
    assert "iostack.swift_middleware" not in controller
    assert "iostack.controller" not in middleware
    assert controller - {"iostack.controller"} <= SHARED | {"iostack.dsl"}
    assert middleware - {"iostack.swift_middleware"} <= SHARED | {"iostack.storlet_runtime"}
    assert controller & middleware == SHARED - {"iostack.stored_object"}  # interim


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
