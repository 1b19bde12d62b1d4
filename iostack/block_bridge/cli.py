"""``iostack block ...``: the block bridge from the command line.

    iostack block filters                      the block filters and their parameters
    iostack block validate 'xor(key=0x5a)>bitrev'
    iostack block call --config block.json create_filtered_volume \\
        name=fvol1 device=/dev/sdx 'filters=["xor(key=0x5a)","bitrev"]'

``call`` sends one JSON-RPC request to the service named by its config file
(host, port, user, password); each ``key=value`` becomes a parameter, the
value parsed as JSON when it is JSON and taken as a string otherwise.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from .catalog import block_filters
from .native_lib import StackError, validate
from .service import ServiceConfig


def register(subparsers: argparse._SubParsersAction) -> dict[str, argparse._SubParsersAction]:
    block = subparsers.add_parser("block", help="block bridge: filters, specs, JSON-RPC")
    verbs = block.add_subparsers(dest="block_command", required=True)

    verbs.add_parser("filters", help="list the block filters").set_defaults(func=cmd_filters)

    check = verbs.add_parser("validate", help="check a stack spec by loading its filters")
    check.add_argument("spec")
    check.add_argument("--filter-dir", type=Path)
    check.set_defaults(func=cmd_validate)

    call = verbs.add_parser("call", help="call a method of the block bridge service")
    call.add_argument("--config", type=Path, required=True, help="the service's config file")
    call.add_argument("method")
    call.add_argument("params", nargs="*", metavar="key=value")
    call.set_defaults(func=cmd_call)
    return {"block": verbs}


def cmd_filters(args: argparse.Namespace) -> int:
    for meta in block_filters():
        params = ", ".join(f"{p.name}={p.default if p.default is not None else '<required>'}"
                           for p in meta.params)
        print(f"{meta.name:<10} {meta.description}" + (f"\n{'':<10} {params}" if params else ""))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    try:
        validate(args.spec, args.filter_dir)
    except StackError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    print("ok")
    return 0


def _param(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise SystemExit(f"parameter {text!r} is not key=value")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def cmd_call(args: argparse.Namespace) -> int:
    config = ServiceConfig.load(args.config)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": args.method,
                       "params": dict(_param(p) for p in args.params)}).encode()
    request = urllib.request.Request(f"http://{config.host}:{config.port}/targetrpc", data=body)
    token = base64.b64encode(f"{config.user}:{config.password}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - http:// URL built here
            reply = json.loads(response.read())
    except urllib.error.HTTPError as err:
        print(f"HTTP {err.code}: {err.read().decode(errors='replace').strip()}", file=sys.stderr)
        return 1
    except urllib.error.URLError as err:
        print(f"cannot reach the block bridge service: {err.reason}", file=sys.stderr)
        return 1
    if "error" in reply:
        print(f"error {reply['error']['code']}: {reply['error']['message']}", file=sys.stderr)
        return 1
    print(json.dumps(reply["result"], indent=1))
    return 0
