"""``iostack policy|filter|metric|group|class|objtype|tenant ...``: the controller CLI.

Every verb maps to one REST call (see ``client.py``). The controller is found
from ``--url``/``--token``, then ``$IOSTACK_URL``/``$IOSTACK_TOKEN``, then the
running all-in-one. Output is a readable table, or the API's JSON with
``--json``. Exit status: 0 done, 1 refused by the controller (the reason is on
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

from iostack.aio.state import AioNotRunning
from iostack.controller.client import ControllerClient, ControllerError
from iostack.dsl.units import UnitError, parse_unit
from iostack.storlet_runtime.cli import add_upload_parser

UNREACHABLE = 3


# -- output ---------------------------------------------------------------------


def table(headers: list[str], rows: list[list[Any]], max_width: int = 60) -> str:
    """Left-aligned columns; long cells are cut with an ellipsis."""
    def cell(value: Any) -> str:
        text = "" if value is None else str(value)
        return text if len(text) <= max_width else text[:max_width - 1] + "…"

    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
              for r in cells]
    return "\n".join(lines)


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _targets(record: dict[str, Any]) -> str:
    return ", ".join(f"{t['kind']}:{t['name']}" for t in record["targets"])


def _actions(record: dict[str, Any]) -> str:
    return ", ".join(f"{a['verb'].upper()} {a['filter']}"
                     + (f"({_params(a['params'])})" if a["params"] else "")
                     for a in record["actions"])


def _actor(record: dict[str, Any]) -> str:
    """A dynamic policy's actor in a few words: per target, its state and last values."""
    actor = record.get("actor")
    if not record.get("dynamic"):
        return ""
    if not actor:
        return "waiting for metrics"
    parts = [f"error: {actor['error']}"] if actor.get("error") else []
    for target, state in actor.get("targets", {}).items():
        values = ", ".join(f"{m}={_number(v)}" for m, v in (state.get("values") or {}).items())
        parts.append(f"{target.split(':', 1)[1]} {state['state']}"
                     + (f" ({values})" if values else ""))
    return "; ".join(parts)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _policy_rows(records: list[dict[str, Any]]) -> str:
    return table(["ID", "STATUS", "TARGETS", "ACTIONS", "ACTOR", "TEXT"],
                 [[r["id"], r["status"], _targets(r), _actions(r), _actor(r), r["text"]]
                  for r in records])


def _warnings(result: dict[str, Any]) -> None:
    for w in result.get("warnings", []):
        print(f"warning: line {w['line']}, column {w['column']}: {w['message']}",
              file=sys.stderr)


# -- policy verbs ---------------------------------------------------------------


def _text(args: argparse.Namespace) -> str:
    if args.file:
        return sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    if not args.text:
        raise ControllerError(400, "give the policy text, or -f FILE ('-' for stdin)")
    return " ".join(args.text)


def policy_validate(client: ControllerClient, args) -> Any:
    result = client.validate(_text(args))
    _warnings(result)
    if args.json:
        return result
    count = len(result["policies"]) + len(result["classes"])
    print(f"valid: {count} statement{'s' if count != 1 else ''}")
    return None


def policy_add(client: ControllerClient, args) -> Any:
    result = client.add_policies(_text(args), dry_run=args.dry_run)
    _warnings(result)
    if args.json:
        return result
    if result["policies"]:
        print(_policy_rows(result["policies"]))
    for qos in result["classes"]:
        print(f"class {qos['name']}: {qos['actions']}")
    if args.dry_run:
        print("dry run: nothing was stored")
    return None


def policy_list(client: ControllerClient, args) -> Any:
    records = client.policies()
    return records if args.json else print(_policy_rows(records))


def policy_show(client: ControllerClient, args) -> Any:
    record = client.policy(args.id)
    if args.json:
        return record
    print(f"{record['id']}  {record['status']}  created {record['created']}\n{record['text']}\n")
    print(table(["RULE", "LEVEL", "TARGET", "ACTION", "PARAMS", "STAGE"],
                [[r["id"], r["level"], r["target"], f"{r['verb'].upper()} {r['filter']}",
                  _params(r["params"]), r["stage"] or "default"] for r in record["rules"]]))
    return None


def policy_rm(client: ControllerClient, args) -> Any:
    removed = [client.delete_policy(pid)["deleted"] for pid in args.ids]
    if args.json:
        return removed
    for record in removed:
        print(f"removed {record['id']}: {record['text']}")
    return None


