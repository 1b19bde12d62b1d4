"""``iostack doctor``: check a Swift cluster's IOStack installation and say how to fix it.

    iostack doctor --swift-dir /etc/swift --controller http://ctl:9090 --token TOKEN
    iostack doctor --swift-dir proxy1/etc/swift --swift-dir node1/etc/swift ...
    iostack doctor --proxy-conf node1/proxy-server.conf --proxy-conf node2/proxy-server.conf \\
                   --object-conf node3/object-server/1.conf --json

Without ``--proxy-conf``/``--object-conf`` it checks the configs ``swift-init``
would use under each ``--swift-dir`` (``proxy-server*.conf``, ``object-server*``
files and ``.conf.d`` directories); several hosts' directories are checked
together. With none of those, it checks the running all-in-one as every other
verb finds it (``aio.json`` in ``$IOSTACK_STATE_DIR`` or ``.iostack/``: its
Swift dirs, every storage node's in cluster mode, and its controller and
token), and ``/etc/swift`` when no all-in-one runs. Exit status: 0 no error
(warnings may remain), 1 at least one error, 2 nothing to check.

    iostack doctor                       # the running all-in-one, or /etc/swift
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from iostack.doctor import LEVELS, Finding, error, keystone, pipelines, sandbox, services
from iostack.endpoints import AioNotRunning, load_aio_info

NOTHING = 2
DEFAULT_SWIFT_DIR = "/etc/swift"


def _load(paths: list[str], kind: str) -> tuple[list[pipelines.Pipeline], list[Finding]]:
    loaded, findings = [], []
    for path in paths:
        try:
            loaded.append(pipelines.load(path, kind))
        except pipelines.ConfigLoadError as exc:
            findings.append(error(path, str(exc), f"give a valid {kind}-server config"))
    return loaded, findings


def find_configs(swift_dirs: list[str]) -> tuple[list[str], list[str]]:
    """The proxy-server and object-server configs swift-init would use under these dirs."""
    return ([path for d in swift_dirs for path in pipelines.find_configs(d, "proxy")],
            [path for d in swift_dirs for path in pipelines.find_configs(d, "object")])


def diagnose(proxy_confs: list[str], object_confs: list[str], controller: str | None = None,
             token: str | None = None, allow_unauthenticated: bool = False) -> list[Finding]:
    """Every finding about these configs and the services they name."""
    proxies, findings = _load(proxy_confs, "proxy")
    objects, more = _load(object_confs, "object")
    findings += more
    asks_objects = pipelines.select_on_object(proxies)
    for pipeline in proxies + objects:
        findings += pipelines.check(pipeline, asks_objects)
    findings += pipelines.check_together(proxies, objects)
    for pipeline in proxies:
        findings += keystone.check_order(pipeline)
    findings += keystone.check_service_users(proxies)
    findings += sandbox.check_runtimes(proxies + objects)
    stores, brokers = pipelines.services(proxies + objects)
    for store in stores:
        findings += services.check_redis(store, allow_unauthenticated)
    for broker in brokers:
        findings += services.check_amqp(broker, allow_unauthenticated)
    if controller:
        findings += services.check_controller(controller, token,
                                              pipelines.metric_sources(proxies))
    return findings


def _print(findings: list[Finding]) -> None:
    counts = {level: sum(f.level == level for f in findings) for level in LEVELS}
    for finding in sorted(findings, key=lambda f: LEVELS.index(f.level)):
        print(f"{finding.level.upper():8} {finding.where}")
        print(f"         {finding.what}")
        if finding.fix:
            print(f"         fix: {finding.fix}")
    def count(level: str, noun: str) -> str:
        return f"{counts[level]} {noun}{'' if counts[level] == 1 else 's'}"

    print(f"\n{count('error', 'error')}, {count('warning', 'warning')}, "
          f"{count('ok', 'check')} passed")


def running_stack() -> tuple[list[str], str | None, str | None]:
    """The running all-in-one's Swift dirs, controller URL and admin token (none: [])."""
    try:
        info = load_aio_info()
    except (AioNotRunning, OSError, ValueError):
        return [], None, None
    dirs = [info["swift_dir"], *(node["swift_dir"] for node in info.get("nodes", ()))]
    return dirs, info.get("controller_url"), info.get("admin_token")


def run(args: argparse.Namespace) -> int:
    proxy_confs = args.proxy_conf or []
    object_confs = args.object_conf or []
    swift_dirs = args.swift_dir or []
    found_url = found_token = None
    if not (swift_dirs or proxy_confs or object_confs):
        swift_dirs, found_url, found_token = running_stack()
        if swift_dirs and not args.json:
            print(f"(checking the running all-in-one: {', '.join(swift_dirs)})")
        swift_dirs = swift_dirs or [DEFAULT_SWIFT_DIR]
    if not proxy_confs and not object_confs:
        proxy_confs, object_confs = find_configs(swift_dirs)
    if not proxy_confs and not object_confs:
        print(f"iostack doctor: no proxy-server or object-server config under "
              f"{', '.join(swift_dirs)} and no all-in-one running (give --swift-dir, "
              f"--proxy-conf or --object-conf)", file=sys.stderr)
        return NOTHING
    controller = args.controller or os.environ.get("IOSTACK_URL") or found_url
    token = args.token or os.environ.get("IOSTACK_TOKEN") or found_token
    findings = diagnose(proxy_confs, object_confs, controller, token,
                        args.allow_unauthenticated_services)
    if args.json:
        print(json.dumps([f.to_json() for f in findings], indent=2))
    else:
        if not controller:
            print("(controller not checked: give --controller URL --token TOKEN)\n")
        _print(findings)
    return 1 if any(f.level == "error" for f in findings) else 0


def register(subparsers: argparse._SubParsersAction) -> dict[str, argparse._SubParsersAction]:
    """``iostack doctor``: one command, no verb groups."""
    parser = subparsers.add_parser(
        "doctor", help="check Swift configs and services for IOStack; say how to fix them",
        description="Check a Swift cluster's IOStack installation (pipelines, config keys, "
                    "Redis, RabbitMQ, the controller) and say how to fix what is wrong.")
    parser.add_argument("--swift-dir", action="append", metavar="DIR",
                        help=f"where the Swift configs are (default: the running all-in-one's, "
                             f"else {DEFAULT_SWIFT_DIR}; repeatable: each host's directory of "
                             f"a cluster)")
    parser.add_argument("--proxy-conf", action="append", metavar="PATH",
                        help="a proxy-server config file or .conf.d directory (repeatable; "
                             "instead of searching --swift-dir)")
    parser.add_argument("--object-conf", action="append", metavar="PATH",
                        help="an object-server config file or .conf.d directory (repeatable)")
    parser.add_argument("--controller", metavar="URL",
                        help="the controller's URL (env IOSTACK_URL; default: the "
                             "all-in-one's when checking it)")
    parser.add_argument("--token", help="an admin token of the controller (env IOSTACK_TOKEN; "
                                        "default: the all-in-one's)")
    parser.add_argument("--allow-unauthenticated-services", action="store_true",
                        help="report a Redis or RabbitMQ anyone can use as a warning, "
                             "not an error")
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    parser.set_defaults(func=run)
    return {}
