"""The ``iostack`` command.

Each component contributes its own verbs: a module listed in ``COMMAND_MODULES``
exposes ``register(subparsers)``, which adds its sub-commands, sets ``func``
(called with the parsed arguments, returning the exit status) and returns its
verb groups by command name. ``MOUNTS`` lists the verbs one component adds to
another's command, so that neither imports the other: the Storlets runtime's
``upload`` is also ``iostack filter upload`` (uploaded code is deployed as a
storlet), and ``filter show``/``filter rm`` learn from it about the pinned
versions of uploaded code and the stored objects that use them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from types import ModuleType

COMMAND_MODULES = (
    "iostack.aio.cli",
    "iostack.controller.cli",
    "iostack.storlet_runtime.cli",
    "iostack.block_bridge.cli",
    "iostack.doctor.cli",
)

# (command, module, function): ``function(verbs)`` adds its verb to ``command``'s verbs.
MOUNTS = (
    ("filter", "iostack.storlet_runtime.cli", "add_upload_parser"),
    ("filter", "iostack.storlet_runtime.cli", "add_test_parser"),
    ("filter", "iostack.storlet_runtime.cli", "add_filter_version_verbs"),
)


def _command_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iostack", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules = {name: _command_module(name) for name in COMMAND_MODULES}
    groups: dict[str, argparse._SubParsersAction] = {}
    for module in modules.values():
        if module is not None:
            groups |= module.register(subparsers)
    for command, name, function in MOUNTS:
        if command in groups and modules[name] is not None:
            getattr(modules[name], function)(groups[command])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
