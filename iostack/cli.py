"""The ``iostack`` command.

Each component contributes its own verbs: a module listed in ``COMMAND_MODULES``
exposes ``register(subparsers)``, which adds its sub-commands and sets
``func`` (called with the parsed arguments, returning the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMAND_MODULES = (
    "iostack.aio.cli",
    "iostack.controller.cli",
    "iostack.storlet_runtime.cli",
    "iostack.block_bridge.cli",
    "iostack.doctor.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iostack", description=__doc__.splitlines()[0])
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
