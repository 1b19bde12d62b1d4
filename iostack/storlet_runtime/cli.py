"""``iostack storlet ...``: sandboxed filters and the sandboxes that run them.

Verbs:

``iostack storlet upload FILE.py --name NAME [--main Module.Class] [--tenant t1]``
    A tenant's or admin's own Python filter: validated statically (never
    run here), registered with the controller (metadata ``sandboxable``,
    ``extra.runtime = storlet``; the code itself through ``PUT
    /v1/filters/NAME/code``), then stored as storlet ``iostack_NAME.py`` in
    the storlet container of the tenant (all tenants without ``--tenant``),
    whose account gets Storlets enabled. ``iostack filter upload`` is the same
    verb, mounted under the controller's ``filter`` by ``iostack.cli``.
``iostack storlet deploy FILTER [--tenant t1]``
    A sandbox-capable library filter, packaged and stored the same way.
``iostack storlet sandbox list`` / ``iostack storlet sandbox stop SCOPE``
    The running per-scope sandboxes of the all-in-one, and tear-down by pid.

Swift is reached as the all-in-one's reseller admin, the controller with its
admin token (``iostack.controller.client``).
"""

from __future__ import annotations

import argparse
import configparser
import json
import re
import sys
from pathlib import Path
from typing import Any

from swiftclient.client import Connection

from iostack.controller.client import ControllerClient, ControllerError
from iostack.endpoints import load_aio_info
from iostack.filters.metadata import FilterMetadata
from iostack.storlet_runtime.deploy import (
    PythonStorlet,
    StorletValidationError,
    check_python_storlet,
    enable_account,
    upload_storlet,
)
from iostack.storlet_runtime.packaging import NotSandboxable, filter_storlet, storlet_name
from iostack.storlet_runtime.sandbox import ScopeSandbox
from iostack.storlet_runtime.storlets_api import WRAPPER_CLASS, wrapped_code
from iostack.storlet_runtime.swift_conf import gateway_conf_path

_FILTER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")


def _tenant_connections(info: dict[str, Any], tenant: str | None) -> dict[str, Connection]:
    """Connections to tenants' accounts with the reseller admin's token."""
    tenants = info["tenants"]
    if tenant is not None:
        _tenant_account(info, tenant)
    admin = Connection(info["auth_url"], info["admin"]["user"], info["admin"]["key"])
    _, token = admin.get_auth()
    return {name: Connection(preauthurl=tenants[name]["storage_url"], preauthtoken=token)
            for name in ([tenant] if tenant else sorted(tenants))}


def _tenant_account(info: dict[str, Any], tenant: str) -> str:
    """The Swift account of a tenant of the all-in-one (``AUTH_t1``)."""
    tenants = info["tenants"]
    if tenant not in tenants:
        raise StorletValidationError(f"unknown tenant {tenant!r} (known: {', '.join(tenants)})")
    return tenants[tenant]["storage_url"].rstrip("/").rsplit("/", 1)[-1]


def prepare_upload(path: Path, name: str, main: str | None) -> PythonStorlet:
    """Check a tenant filter (a Storlets-API storlet) and name its storlet ``iostack_<name>.py``.

    The stored storlet is the author's module with ``storlets_api``'s class
    appended, which runs the author's class under IOStack's protocol.
    """
    if not _FILTER_NAME.match(name):
        raise StorletValidationError(
            f"filter name {name!r}: lower-case letters, digits and '_', starting with a letter")
    try:
        code = path.read_bytes()
    except OSError as exc:
        raise StorletValidationError(f"cannot read {path}: {exc.strerror}") from None
    object_name = storlet_name(name)
    module = object_name[:-3]
    # The storlet module is renamed after the filter, so only the class part of --main counts.
    cls = main.rpartition(".")[2] if main else None
    author = check_python_storlet(object_name, code, f"{module}.{cls}" if cls else None)
    # What runs is the author's storlet inside IOStack's protocol (storlets_api).
    return check_python_storlet(object_name,
                                wrapped_code(code, author.main.rpartition(".")[2]),
                                f"{module}.{WRAPPER_CLASS}")


def filter_metadata(name: str, storlet: PythonStorlet, source: str,
                    account: str | None = None) -> FilterMetadata:
    """Registry metadata of an uploaded filter; ``account``: the one tenant it is for.

    A filter uploaded for one tenant is that tenant's: the data path runs it
    for that account only (``extra.tenant``), whatever a policy says.
    """
    extra = {"runtime": "storlet", "storlet": storlet.name, "storlet_main": storlet.main}
    if account:
        extra["tenant"] = account
    return FilterMetadata(
        name=name, description=f"tenant filter from {source}, run in the sandbox",
        methods=frozenset({"GET", "PUT"}), stages=frozenset({"proxy", "object"}),
        default_stage="proxy", changes_size=True, sandboxable=True, extra=extra)


