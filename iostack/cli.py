"""The ``iostack`` command: IOStack's admin tool.

Each component contributes its own verbs: a module listed in ``COMMAND_MODULES``
exposes ``register(subparsers)``, which adds its sub-commands, sets ``func``
(called with the parsed arguments, returning the exit status) and returns its
verb groups by command name. ``MOUNTS`` lists the verbs one component adds to
another's command, so that neither imports the other: the Storlets runtime's
``upload`` is also ``iostack filter upload`` (uploaded code is deployed as a
storlet), and ``filter show``/``filter rm`` learn from it about the pinned
versions of uploaded code and the stored objects that use them.
``EXAMPLES`` gives every verb an example, shown at the end of its ``--help``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import warnings
from types import ModuleType

from iostack import __version__

COMMAND_MODULES = (
    "iostack.aio.cli",
    "iostack.controller.cli",
    "iostack.storlet_runtime.tools.cli",
    "iostack.block_bridge.cli",
    "iostack.doctor.cli",
    "iostack.atrest.cli",
)

# (command, module, function): ``function(verbs)`` adds its verb to ``command``'s verbs.
MOUNTS = (
    ("filter", "iostack.storlet_runtime.tools.cli", "add_upload_parser"),
    ("policy", "iostack.atrest.cli", "add_simulate_parser"),
    ("filter", "iostack.storlet_runtime.tools.cli", "add_test_parser"),
    ("filter", "iostack.storlet_runtime.tools.cli", "add_filter_version_verbs"),
)


DESCRIPTION = ("IOStack: storage policies for OpenStack Swift and iSCSI block volumes. "
               "Every command finds the running all-in-one by itself (or give --url/--token); "
               "'iostack COMMAND VERB --help' shows an example.")
EPILOG = """examples:
  iostack aio start                        # the all-in-one (what 'make run' does)
  iostack policy add "FOR TENANT t1 DO SET compression"
  iostack policy explain PUT /v1/AUTH_t1/logs/a.csv --size 2M
  iostack doctor                           # check the running stack's configs and services"""

