"""``iostack policy|filter|metric|group|class|objtype|tenant ...``: the controller CLI.

Every verb maps to one REST call (see ``client.py``). The controller is found
from ``--url``/``--token``, then ``$IOSTACK_URL``/``$IOSTACK_TOKEN``, then the
running all-in-one. Output is a readable table (``formatting.py``), or the
API's JSON with ``--json``. Exit status: 0 done, 1 refused by the controller (the reason is on
stderr, with line and column for policy text), 3 controller unreachable.

    iostack policy validate "FOR TENANT t1 DO SET compression"
    iostack policy add -f policies.txt
    iostack policy explain PUT /v1/AUTH_t1/logs/a.csv --size 2M --header X-Object-Meta-Class:hot
    iostack policy explain VOLUME vol7 --storage-group gold
    iostack policy history                 # every change: who, when, what
    iostack policy diff 3 5                # policies and compiled rules between versions
    iostack policy rollback 3              # back to version 3, atomically
    iostack metrics watch                  # live per-tenant metrics and policy actors
    iostack metric show PUTS_SEC t1 --last 30
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iostack.controller import formatting as fmt
from iostack.controller.client import ControllerClient, ControllerError
from iostack.dsl.units import UnitError, parse_size
from iostack.endpoints import AioNotRunning

UNREACHABLE = 3


# -- policy verbs ---------------------------------------------------------------


def _text(args: argparse.Namespace) -> str:
    if args.file:
        return sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    if not args.text:
        raise ControllerError(400, "give the policy text, or -f FILE ('-' for stdin)")
    return " ".join(args.text)


def _warnings(result: dict[str, Any]) -> None:
    for line in fmt.warning_lines(result):
        print(line, file=sys.stderr)


def policy_validate(client: ControllerClient, args) -> Any:
    result = client.validate(_text(args))
    _warnings(result)
    if args.json:
        return result
    count = len(result["policies"]) + len(result["classes"])
    print(f"valid: {count} statement{'s' if count != 1 else ''}")
    return None


def policy_add(client: ControllerClient, args) -> Any:
    text = _text(args)
    try:
        result = client.add_policies(text, dry_run=args.dry_run)
    except ControllerError as exc:
        if exc.status:  # refused: a submission is all or none
            exc.add_note("nothing was stored")
        raise
    _warnings(result)
    if args.json:
        return result
    if result["policies"]:
        print(fmt.policy_rows(result["policies"]))
    for qos in result["classes"]:
        print(f"class {qos['name']}: {qos['actions']}")
    if args.dry_run:
        print("dry run: nothing was stored")
    return None


def policy_list(client: ControllerClient, args) -> Any:
    records = client.policies()
    return records if args.json else print(fmt.policy_rows(records))


def policy_show(client: ControllerClient, args) -> Any:
    record = client.policy(args.id)
    return record if args.json else print(fmt.policy_detail(record))


def policy_rm(client: ControllerClient, args) -> Any:
    removed = [client.delete_policy(pid)["deleted"] for pid in args.ids]
    if args.json:
        return removed
    for record in removed:
        print(f"removed {record['id']}: {record['text']}")
    return None


def policy_tenant(client: ControllerClient, args) -> Any:
    result = client.tenant_policies(args.account)
    return result if args.json else print(fmt.policy_rows(result["policies"]))


def policy_explain(client: ControllerClient, args) -> Any:
    headers = {}
    for item in args.header:
        key, sep, value = item.partition(":")
        if not sep or not key.strip():
            raise ControllerError(400, f"--header takes KEY:VALUE, got {item!r}")
        headers[key.strip()] = value.strip()
    if args.method.upper() == "VOLUME":
        result = client.explain_volume(args.path, args.storage_group)
        title = f"volume {args.path}" + (f" in storage group {args.storage_group}"
                                         if args.storage_group else "")
    else:
        result = client.explain(args.method.upper(), args.path, args.size, headers)
        size = result["request"]["size"]
        title = f"{result['request']['method']} {args.path}" + (
            f" ({size} bytes)" if size is not None else "")
    return result if args.json else print(fmt.explain_view(result, title))


def policy_status(client: ControllerClient, args) -> Any:
    result = client.policy_status()
    return result if args.json else print(fmt.policy_status_view(result))


def policy_revoke(client: ControllerClient, args) -> Any:
    result = client.revoke(args.reason)
    return result if args.json else print(
        f"revoked: every node refuses writes until 'iostack policy reinstate' "
        f"(reason: {result['revoked']['reason']})")


def policy_reinstate(client: ControllerClient, args) -> Any:
    result = client.reinstate()
    return result if args.json else print(
        "reinstated: nodes enforce the stored policies again" if result["reinstated"]
        else "nothing to reinstate: the store's state was not revoked")


def policy_history(client: ControllerClient, args) -> Any:
    result = client.history(args.limit)
    return result if args.json else print(fmt.history_table(result))


def policy_diff(client: ControllerClient, args) -> Any:
    diff = client.history_diff(args.old, args.new)
    return diff if args.json else print(fmt.diff_view(diff))


def policy_rollback(client: ControllerClient, args) -> Any:
    try:
        result = client.rollback(args.version, dry_run=args.dry_run)
    except ControllerError as exc:
        if exc.status:
            exc.add_note("nothing was changed")
        raise
    _warnings(result)
    if args.json:
        return result
    for record in result["removed"]:
        print(f"removed {record['id']}: {record['text']}")
    for record in result["policies"]:
        print(f"added {record['id']}: {record['text']}")
    if not result["removed"] and not result["policies"]:
        print(f"nothing to do: the policies are those of version {args.version}")
    if args.dry_run:
        print("dry run: nothing was changed")
    return None


def _size(text: str) -> int:
    """``--size`` accepts bytes or DSL sizes (``2M``, ``512K``)."""
    try:
        return parse_size(text)
    except UnitError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# -- registry verbs -------------------------------------------------------------


def registry_list(kind: str, columns: list[str], row: Callable[[str, Any], list[Any]]):
    def run(client: ControllerClient, args) -> Any:
        items = client.registry(kind)
        if args.json:
            return items
        print(fmt.table(columns, [row(name, value) for name, value in items.items()]))
        return None
    return run


def registry_rm(kind: str):
    def run(client: ControllerClient, args) -> Any:
        result = client.delete(kind, args.name)
        return result if args.json else print(f"removed {args.name}")
    return run


def filter_register(client: ControllerClient, args) -> Any:
    try:
        meta = json.loads(Path(args.metadata).read_text("utf-8"))
    except (OSError, ValueError) as exc:
        raise ControllerError(400, f"cannot read filter metadata {args.metadata}: {exc}") \
            from None
    name = args.name or meta.get("name")
    if not name:
        raise ControllerError(400, "the metadata has no name: give --name")
    result = client.put("filters", name, meta)
    if args.code:
        result = client.upload_code(name, Path(args.code).read_bytes())
    return result if args.json else print(f"registered filter {result['name']}")


def filter_list(client: ControllerClient, args) -> Any:
    filters = client.registry("filters")
    return filters if args.json else print(fmt.filter_rows(filters))


def filter_show(client: ControllerClient, args) -> Any:
    meta = client.item("filters", args.name)
    return meta if args.json else print(fmt.filter_detail(meta))


def metric_add(client: ControllerClient, args) -> Any:
    result = client.put("metrics", args.name, {"kind": args.kind,
                                               "description": args.description})
    return result if args.json else print(f"metric {result['name']} ({result['kind']})")


def metric_watch(client: ControllerClient, args) -> Any:
    shown = 0
    while args.count is None or shown < args.count:
        snapshot = client.monitoring()
        # --json: one JSON document per line and refresh (JSON Lines), for scripts.
        view = json.dumps(snapshot, sort_keys=True) if args.json else \
            fmt.monitoring_view(snapshot)
        if sys.stdout.isatty() and not args.json:
            print("\033[H\033[2J", end="")  # clear the screen between refreshes
        print(view, flush=True)
        shown += 1
        if args.count is None or shown < args.count:
            time.sleep(args.every)
    return None


def metric_show(client: ControllerClient, args) -> Any:
    result = client.metric_series(args.metric, args.target, args.stage, args.last)
    return result if args.json else print(fmt.metric_series_table(result))


def qos_status(client: ControllerClient, args) -> Any:
    result = client.qos()
    return result if args.json else print(fmt.qos_view(result))


def group_set(client: ControllerClient, args) -> Any:
    result = client.put("groups", args.name, {"tenants": args.tenants})
    return result if args.json else print(f"group {args.name}: {', '.join(result['tenants'])}")


def class_set(client: ControllerClient, args) -> Any:
    result = client.put("classes", args.name, {"actions": " ".join(args.actions),
                                               "description": args.description})
    return result if args.json else print(f"class {result['name']}: {result['actions']}")


def objtype_set(client: ControllerClient, args) -> Any:
    result = client.put("object_types", args.name, {"patterns": args.patterns})
    return result if args.json else print(f"object type {result['name']}: "
                                          f"{', '.join(result['patterns'])}")


def tenant_add(client: ControllerClient, args) -> Any:
    result = client.add_tenant(args.name)
    return result if args.json else print(f"tenant {result['account']}")


def tenant_list(client: ControllerClient, args) -> Any:
    accounts = client.tenants()
    return accounts if args.json else print(fmt.table(["ACCOUNT"], [[a] for a in accounts]))


# -- wiring ---------------------------------------------------------------------


def _run(handler):
    def run(args: argparse.Namespace) -> int:
        try:
            client = ControllerClient.from_env(args.url, args.token)
            result = handler(client, args)
        except AioNotRunning as exc:
            print(f"iostack: {exc} (or give --url and --token)", file=sys.stderr)
            return UNREACHABLE
        except ControllerError as exc:
            print(f"iostack: {exc}" if not exc.diagnostics else str(exc), file=sys.stderr)
            for note in getattr(exc, "__notes__", ()):
                print(note, file=sys.stderr)
            return UNREACHABLE if exc.status == 0 else 1
        if args.json and result is not None:
            print(fmt.json_text(result))
        return 0
    return run


def _common() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="controller URL (env IOSTACK_URL; default: the aio's)")
    common.add_argument("--token", help="API token (env IOSTACK_TOKEN; default: the aio's)")
    common.add_argument("--json", action="store_true", help="print the API's JSON")
    return common


def _verb(verbs, name: str, handler, help_text: str, common) -> argparse.ArgumentParser:
    parser = verbs.add_parser(name, help=help_text, parents=[common])
    parser.set_defaults(func=_run(handler))
    return parser


def _text_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("text", nargs="*", help="policy text (quote it)")
    parser.add_argument("-f", "--file", help="read the policies from FILE ('-': stdin)")


def register(subparsers: argparse._SubParsersAction) -> dict[str, argparse._SubParsersAction]:
    common = _common()

    policy = subparsers.add_parser("policy", help="storage policies (DSL)").add_subparsers(
        dest="policy_command", required=True)
    _text_args(_verb(policy, "validate", policy_validate,
                     "check policy text; changes nothing", common))
    add = _verb(policy, "add", policy_add, "add policies (all or none)", common)
    _text_args(add)
    add.add_argument("--dry-run", action="store_true", help="check and compile only")
    _verb(policy, "list", policy_list, "list policies", common)
    _verb(policy, "show", policy_show, "one policy and its rules", common).add_argument("id")
    _verb(policy, "rm", policy_rm, "remove policies", common).add_argument("ids", nargs="+")
    _verb(policy, "tenant", policy_tenant, "policies that apply to an account",
          common).add_argument("account")
    _verb(policy, "status", policy_status,
          "the version each proxy worker enforces, and who is behind", common)
    _verb(policy, "revoke", policy_revoke,
          "revoke the store's state: every node refuses writes (503) until reinstated",
          common).add_argument("--reason", required=True, help="shown in every refusal")
    _verb(policy, "reinstate", policy_reinstate, "lift a revocation", common)
    history = _verb(policy, "history", policy_history, "every policy change, newest first",
                    common)
    history.add_argument("--limit", type=int, help="only the last N changes")
    diff = _verb(policy, "diff", policy_diff, "what changed between two history versions",
                 common)
    diff.add_argument("old", type=int)
    diff.add_argument("new", type=int)
    rollback = _verb(policy, "rollback", policy_rollback,
                     "make the policies those of a history version (atomically)", common)
    rollback.add_argument("version", type=int)
    rollback.add_argument("--dry-run", action="store_true", help="check and compile only")
    explain = _verb(policy, "explain", policy_explain, "which filters a request gets, and why",
                    common)
    explain.add_argument("method", help="GET, PUT, ... or VOLUME")
    explain.add_argument("path", help="/v1/<account>/<container>/<object>, or a volume name")
    explain.add_argument("--storage-group", help="the volume's storage group (with VOLUME)")
    explain.add_argument("--size", type=_size, help="object size (bytes, or 2M, 512K...)")
    explain.add_argument("--header", action="append", default=[], metavar="KEY:VALUE",
                         help="request header, e.g. X-Object-Meta-Class:hot (repeatable)")

    flt = subparsers.add_parser("filter", help="filter registry").add_subparsers(
        dest="filter_command", required=True)
    _verb(flt, "list", filter_list, "list filters (object and block, KIND says which)", common)
    _verb(flt, "show", filter_show, "a filter's metadata", common).add_argument("name")
    reg = _verb(flt, "register", filter_register, "register filter metadata (JSON file)", common)
    reg.add_argument("metadata", help="FilterMetadata JSON file")
    reg.add_argument("--name", help="filter name (default: from the file)")
    reg.add_argument("--code", help="code to upload; the filter then runs sandboxed")
    _verb(flt, "rm", registry_rm("filters"), "remove a filter", common).add_argument("name")

    simple = [
        ("metric", "metrics", "workload metrics", ["NAME", "KIND", "DESCRIPTION"],
         lambda n, m: [n, m["kind"], m["description"]]),
        ("group", "groups", "tenant groups", ["GROUP", "TENANTS"],
         lambda n, t: [n, ", ".join(t)]),
        ("class", "classes", "QoS classes", ["CLASS", "ACTIONS", "DESCRIPTION"],
         lambda n, c: [n, c["actions"], c["description"]]),
        ("objtype", "object_types", "object types", ["TYPE", "PATTERNS"],
         lambda n, p: [n, "  ".join(p)]),
    ]
    verbs = {}
    for command, kind, help_text, columns, row in simple:
        aliases = ["metrics"] if command == "metric" else []
        verbs[command] = subparsers.add_parser(command, help=help_text,
                                               aliases=aliases).add_subparsers(
            dest=f"{command}_command", required=True)
        _verb(verbs[command], "list", registry_list(kind, columns, row), f"list {help_text}",
              common)
        _verb(verbs[command], "rm", registry_rm(kind), f"remove one of the {help_text}",
              common).add_argument("name")
    metric = _verb(verbs["metric"], "add", metric_add, "register a metric", common)
    metric.add_argument("name")
    metric.add_argument("--kind", default="number",
                        choices=["number", "size", "rate", "ops", "duration"])
    metric.add_argument("--description", default="")
    watch = _verb(verbs["metric"], "watch", metric_watch,
                  "live view of every tenant's and container's metrics", common)
    watch.add_argument("--every", type=float, default=1.0, help="seconds between refreshes")
    watch.add_argument("--count", type=int, help="refresh this many times, then exit")
    show = _verb(verbs["metric"], "show", metric_show, "recent values of a metric", common)
    show.add_argument("metric", help="e.g. PUTS_SEC")
    show.add_argument("target", help="*, t1, AUTH_t1/logs, */logs or group:NAME")
    show.add_argument("--stage", default="proxy", choices=["proxy", "object"])
    show.add_argument("--last", type=int, help="only the last N intervals")
    group = _verb(verbs["group"], "set", group_set, "set a group's tenants", common)
    group.add_argument("name")
    group.add_argument("tenants", nargs="*")
    qos = _verb(verbs["class"], "set", class_set, "define a QoS class", common)
    qos.add_argument("name")
    qos.add_argument("actions", nargs="+", help='e.g. "SET compression, SET caching"')
    qos.add_argument("--description", default="")
    objtype = _verb(verbs["objtype"], "set", objtype_set, "set an object type's patterns",
                    common)
    objtype.add_argument("name")
    objtype.add_argument("patterns", nargs="+", help="regexes on object names, or mime:<regex>")

    qos = subparsers.add_parser("qos", help="bandwidth SLOs").add_subparsers(
        dest="qos_command", required=True)
    _verb(qos, "status", qos_status, "per scope: target vs assigned vs achieved", common)

    tenant = subparsers.add_parser("tenant", help="known tenants").add_subparsers(
        dest="tenant_command", required=True)
    _verb(tenant, "list", tenant_list, "list known tenants", common)
    _verb(tenant, "add", tenant_add, "record a tenant", common).add_argument("name")
    return {"policy": policy, "filter": flt, **verbs, "qos": qos, "tenant": tenant}
