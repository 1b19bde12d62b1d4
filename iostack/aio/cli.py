"""``iostack aio start|stop|status``: run the all-in-one stack (what ``make run`` calls)."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from iostack import __version__
from iostack.aio.config import AioConfig
from iostack.aio.keystone import KeystoneError, default_venv, install_venv
from iostack.aio.stack import AioError, AllInOne
from iostack.endpoints import resolve_state_dir
from iostack.service_probes import redact


def register(subparsers: argparse._SubParsersAction) -> dict[str, argparse._SubParsersAction]:
    aio = subparsers.add_parser(
        "aio", help="run the all-in-one stack (Swift, Redis, RabbitMQ, controller)"
    )
    verbs = aio.add_subparsers(dest="aio_command", required=True)

    start = verbs.add_parser("start", help="start the stack (keeps what already runs)")
    _state_dir_option(start)
    for name in AioConfig.settings():
        flag = AioConfig.is_flag(name)
        start.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None,
                           action="store_true" if flag else "store",
                           help=f"(env IOSTACK_{name.upper()}{'=1' if flag else ''})")
    start.add_argument("--json", action="store_true", help="print aio.json instead of a summary")
    start.set_defaults(func=_start)

    stop = verbs.add_parser("stop", help="stop what 'start' started in this state dir")
    _state_dir_option(stop)
    stop.add_argument("--purge", action="store_true",
                      help="also delete the stack's Redis keys (its namespace; for throw-away "
                           "stacks)")
    stop.set_defaults(func=_stop)

    replicate = verbs.add_parser(
        "replicate", help="run one pass of the replicators on every storage node (a cluster)")
    _state_dir_option(replicate)
    replicate.set_defaults(func=_replicate)

    install = verbs.add_parser(
        "install-keystone",
        help="install Keystone into its own virtualenv from PyPI (for --auth keystone)")
    _state_dir_option(install)
    install.add_argument("--venv", default=None,
                         help="the virtualenv (default: <state dir>/openstack/keystone-venv)")
    install.set_defaults(func=_install_keystone)

    status = verbs.add_parser("status", help="show each component of the stack")
    _state_dir_option(status)
    status.set_defaults(func=_status)
    return {"aio": verbs}


def _state_dir_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", default=None,
                        help="state dir (default: $IOSTACK_STATE_DIR or .iostack in the checkout)")


def _stack(args: argparse.Namespace, overrides: dict[str, Any] | None = None) -> AllInOne:
    return AllInOne(AioConfig.load(resolve_state_dir(args.state_dir), overrides))


def _start(args: argparse.Namespace) -> int:
    overrides = {name: getattr(args, name) for name in AioConfig.settings()}
    try:
        info = _stack(args, overrides).start()
    except (AioError, ValueError) as exc:
        print(f"iostack aio: {exc}", file=sys.stderr)
        return 1
    _warn(info["warnings"])
    if args.json:
        print(json.dumps(info, indent=2, sort_keys=True))
    else:
        print(summary(info))
    return 0


def summary(info: dict[str, Any]) -> str:
    swift = Path(sys.executable).with_name("swift")
    t1 = info["tenants"]["t1"]
    keystone = info.get("auth") == "keystone"
    lines = ["IOStack all-in-one is up."]
    if keystone:
        lines += [
            f"  Keystone (v3):      {info['auth_url']}  admin password {info['admin']['key']}",
            f"  S3 endpoint:        {info['s3_url']}  (region {info['s3_region']}; "
            "each tenant's EC2 pair: s3_access_key, s3_secret_key in aio.json)",
        ]
    else:
        lines += [
            f"  Swift auth (v1.0):  {info['auth_url']}",
            f"  S3 endpoint:        {info['s3_url']}  (region {info['s3_region']}; "
            "access key = user, secret = key)",
        ]
    lines += [
        f"  Controller API:     {info['controller_url']}/v1  admin token {info['admin_token']}",
        f"  Admin console:      {info['controller_url']}/ui  (log in with the admin token)",
        f"  Redis:              {redact(info['redis_url'])}",
        f"  RabbitMQ:           {redact(info['amqp_url'])}",
        "  Tenants:",
    ]
    for name, tenant in sorted(info["tenants"].items()):
        what = "password" if keystone else "key"
        lines.append(f"    {name}: account {tenant['account']}, user {tenant['user']}, "
                     f"{what} {tenant['key']}")
    if keystone:
        try_swift = [str(swift), "--os-auth-url", t1["os_auth_url"], "--auth-version", "3",
                     "--os-project-name", t1["os_project_name"],
                     "--os-project-domain-name", t1["os_project_domain_name"],
                     "--os-username", t1["os_username"],
                     "--os-user-domain-name", t1["os_user_domain_name"],
                     "--os-password", t1["os_password"], "stat"]
    else:
        try_swift = [str(swift), "-A", info["auth_url"], "-U", t1["user"], "-K", t1["key"],
                     "stat"]
    lines += [
        f"  Details and credentials: {info['state_dir']}/aio.json   Logs: {info['log_dir']}",
        "",
        "Try it:",
        "  " + shlex.join(try_swift),
        "  " + shlex.join([str(Path(sys.executable).with_name("iostack")), "policy", "list"]),
        "  " + shlex.join([str(Path(sys.executable).with_name("iostack")), "metrics", "watch"]),
    ]
    return "\n".join(lines)


def _warn(warnings: list[str]) -> None:
    """Print warnings where they are seen: stderr, framed, also when stdout is --json."""
    if warnings:
        rule = "!" * 78
        print("\n".join([rule, *warnings, rule]), file=sys.stderr)


def _stop(args: argparse.Namespace) -> int:
    stopped = _stack(args).stop(purge=args.purge)
    print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
    return 0


def _replicate(args: argparse.Namespace) -> int:
    try:
        _stack(args).replicate_once()
    except (AioError, subprocess.CalledProcessError) as exc:
        print(f"iostack aio: {exc}", file=sys.stderr)
        return 1
    print("replicated: one pass of the object, container and account replicators on every node")
    return 0


def _install_keystone(args: argparse.Namespace) -> int:
    venv = Path(args.venv) if args.venv else default_venv(resolve_state_dir(args.state_dir))
    try:
        install_venv(venv)
    except KeystoneError as exc:
        print(f"iostack aio: {exc}", file=sys.stderr)
        return 1
    print(f"Keystone is installed in {venv}")
    return 0


def _status(args: argparse.Namespace) -> int:
    stack = _stack(args)
    rows = stack.status()
    width = max(len(row.name) for row in rows)
    for row in rows:
        state = f"up (pid {row.pid})" if row.running and row.pid else (
            "up" if row.running else "down")
        print(f"{row.name:<{width}}  {state:<16}  {row.detail}")
    endpoints = stack.endpoints()
    if endpoints:
        print()
        width = max(len(what) for what, _ in endpoints)
        for what, where in endpoints:
            print(f"{what:<{width}}  {where}")
    _print_reconcile_passes(stack.state_dir)
    _print_versions(stack)
    for warning in stack.warnings():
        print(warning)
    return 0 if all(row.running for row in rows) else 3


def _print_versions(stack: AllInOne) -> None:
    started_by = (stack.info() or {}).get("version")
    line = f"iostack {__version__}"
    if started_by and started_by != __version__:
        line += f" (the running stack was started by iostack {started_by})"
    print(f"\n{line}")


def _print_reconcile_passes(state_dir: Path) -> None:
    """The stack's ``iostack reconcile`` passes and their progress (not components: a
    finished pass is not a stack that is down)."""
    from iostack.atrest.reconcile import progress_line, statuses  # Swift's modules: on use

    passes = statuses(state_dir)
    if passes:
        print()
        width = max(len(data["target"]) for data in passes) + len("reconcile ")
        for data in passes:
            pid = f" (pid {data['pid']})" if data["state"] == "running" and data["pid"] else ""
            print(f"{'reconcile ' + data['target']:<{width}}  {progress_line(data)}{pid}")