def policy_tenant(client: ControllerClient, args) -> Any:
    result = client.tenant_policies(args.account)
    return result if args.json else print(_policy_rows(result["policies"]))


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
    if args.json:
        return result
    print(title)
    paths = result["request"].get("policy_paths") or []
    if len(paths) > 1:
        origin = "/".join(p for p in paths[0] if p)
        print(f"stored under the policies of {origin} (where the tenant wrote) "
              "and of its own container")
    for warning in result.get("warnings", []):
        print(f"warning: {warning}")
    if result["pipeline"]:
        print(table(["#", "FILTER", "STAGE", "SANDBOXED", "PARAMS", "FROM"],
                    [[i, e["filter"], e["stage"], "yes" if e["sandboxed"] else "no",
                      _params(e["params"]),
                      " < ".join(f"{s['policy']}@{s['level']}" for s in e["sources"])]
                     for i, e in enumerate(result["pipeline"], start=1)], max_width=70))
    else:
        print("no filter applies")
    others = [n for n in result["notes"] if n["outcome"] != "applied"]
    if others:
        print("\nnot applied:")
        print(table(["FILTER", "POLICY", "LEVEL", "OUTCOME", "WHY"],
                    [[n["filter"], n["policy"] or "-", n["level"] or "-", n["outcome"],
                      n["reason"]] for n in others], max_width=80))
    return None


def _rule_line(rule: dict[str, Any]) -> str:
    params = f"({_params(rule['params'])})" if rule["params"] else ""
    return (f"{rule['level']} {rule['target']}: {rule['verb'].upper()} {rule['filter']}{params}"
            f" [{rule.get('stage') or 'default stage'}]")


def policy_history(client: ControllerClient, args) -> Any:
    result = client.history(args.limit)
    if args.json:
        return result
    rows = []
    for entry in result["history"]:
        changes = [f"+{p['id']} {p['text']}" for p in entry["added_policies"]]
        changes += [f"-{p['id']} {p['text']}" for p in entry["removed_policies"]]
        rows.append([entry["version"], entry["at"], entry["who"] or "-",
                     entry["op"] + (f" ({entry['note']})" if entry["note"] else ""),
                     "; ".join(changes) or "-"])
    print(table(["VERSION", "WHEN", "WHO", "CHANGE", "POLICIES"], rows, max_width=90))
    return None


def policy_diff(client: ControllerClient, args) -> Any:
    diff = client.history_diff(args.old, args.new)
    if args.json:
        return diff
    print(f"--- version {diff['from']}\n+++ version {diff['to']}")
    for record in diff["policies_removed"]:
        print(f"- {record['text']}")
    for record in diff["policies_added"]:
        print(f"+ {record['text']}")
    if diff["rules_removed"] or diff["rules_added"]:
        print("compiled rules:")
    for rule in diff["rules_removed"]:
        print(f"- {_rule_line(rule)}")
    for rule in diff["rules_added"]:
        print(f"+ {_rule_line(rule)}")
    return None


def policy_rollback(client: ControllerClient, args) -> Any:
    result = client.rollback(args.version, dry_run=args.dry_run)
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
    number = text.rstrip("bBkKmMgGtTiI")
    try:
        quantity = parse_unit(float(number), text[len(number):] or None)
    except (ValueError, UnitError):
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None
    if quantity.kind not in ("size", "number") or quantity.value < 0:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}")
    return int(quantity.value)


# -- registry verbs -------------------------------------------------------------


def registry_list(kind: str, columns: list[str], row: Callable[[str, Any], list[Any]]):
    def run(client: ControllerClient, args) -> Any:
        items = client.registry(kind)
        if args.json:
            return items
        print(table(columns, [row(name, value) for name, value in items.items()]))
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


def filter_show(client: ControllerClient, args) -> Any:
    meta = client.item("filters", args.name)
    if args.json:
        return meta
    print(f"{meta['name']}: {meta['description']}")
    print(f"methods {', '.join(meta['methods'])}; stages {', '.join(meta['stages'])} "
          f"(default {meta['default_stage']}); layout {meta['layout_group'] or '-'}; "
          f"runs before {', '.join(meta['runs_before']) or '-'}")
    if meta["params"]:
        print(table(["PARAM", "TYPE", "DEFAULT", "MIN", "MAX", "CHOICES", "DESCRIPTION"],
                    [[p["name"], p["type"], p["default"], p["minimum"], p["maximum"],
                      ",".join(p["choices"]), p["description"]] for p in meta["params"]]))
    return None


def metric_add(client: ControllerClient, args) -> Any:
    result = client.put("metrics", args.name, {"kind": args.kind,
                                               "description": args.description})
    return result if args.json else print(f"metric {result['name']} ({result['kind']})")