def _deploy(storlet: PythonStorlet, tenant: str | None) -> list[str]:
    done = []
    for tenant_name, conn in _tenant_connections(load_aio_info(), tenant).items():
        enable_account(conn)
        upload_storlet(conn, storlet)
        done.append(tenant_name)
    return done


def cmd_upload(args: argparse.Namespace) -> int:
    storlet = prepare_upload(Path(args.file), args.name, args.main)
    client = ControllerClient.from_env(getattr(args, "url", None), getattr(args, "token", None))
    account = _tenant_account(load_aio_info(), args.tenant) if args.tenant else None
    client.put("filters", args.name, filter_metadata(args.name, storlet, Path(args.file).name,
                                                     account).to_json())
    client.upload_code(args.name, storlet.code)
    tenants = _deploy(storlet, args.tenant)
    print(f"filter {args.name}: storlet {storlet.name} (main {storlet.main}) deployed to "
          f"{', '.join(tenants)}")
    return 0


def cmd_deploy(args: argparse.Namespace) -> int:
    storlet = filter_storlet(args.filter)
    tenants = _deploy(storlet, args.tenant)
    print(f"filter {args.filter}: storlet {storlet.name} deployed to {', '.join(tenants)}")
    return 0


def _run_dir() -> Path:
    info = load_aio_info()
    conf = configparser.ConfigParser(interpolation=None)
    conf.read(gateway_conf_path(Path(info["swift_dir"])))
    host_root = Path(conf["DEFAULT"].get("host_root", "/var/lib/storlets"))
    return Path(conf["DEFAULT"].get("sandbox_run_dir", host_root / "sandboxes"))


def cmd_sandbox_list(args: argparse.Namespace) -> int:
    run_dir = _run_dir()
    rows = []
    for path in sorted(run_dir.glob("*.json")):
        sandbox = ScopeSandbox(run_dir, path.stem)
        record = sandbox.record()
        rows.append({"scope": path.stem, "pid": sandbox.running_pid(),
                     "uid": record.get("uid"), "limits": record.get("limits", "")})
    if args.json:
        print(json.dumps(rows))
    for row in [] if args.json else rows:
        uid = "server's" if row["uid"] is None else row["uid"]
        print(f"{row['scope']:<26} {row['pid'] or 'not running':<12} uid {uid:<11} "
              f"{row['limits']}")
    return 0


def cmd_sandbox_stop(args: argparse.Namespace) -> int:
    stopped = ScopeSandbox(_run_dir(), args.scope).stop()
    print(f"scope {args.scope}: {'stopped' if stopped else 'no sandbox running'}")
    return 0


def _guarded(func):
    """Turn validation and API errors into a message and exit status 2."""
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except (StorletValidationError, NotSandboxable, ControllerError) as exc:
            print(f"iostack: {exc}", file=sys.stderr)
            return 2
    return run


def add_upload_parser(subparsers: Any, parents: list[argparse.ArgumentParser] = ()) -> None:
    """Add the ``upload`` verb to a sub-command (``storlet``, or the controller's ``filter``)."""
    up = subparsers.add_parser("upload", parents=list(parents),
                               help="validate, register and deploy your own Python filter")
    up.add_argument("file", help="the filter's Python source (a Storlets Python storlet)")
    up.add_argument("--name", required=True, help="filter name used in policies")
    up.add_argument("--main", help="Module.Class of the storlet (default: the only class "
                                   "with __call__)")
    up.add_argument("--tenant", help="deploy to this tenant only (default: every tenant)")
    up.set_defaults(func=_guarded(cmd_upload))


def register(subparsers: Any) -> dict[str, Any]:
    verbs = subparsers.add_parser("storlet", help="sandboxed filters (Storlets)").add_subparsers(
        dest="storlet_command", required=True)
    add_upload_parser(verbs)
    dep = verbs.add_parser("deploy", help="deploy a sandbox-capable library filter")
    dep.add_argument("filter")
    dep.add_argument("--tenant", help="this tenant only (default: every tenant)")
    dep.set_defaults(func=_guarded(cmd_deploy))
    sandbox = verbs.add_parser("sandbox", help="per-scope sandboxes").add_subparsers(
        dest="sandbox_command", required=True)
    lst = sandbox.add_parser("list", help="scopes and their sandbox pids")
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_sandbox_list)
    stop = sandbox.add_parser("stop", help="tear a scope's sandbox down (by pid)")
    stop.add_argument("scope")
    stop.set_defaults(func=cmd_sandbox_stop)
    return {"storlet": verbs}
