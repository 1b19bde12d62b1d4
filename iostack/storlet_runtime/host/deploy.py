"""Deploying Python storlets into a tenant's account, the way Storlets documents it.

A storlet is an object in the account's ``storlet`` container whose metadata
says how to run it::

    X-Object-Meta-Storlet-Language: Python
    X-Object-Meta-Storlet-Language-Version: 3
    X-Object-Meta-Storlet-Interface-Version: 1.0
    X-Object-Meta-Storlet-Object-Metadata: no
    X-Object-Meta-Storlet-Main: <module>.<Class>

and the account must carry ``X-Account-Meta-Storlet-Enabled: True``. After
that, ``GET`` (or ``PUT``) with ``X-Run-Storlet: <module>.py`` runs it.

``check_python_storlet`` validates code before it is deployed, statically
(parsing, never executing it): the file name is a plain module name, the
code parses as Python 3, and ``Main`` names a top-level class of that module
with a ``__call__`` method, its own or the SDK's (a subclass of
``iostack.storlet_runtime.sdk.Filter``). Storlets itself only checks the name
pattern. ``sdk_declaration`` reads what an SDK filter declares (parameters,
``changes_size``, ``stages``) the same way, as literals.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from swiftclient.client import Connection

from iostack.storlet_runtime.host.swift_conf import (
    DEPENDENCY_CONTAINER,
    LOG_CONTAINER,
    STORLET_CONTAINER,
)

MAX_STORLET_BYTES = 1 << 20
SDK_MODULE = "iostack.storlet_runtime.sdk"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class StorletValidationError(ValueError):
    """Storlet code or its name is not deployable; the message says why."""


@dataclass(frozen=True)
class PythonStorlet:
    name: str  # object name, "<module>.py"
    main: str  # "<module>.<Class>"
    code: bytes

    @property
    def headers(self) -> dict[str, str]:
        return {
            "X-Object-Meta-Storlet-Language": "Python",
            "X-Object-Meta-Storlet-Language-Version": "3",
            "X-Object-Meta-Storlet-Interface-Version": "1.0",
            "X-Object-Meta-Storlet-Object-Metadata": "no",
            "X-Object-Meta-Storlet-Main": self.main,
            "Content-Type": "text/x-python",
        }


def check_python_storlet(name: str, code: bytes, main: str | None = None) -> PythonStorlet:
    """Validate a Python storlet; ``main`` defaults to the module's only callable class."""
    if not name.endswith(".py") or not _MODULE.match(name[:-3]):
        raise StorletValidationError(
            f"storlet file name {name!r} must be a Python module name ending in .py")
    module = name[:-3]
    if len(code) > MAX_STORLET_BYTES:
        raise StorletValidationError(
            f"{name}: {len(code)} bytes, larger than the {MAX_STORLET_BYTES}-byte limit")
    try:
        tree = ast.parse(code.decode("utf-8"), filename=name)
    except UnicodeDecodeError as exc:
        raise StorletValidationError(f"{name}: not UTF-8 text ({exc.reason})") from None
    except SyntaxError as exc:
        raise StorletValidationError(
            f"{name}:{exc.lineno}:{exc.offset}: syntax error: {exc.msg}") from None
    sdk_bases = _sdk_base_names(tree)
    callables = [node.name for node in tree.body if isinstance(node, ast.ClassDef)
                 and (any(isinstance(item, ast.FunctionDef) and item.name == "__call__"
                          for item in node.body)
                      or any(ast.unparse(base) in sdk_bases for base in node.bases))]
    if main is None:
        if len(callables) != 1:
            raise StorletValidationError(
                f"{name}: say which class is the storlet (--main {module}.<Class>); "
                f"classes with __call__: {', '.join(callables) or 'none'}")
        main = f"{module}.{callables[0]}"
    parts = main.split(".")
    if len(parts) != 2 or parts[0] != module:
        raise StorletValidationError(
            f"main {main!r} must be <module>.<Class> with module {module!r} "
            "(Storlets does not load submodules)")
    if parts[1] not in callables:
        raise StorletValidationError(
            f"{name}: no top-level class {parts[1]!r} with a __call__(self, in_files, "
            f"out_files, params) method")
    return PythonStorlet(name=name, main=main, code=code)


def _sdk_base_names(tree: ast.Module) -> set[str]:
    """How the module may spell the SDK's base class: ``Filter`` as imported, or dotted."""
    names = {f"{SDK_MODULE}.Filter"}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == SDK_MODULE:
            names |= {alias.asname or alias.name for alias in node.names
                      if alias.name == "Filter"}
        elif isinstance(node, ast.ImportFrom) and f"{node.module}.sdk" == SDK_MODULE:
            names |= {f"{alias.asname or alias.name}.Filter" for alias in node.names
                      if alias.name == "sdk"}
    return names


def sdk_declaration(code: bytes, main: str) -> dict[str, Any]:
    """What the storlet class ``main`` (``module.Class``) declares as an SDK filter.

    ``params`` (a tuple of ``NAME:TYPE[:MIN..MAX][=DEFAULT]``), ``changes_size``
    and ``stages``, each only when the class body assigns it a literal (read
    with ``ast.literal_eval``, never run); a bad literal is a validation error.
    """
    cls = main.rpartition(".")[2]
    tree = ast.parse(code.decode("utf-8"))
    body = next((node.body for node in tree.body
                 if isinstance(node, ast.ClassDef) and node.name == cls), [])
    declared: dict[str, Any] = {}
    for node in body:
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in SDK_DECLARATIONS and value:
                convert, kind = SDK_DECLARATIONS[target.id]
                try:
                    declared[target.id] = convert(ast.literal_eval(value))
                except (ValueError, TypeError, SyntaxError):
                    raise StorletValidationError(f"{cls}.{target.id} (line {node.lineno}): "
                                                 f"must be written as {kind}") from None
    return declared


def _strings(value: Any) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        raise TypeError(value)
    return tuple(value)


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(value)
    return value


SDK_DECLARATIONS = {"params": (_strings, "a literal tuple of strings"),
                    "stages": (_strings, "a literal tuple of strings"),
                    "changes_size": (_flag, "True or False")}


def enable_account(conn: Connection) -> None:
    """Turn Storlets on for the connection's account and create its containers."""
    conn.post_account({"X-Account-Meta-Storlet-Enabled": "True"})
    for container in (STORLET_CONTAINER, DEPENDENCY_CONTAINER, LOG_CONTAINER):
        conn.put_container(container)


def upload_storlet(conn: Connection, storlet: PythonStorlet) -> None:
    """Store a validated storlet; the storlet middleware checks its metadata again."""
    conn.put_object(STORLET_CONTAINER, storlet.name, storlet.code, headers=storlet.headers)