WATCH_COLUMNS = (("GETS/s", "GETS_SEC", 1), ("PUTS/s", "PUTS_SEC", 1),
                 ("GET MB/s", "GET_BW", 1e6), ("PUT MB/s", "PUT_BW", 1e6),
                 ("ACTIVE", "ACTIVE_REQUESTS", 1), ("GET p95 ms", "GET_LATENCY_P95", 1e-3),
                 ("PUT p95 ms", "PUT_LATENCY_P95", 1e-3))


def monitoring_view(snapshot: dict[str, Any]) -> str:
    """The ``metric watch`` screen: every target's metrics in the last interval, and actors."""
    if snapshot["interval"] is None:
        return "no metrics yet (is the metric middleware in the proxy pipeline?)"
    when = time.strftime("%H:%M:%S", time.localtime(snapshot["interval"]))
    proxies = len(snapshot["sources"].get("proxy", []))
    lines = [f"interval {when} ({snapshot['seconds']:g} s)  proxies {proxies}  "
             f"batches {snapshot['received']}  late {snapshot['late']}  "
             f"lost samples {snapshot['lost']}"
             + ("" if snapshot["connected"] else "  BROKER UNREACHABLE"), ""]
    rows = [[target] + [_number(None if values.get(metric) is None else values[metric] / scale)
                        for _, metric, scale in WATCH_COLUMNS]
            for target, values in snapshot["targets"].items()]
    lines.append(table(["TARGET", *(c[0] for c in WATCH_COLUMNS)], rows))
    for pid, actor in sorted(snapshot["actors"].items()):
        lines.append(f"{pid}: {_actor({'dynamic': True, 'actor': actor})}")
    return "\n".join(lines)


def metric_watch(client: ControllerClient, args) -> Any:
    shown = 0
    while args.count is None or shown < args.count:
        view = monitoring_view(client.monitoring())
        if sys.stdout.isatty():
            print("\033[H\033[2J", end="")  # clear the screen between refreshes
        print(view, flush=True)
        shown += 1
        if args.count is None or shown < args.count:
            time.sleep(args.every)
    return None


def metric_show(client: ControllerClient, args) -> Any:
    result = client.metric_series(args.metric, args.target, args.stage, args.last)
    if args.json:
        return result
    print(table(["INTERVAL", result["metric"]],
                [[time.strftime("%H:%M:%S", time.localtime(v["start"])), _number(v["value"])]
                 for v in result["values"]]))
    return None


def _rate(value: float | None, direction: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}/s" if direction == "ops" else f"{value / 1e6:.3g} MB/s"


def qos_status(client: ControllerClient, args) -> Any:
    result = client.qos()
    if args.json:
        return result
    rows = []
    for scope, row in sorted(result["scopes"].items()):
        slo = row.get("slo") or {}
        for direction in ("get", "put", "ops"):
            target = slo.get(direction)
            if not target and not (row.get(direction) or {}).get("achieved"):
                continue
            kind = "cap" if direction == "ops" or slo.get("mode") == "max" else "min"
            rows.append([scope, direction, f"{kind} {_rate(target, direction)}" if target
                         else "best effort", _rate(row[direction]["assigned"], direction),
                         _rate(row[direction]["achieved"], direction)])
    capacity = ", ".join(f"{d} {_rate(c, d) if c else 'unknown'}"
                         for d, c in result["capacity"].items())
    print(f"capacity: {capacity}")
    print(table(["SCOPE", "DIR", "TARGET", "ASSIGNED", "ACHIEVED"], rows))
    return None


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
    return accounts if args.json else print(table(["ACCOUNT"], [[a] for a in accounts]))


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
            return UNREACHABLE if exc.status == 0 else 1
        if args.json and result is not None:
            print(json.dumps(result, indent=2, sort_keys=True))
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


def register(subparsers: argparse._SubParsersAction) -> None:
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
    _verb(flt, "list", registry_list("filters", ["NAME", "METHODS", "STAGES", "RUNTIME",
                                                 "DESCRIPTION"],
                                     lambda n, m: [n, ",".join(m["methods"]),
                                                   ",".join(m["stages"]),
                                                   m["extra"].get("runtime", "native"),
                                                   m["description"]]),
          "list filters", common)
    _verb(flt, "show", filter_show, "a filter's metadata", common).add_argument("name")
    reg = _verb(flt, "register", filter_register, "register filter metadata (JSON file)", common)
    reg.add_argument("metadata", help="FilterMetadata JSON file")
    reg.add_argument("--name", help="filter name (default: from the file)")
    reg.add_argument("--code", help="code to upload; the filter then runs sandboxed")
    _verb(flt, "rm", registry_rm("filters"), "remove a filter", common).add_argument("name")
    # Uploading code also deploys it as a storlet: the Storlets runtime owns that verb.
    add_upload_parser(flt)

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
