"""The paste and Storlets entry points: the names deployments use keep resolving.

Deployed configs say ``use = egg:iostack#iostack_proxy``; moving a middleware's
module must not break them. Each entry point in ``pyproject.toml`` must import,
and the installed distribution must declare the same (a stale install would
make paste load an old module path).
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
DECLARED = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]
# In a child: importing Storlets' gateway monkey-patches eventlet into the process.
IMPORT_ALL = """
import importlib, json, sys
broken = []
for group, target in json.loads(sys.argv[1]):
    module, _, attr = target.partition(":")
    try:
        obj = getattr(importlib.import_module(module), attr)
        if group != "iostack.filter_catalogs" and not callable(obj):
            broken.append(target + ": not callable")
    except Exception as exc:
        broken.append(f"{target}: {exc!r}")
print(json.dumps(broken))
"""


def test_each_entry_point_imports():
    targets = [(group, target) for group, table in DECLARED.items() for target in table.values()]
    child = subprocess.run([sys.executable, "-c", IMPORT_ALL, json.dumps(targets)],
                           capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(child.stdout.splitlines()[-1]) == []


def test_the_installed_entry_points_are_the_declared_ones():
    for group, table in DECLARED.items():
        installed = {ep.name: ep.value for ep in entry_points(group=group)
                     if ep.dist is not None and ep.dist.name == "iostack"}
        assert installed == table, f"reinstall (pip install -e .): {group} is stale"
