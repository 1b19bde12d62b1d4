"""How the controller CLI shows the API's answers: tables and views as text.

Each function takes what a REST call answered (the JSON the CLI prints with
``--json``) and returns the text the CLI prints without it; nothing here
talks to the controller or prints. ``iostack metric watch`` refreshes
``monitoring_view``; ``json_text`` is the ``--json`` output.
"""

from __future__ import annotations

import json
import time
from typing import Any


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


def json_text(result: Any) -> str:
    """The ``--json`` output: the API's answer, indented, keys sorted."""
    return json.dumps(result, indent=2, sort_keys=True)


def params(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _targets(record: dict[str, Any]) -> str:
    return ", ".join(f"{t['kind']}:{t['name']}" for t in record["targets"])


def _actions(record: dict[str, Any]) -> str:
    return ", ".join(f"{a['verb'].upper()} {a['filter']}"
                     + (f"({params(a['params'])})" if a["params"] else "")
                     for a in record["actions"])


def actor(record: dict[str, Any]) -> str:
    """A dynamic policy's actor in a few words: per target, its state and last values."""
    state_of = record.get("actor")
    if not record.get("dynamic"):
        return ""
    if not state_of:
        return "waiting for metrics"
    parts = [f"error: {state_of['error']}"] if state_of.get("error") else []
    for target, state in state_of.get("targets", {}).items():
        values = ", ".join(f"{m}={number(v)}" for m, v in (state.get("values") or {}).items())
        parts.append(f"{target.split(':', 1)[1]} {state['state']}"
                     + (f" ({values})" if values else ""))
    return "; ".join(parts)


def number(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def policy_rows(records: list[dict[str, Any]]) -> str:
    return table(["ID", "STATUS", "TARGETS", "ACTIONS", "ACTOR", "TEXT"],
                 [[r["id"], r["status"], _targets(r), _actions(r), actor(r), r["text"]]
                  for r in records])


def policy_detail(record: dict[str, Any]) -> str:
    """One policy, the warnings stored with it, and the rules it compiled to (``policy show``)."""
    warnings = "".join(line + "\n" for line in warning_lines(record))
    return (f"{record['id']}  {record['status']}  created {record['created']}\n"
            f"{record['text']}\n{warnings}\n"
            + table(["RULE", "LEVEL", "TARGET", "ACTION", "PARAMS", "STAGE"],
                    [[r["id"], r["level"], r["target"], f"{r['verb'].upper()} {r['filter']}",
                      params(r["params"]), r["stage"] or "default"] for r in record["rules"]]))


def warning_lines(result: dict[str, Any]) -> list[str]:
    """The checker's warnings on policy text, with line and column."""
    return [f"warning: line {w['line']}, column {w['column']}: {w['message']}"
            for w in result.get("warnings", [])]


def explain_view(result: dict[str, Any], title: str) -> str:
    """Which filters a request (or a volume) gets, and why the others do not apply."""
    lines = [title]
    paths = result["request"].get("policy_paths") or []
    if len(paths) > 1:
        origin = "/".join(p for p in paths[0] if p)
        lines.append(f"stored under the policies of {origin} (where the tenant wrote) "
                     "and of its own container")
    lines += [f"warning: {warning}" for warning in result.get("warnings", [])]
    if result["pipeline"]:
        lines.append(table(["#", "FILTER", "STAGE", "SANDBOXED", "PARAMS", "FROM"],
                           [[i, e["filter"], e["stage"], "yes" if e["sandboxed"] else "no",
                             params(e["params"]),
                             " < ".join(f"{s['policy']}@{s['level']}" for s in e["sources"])]
                            for i, e in enumerate(result["pipeline"], start=1)],
                           max_width=70))
    else:
        lines.append("no filter applies")
    lines += [f"lifecycle: {line}" for line in lifecycle_lines(result["pipeline"])]
    others = [n for n in result["notes"] if n["outcome"] != "applied"]
    if others:
        lines.append("\nnot applied:")
        lines.append(table(["FILTER", "POLICY", "LEVEL", "OUTCOME", "WHY"],
                           [[n["filter"], n["policy"] or "-", n["level"] or "-", n["outcome"],
                             n["reason"]] for n in others], max_width=80))
    return "\n".join(lines)


def duration(seconds: float) -> str:
    """``90 d``, ``12 h``, ``30 min``, ``45 s``: the largest unit that divides it."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size:g} {unit}"
    return f"{seconds:g} s"


def lifecycle_lines(pipeline: list[dict[str, Any]]) -> list[str]:
    """What ``SET EXPIRY`` in a resolved pipeline does to the objects written."""
    return [f"objects written here are deleted {duration(e['params']['after'])} after each "
            "write (X-Delete-At; Swift's object-expirer removes them)"
            for e in pipeline if e["filter"] == "expiry" and "after" in e["params"]]


def _rule_line(rule: dict[str, Any]) -> str:
    rule_params = f"({params(rule['params'])})" if rule["params"] else ""
    return (f"{rule['level']} {rule['target']}: {rule['verb'].upper()} {rule['filter']}"
            f"{rule_params} [{rule.get('stage') or 'default stage'}]")


def history_table(result: dict[str, Any]) -> str:
    rows = []
    for entry in result["history"]:
        changes = [f"+{p['id']} {p['text']}" for p in entry["added_policies"]]
        changes += [f"-{p['id']} {p['text']}" for p in entry["removed_policies"]]
        rows.append([entry["version"], entry["at"], entry["who"] or "-",
                     entry["op"] + (f" ({entry['note']})" if entry["note"] else ""),
                     "; ".join(changes) or "-"])
    return table(["VERSION", "WHEN", "WHO", "CHANGE", "POLICIES"], rows, max_width=90)


def diff_view(diff: dict[str, Any]) -> str:
    """Policies and compiled rules between two history versions, as a unified diff."""
    lines = [f"--- version {diff['from']}\n+++ version {diff['to']}"]
    lines += [f"- {record['text']}" for record in diff["policies_removed"]]
    lines += [f"+ {record['text']}" for record in diff["policies_added"]]
    if diff["rules_removed"] or diff["rules_added"]:
        lines.append("compiled rules:")
    lines += [f"- {_rule_line(rule)}" for rule in diff["rules_removed"]]
    lines += [f"+ {_rule_line(rule)}" for rule in diff["rules_added"]]
    return "\n".join(lines)


def filter_kind(meta: dict[str, Any]) -> str:
    """``object`` (Swift targets) or ``block`` (VOLUME/STORAGE_GROUP targets)."""
    return meta.get("extra", {}).get("domain", "object")


def filter_rows(filters: dict[str, dict[str, Any]]) -> str:
    """``filter list``: one vocabulary, object filters first, with the kind of target."""
    rows = []
    for name, meta in sorted(filters.items(), key=lambda i: (filter_kind(i[1]) != "object",
                                                            i[0])):
        block = filter_kind(meta) == "block"
        rows.append([name, filter_kind(meta),
                     "read,write" if block else ",".join(meta["methods"]),
                     "volume stack" if block else ",".join(meta["stages"]),
                     meta["extra"].get("runtime", "native"), meta["description"]])
    return table(["NAME", "KIND", "METHODS", "STAGES", "RUNTIME", "DESCRIPTION"], rows)


def _sized(value: float, units: tuple[str, ...], step: int) -> str:
    for unit in units[:-1]:
        if abs(value) < step:
            return f"{value:g} {unit}"
        value /= step
    return f"{value:g} {units[-1]}"


def param_value(value: Any, param: dict[str, Any]) -> str:
    """A parameter's value for people: 256 KiB, 30 MB/s, 500 ops/s, 2 s."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
        return "-" if value is None else str(value)
    kind, unit = param["type"], param.get("unit") or ""
    if kind == "size":
        return _sized(value, ("B", "KiB", "MiB", "GiB", "TiB"), 1024)
    if kind == "rate" and unit == "ops":
        return f"{value:g} ops/s"
    if kind == "rate":
        return _sized(value, ("B/s", "kB/s", "MB/s", "GB/s"), 1000)
    if kind == "duration":
        return f"{value:g} s"
    return f"{value:g}"


def filter_detail(meta: dict[str, Any]) -> str:
    kind = filter_kind(meta)
    where = "volume stacks (VOLUME/STORAGE_GROUP targets)" if kind == "block" else (
        f"methods {', '.join(meta['methods'])}; stages {', '.join(meta['stages'])} "
        f"(default {meta['default_stage']})")
    lines = [f"{meta['name']} ({kind} filter): {meta['description']}",
             f"{where}; layout {meta['layout_group'] or '-'}; "
             f"runs before {', '.join(meta['runs_before']) or '-'}"]
    if meta["params"]:
        lines.append(table(["PARAM", "TYPE", "DEFAULT", "MIN", "MAX", "CHOICES", "DESCRIPTION"],
                           [[p["name"], p["type"], param_value(p["default"], p),
                             param_value(p["minimum"], p), param_value(p["maximum"], p),
                             ",".join(p["choices"]), p["description"]] for p in meta["params"]]))
    return "\n".join(lines)


WATCH_COLUMNS = (("GETS/s", "GETS_SEC", 1), ("PUTS/s", "PUTS_SEC", 1),
                 ("GET MB/s", "GET_BW", 1e6), ("PUT MB/s", "PUT_BW", 1e6),
                 ("ACTIVE", "ACTIVE_REQUESTS", 1), ("GET p95 ms", "GET_LATENCY_P95", 1e-3),
                 ("PUT p95 ms", "PUT_LATENCY_P95", 1e-3))


def monitoring_view(snapshot: dict[str, Any]) -> str:
    """The ``metric watch`` screen: every target's metrics in the last interval, and actors."""
    if snapshot["interval"] is None:
        return "no metrics yet (is the metric middleware in the proxy pipeline?)"
    when = time.strftime("%H:%M:%S", time.localtime(snapshot["interval"]))
    workers = snapshot["sources"].get("proxy", [])
    # A source is one worker, "proxy-<ip>:<port>-<pid>": a proxy is an address.
    proxies = len({source.rpartition("-")[0] for source in workers})
    lines = [f"interval {when} ({snapshot['seconds']:g} s)  proxies {proxies} "
             f"({len(workers)} worker{'' if len(workers) == 1 else 's'})  "
             f"batches {snapshot['received']}  late {snapshot['late']}  "
             f"lost samples {snapshot['lost']}"
             + ("" if snapshot["connected"] else "  BROKER UNREACHABLE"), ""]
    rows = [[target] + [number(None if values.get(metric) is None else values[metric] / scale)
                        for _, metric, scale in WATCH_COLUMNS]
            for target, values in snapshot["targets"].items()]
    lines.append(table(["TARGET", *(c[0] for c in WATCH_COLUMNS)], rows))
    for pid, state in sorted(snapshot["actors"].items()):
        lines.append(f"{pid}: {actor({'dynamic': True, 'actor': state})}")
    return "\n".join(lines)


def metric_series_table(result: dict[str, Any]) -> str:
    return table(["INTERVAL", result["metric"]],
                 [[time.strftime("%H:%M:%S", time.localtime(v["start"])), number(v["value"])]
                  for v in result["values"]])


def _rate(value: float | None, direction: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g}/s" if direction == "ops" else f"{value / 1e6:.3g} MB/s"


def qos_view(result: dict[str, Any]) -> str:
    """Per scope and direction: the SLO's target, what is assigned, what is achieved."""
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
    capacity = ", ".join(f"{d} {_rate(c, d) if c else 'not set'}"
                         for d, c in result["capacity"].items())
    if not any(result["capacity"].values()):
        capacity += (" (only caps are enforced; qos_capacity_get/put honour minimums and "
                     "share spare capacity)")
    return f"capacity: {capacity}\n" + table(["SCOPE", "DIR", "TARGET", "ASSIGNED", "ACHIEVED"],
                                             rows)


def policy_status_view(status: dict[str, Any]) -> str:
    """Per proxy worker: the policy version it enforces, since when, and who is behind."""
    rows = [[w["proxy"], w["pid"], "-" if w["version"] is None else w["version"],
             "-" if w["age"] is None else f"{w['age']:.0f}s",
             "silent" if w["silent"] else "behind" if w["behind"] else "current",
             f"{w['reported_ago']:.0f}s ago"] for w in status["workers"]]
    head = f"store version {status['version']}: " + (
        "every reporting worker enforces it" if status["converged"]
        else f"{len(status['behind'])} worker(s) behind" if status["behind"]
        else "no worker reports")
    if status.get("revoked"):
        head += (f"\nREVOKED by {status['revoked']['by'] or 'an operator'}: "
                 f"{status['revoked']['reason']} (writes are refused; iostack policy reinstate)")
    return "\n".join([head, table(["proxy", "pid", "version", "age", "state", "reported"], rows)])