# Verb (words after "iostack") -> example command lines.
EXAMPLES = {
    "aio start": "iostack aio start --proxies 2\nIOSTACK_NODES=3 make run",
    "aio stop": "iostack aio stop            # --purge also deletes its Redis keys",
    "aio replicate": "iostack aio replicate",
    "aio status": "iostack aio status          # or: make status",
    "policy validate": 'iostack policy validate "FOR TENANT t1 DO SET bandwidth WITH get=30MBps"',
    "policy add": 'iostack policy add "FOR CONTAINER t1/logs DO SET compression WITH '
                  'algorithm=zstd"\niostack policy add -f policies.txt --dry-run',
    "policy list": "iostack policy list --json",
    "policy show": "iostack policy show P3",
    "policy rm": "iostack policy rm P3 P4",
    "policy tenant": "iostack policy tenant AUTH_t1",
    "policy status": "iostack policy status      # which version each proxy worker enforces",
    "policy revoke": "iostack policy revoke --reason 'store restored from an unknown backup'",
    "policy reinstate": "iostack policy reinstate   # once the stored policies are checked",
    "policy history": "iostack policy history --limit 10",
    "policy diff": "iostack policy diff 3 5",
    "policy rollback": "iostack policy rollback 3 --dry-run   # then without --dry-run",
    "policy explain": "iostack policy explain PUT /v1/AUTH_t1/logs/a.csv --size 2M "
                      "--header X-Object-Meta-Class:hot\n"
                      "iostack policy explain VOLUME vol7 --storage-group gold",
    "filter list": "iostack filter list",
    "filter show": "iostack filter show compression",
    "filter register": "iostack filter register rot13.json --code rot13.py",
    "filter rm": "iostack filter rm rot13",
    "filter upload": "iostack filter upload my_filter.py --name myfilter --tenant t1",
    "metric list": "iostack metric list",
    "metric rm": "iostack metric rm MY_METRIC",
    "metric add": "iostack metric add MY_METRIC --kind rate --description 'bytes/s of ...'",
    "metric watch": "iostack metric watch --every 2   # also: iostack metrics watch",
    "metric show": "iostack metric show PUTS_SEC t1 --last 30",
    "group list": "iostack group list",
    "group rm": "iostack group rm gold",
    "group set": "iostack group set gold t1 t2",
    "class list": "iostack class list",
    "class rm": "iostack class rm PLATINUM",
    "class set": 'iostack class set PLATINUM "SET compression, SET caching WITH head=64M"',
    "objtype list": "iostack objtype list",
    "objtype rm": "iostack objtype rm LOGS",
    "objtype set": "iostack objtype set LOGS '\\.log$' 'mime:^text/'",
    "qos status": "iostack qos status",
    "tenant list": "iostack tenant list",
    "tenant add": "iostack tenant add t4",
    "storlet upload": "iostack storlet upload my_filter.py --name myfilter --tenant t1",
    "storlet deploy": "iostack storlet deploy compression --tenant t1",
    "storlet sandbox list": "iostack storlet sandbox list",
    "storlet sandbox stop": "iostack storlet sandbox stop AUTH_t1",
    "storlet image": "iostack storlet image --seccomp-profile /etc/containers/iostack-seccomp.json",
    "block filters": "iostack block filters",
    "block validate": "iostack block validate 'xor(key=90)>bw(read=1048576)'",
    "block call": "iostack block call --config .iostack/etc/block-bridge.json "
                  "list_filtered_volumes",
    "doctor": "iostack doctor                 # the running all-in-one\n"
              "iostack doctor --swift-dir /etc/swift --controller http://ctl:9090 "
              "--token TOKEN",
    "aio install-keystone": "iostack aio install-keystone   # or: make keystone",
    "filter new": "iostack filter new myfilter  # writes myfilter.py, an SDK filter",
    "filter test": "iostack filter test myfilter.py   # in a local sandbox, no stack needed",
    "storlet new": "iostack storlet new myfilter",
    "storlet test": "iostack storlet test myfilter.py",
    "object inspect": "iostack object inspect /v1/AUTH_t1/logs/a.csv --json",
    "usage": "iostack usage AUTH_t1     # logical vs stored bytes per container",
    "policy simulate": 'iostack policy simulate "FOR CONTAINER t1/logs DO SET compression"'
                       "\niostack policy simulate --id P7 --json",
    "reconcile start": "iostack reconcile start AUTH_t1/logs --wait",
    "reconcile run": "iostack reconcile run AUTH_t1/logs   # in the foreground",
    "reconcile status": "iostack reconcile status AUTH_t1/logs --json",
    "reconcile stop": "iostack reconcile stop AUTH_t1/logs",
}


def leaf_parsers(parser: argparse.ArgumentParser,
                 words: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every verb's parser by its words (``"policy add"``); aliases are skipped."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return {" ".join(words): parser}
    found: dict[str, argparse.ArgumentParser] = {}
    seen: set[int] = set()
    for name, sub in subs[0].choices.items():
        if id(sub) not in seen:
            seen.add(id(sub))
            found |= leaf_parsers(sub, (*words, name))
    return found


def _command_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="iostack", description=textwrap.fill(DESCRIPTION),
                                     epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"iostack {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True)
    modules = {name: _command_module(name) for name in COMMAND_MODULES}
    groups: dict[str, argparse._SubParsersAction] = {}
    for module in modules.values():
        if module is not None:
            groups |= module.register(subparsers)
    for command, name, function in MOUNTS:
        if command in groups and modules[name] is not None:
            getattr(modules[name], function)(groups[command])
    for words, verb in leaf_parsers(parser).items():
        example = EXAMPLES.get(words)
        if example:
            # Raw keeps the example's lines; the description is wrapped here instead.
            verb.formatter_class = argparse.RawDescriptionHelpFormatter
            verb.description = verb.description and textwrap.fill(verb.description)
            verb.epilog = "example:\n" + "\n".join(f"  {line}" for line in example.splitlines())
    return parser


# Warnings a library raises at its own import, about its own code: nothing an
# admin can act on, and they would bury the command's messages on stderr.
# (dnspython, imported through Swift's eventlet, touches DSA; cryptography 48+
# deprecates it.)
THIRD_PARTY_IMPORT_WARNINGS = (
    (r"DSA is deprecated", r"dns\."),
)


def main(argv: list[str] | None = None) -> int:
    for message, module in THIRD_PARTY_IMPORT_WARNINGS:
        warnings.filterwarnings("ignore", message=message, module=module)
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
