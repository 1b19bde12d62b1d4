"""``iostack object inspect`` and ``iostack usage``: what stored objects went through.

    iostack object inspect /v1/AUTH_t1/logs/a.csv        # filters, bytes, today's policy
    iostack usage                                         # every known tenant, by container
    iostack usage AUTH_t1/logs --json
    iostack usage --cached                                # the last scan, with its age
    iostack policy simulate "FOR CONTAINER AUTH_t1/logs DO SET COMPRESSION"
    iostack policy simulate --id P7 --json                # a stored policy
    iostack reconcile start AUTH_t1/logs --wait           # re-encode under today's policy
    iostack reconcile status AUTH_t1/logs --json
    iostack reconcile stop AUTH_t1/logs

They read the stored objects through Swift's internal client, so they run
where the Swift config is: ``--swift-dir`` (default: the all-in-one's), and
ask the controller (``--url``/``--token``, as every ``iostack`` verb) for
today's policies and the policy history. Exit status: 0 done, 1 refused
(no such object, bad target), 3 controller or Swift config unreachable.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from iostack.atrest import inspect, reconcile, scan, simulate, usage
from iostack.atrest.swift_access import SwiftAccess
from iostack.controller import formatting as fmt
from iostack.controller.cli import _common as controller_options
from iostack.controller.client import ControllerClient, ControllerError
from iostack.endpoints import AioNotRunning, load_aio_info, resolve_state_dir
from iostack.filters.errors import IntegrityError
from iostack.filters.metadata import FilterMetadata
from iostack.filters.tenant_keys import KeyFileProvider
from iostack.policy.connection import connect
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import resolve
from iostack.stored_object import NewerRecordError

UNREACHABLE = 3
NOW_HELP = "judge OBJECT_AGE as of this UNIX time (default: now)"


class Refused(Exception):
    """What the user asked for does not exist or makes no sense (exit status 1)."""


class Context:
    """The controller and the Swift config a verb works with, found once."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.client = ControllerClient.from_env(args.url, args.token)
        self.swift_dir = args.swift_dir or load_aio_info(args.state_dir)["swift_dir"]
        self.access = SwiftAccess(self.swift_dir)
        self._filters: dict[str, FilterMetadata] | None = None
        self._reader: PolicyReader | None = None

    @property
    def reader(self) -> PolicyReader:
        """The proxies' policy store, read as they read it (closed by ``_run``)."""
        if self._reader is None:
            conf = self.access.iostack_conf
            self._reader = PolicyReader(conf.get("redis_url"),
                                        prefix=conf.get("key_prefix", "iostack:"),
                                        live=True)
        return self._reader

    def progress_board(self) -> reconcile.ProgressBoard | None:
        """Where a reconcile pass publishes its progress (the proxies' policy store)."""
        conf = self.access.iostack_conf
        if not conf.get("redis_url"):
            return None
        return reconcile.ProgressBoard(connect(conf["redis_url"]),
                                       KeySpace(conf.get("key_prefix", "iostack:")))

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()

    @property
    def filters(self) -> dict[str, FilterMetadata]:
        if self._filters is None:
            self._filters = {name: FilterMetadata.from_json(meta)
                             for name, meta in self.client.registry("filters").items()}
        return self._filters

    def accounts(self) -> list[str]:
        return self.client.tenants()


def _split_object_path(path: str) -> tuple[str, str, str]:
    parts = path.removeprefix("/v1/").lstrip("/").split("/", 2)
    if len(parts) != 3 or not all(parts):
        raise Refused(f"not an object path: {path!r} (expected /v1/ACCOUNT/CONTAINER/OBJECT)")
    return parts[0], parts[1], parts[2]


def object_inspect(ctx: Context, args) -> Any:
    account, container, obj = _split_object_path(args.path)
    headers = ctx.access.stored_headers(account, container, obj)
    if headers is None:
        raise Refused(f"{args.path}: no such object")
    try:
        stored = inspect.stored_object(account, container, obj, headers)
    except (IntegrityError, NewerRecordError) as exc:
        raise Refused(f"{args.path}: {exc}") from None
    info = simulate.request_info(stored, args.now or time.time())
    levels, filters, object_types = ctx.reader.lookup(info)
    pipeline = [entry.to_json() for entry in resolve(info, levels, filters, object_types).pipeline]
    explain = {"pipeline": inspect.masked(pipeline, ctx.filters)}
    result = inspect.inspect_json(stored, explain, ctx.filters,
                                  ctx.client.history()["history"])
    return result if args.json else print(inspect_view(result))


def _ratio(stored: int, logical: int) -> str:
    return f"{100 * stored / logical:.1f} %" if logical else "-"


def inspect_view(result: dict[str, Any]) -> str:
    lines = [f"{result['path']}  ({result['kind']})",
             f"  logical {result['logical_bytes']} bytes, stored {result['stored_bytes']} "
             f"bytes ({_ratio(result['stored_bytes'], result['logical_bytes'])} of logical)",
             f"  ETag {result['etag']}  Last-Modified {result['last_modified']}  "
             f"Content-Type {result['content_type'] or '-'}"]
    if result["x_delete_at"]:
        lines.append(f"  X-Delete-At {result['x_delete_at']}")
    version = result["written_under_version"]
    lines.append(f"  written under policy version {version if version is not None else '-'}"
                 " (the policy history at its timestamp)")
    for layer, applied in result["layers"].items():
        if not applied:
            lines.append(f"  {layer} layer: no filter")
            continue
        lines.append(f"  {layer} layer, in write order:")
        for n, item in enumerate(applied, 1):
            params = " ".join(f"{k}={v}" for k, v in sorted(item["params"].items()))
            sysmeta = " ".join(f"{k}={_short(v)}" for k, v in sorted(item["sysmeta"].items()))
            lines.append(f"    {n}. {item['filter']} {params}".rstrip())
            if sysmeta:
                lines.append(f"       recorded: {sysmeta}")
            if "sandboxed" in item:
                box = item["sandboxed"]
                lines.append(f"       sandboxed: storlet {box['storlet']}, code sha256 "
                             f"{box['code_sha256'] or '-'}")
    today = result["today"]
    if result["kind"] != "object":
        lines.append(f"  today: a {result['kind']} is stored as written, whatever the policy")
    elif today["differs"]:
        lines.append("  today: would be stored differently")
        lines += [f"    {reason}" for reason in today["reasons"]]
    else:
        lines.append("  today: would be stored the same way")
    return "\n".join(lines)


def _short(value: str, width: int = 24) -> str:
    return value if len(value) <= width else value[:width - 3] + "..."


def usage_cmd(ctx: Context, args) -> Any:
    state_dir = resolve_state_dir(args.state_dir)
    if args.cached:
        try:
            result = usage.load(state_dir)
        except FileNotFoundError:
            raise Refused("no scan kept yet: run 'iostack usage' without --cached") from None
    else:
        try:
            target = scan.Target.parse(args.target)
        except ValueError as exc:
            raise Refused(str(exc)) from None
        result = usage.scan_usage(ctx.access, target, ctx.accounts(), _progress(args))
        usage.save(result, state_dir)
    return result if args.json else print(usage_view(result))


def _progress(args) -> Callable[[int], None] | None:
    if args.json or not sys.stderr.isatty():
        return None

    def show(count: int) -> None:
        if count % 100 == 0:
            print(f"\rscanned {count} objects", end="", file=sys.stderr, flush=True)

    return show


def usage_view(result: dict[str, Any]) -> str:
    def rows(items: list[dict[str, Any]], name: Callable[[dict[str, Any]], str]):
        return [[name(r), r["objects"], r["filtered_objects"], r["logical_bytes"],
                 r["stored_bytes"], _ratio(r["stored_bytes"], r["logical_bytes"])]
                for r in items]

    columns = ["OBJECTS", "FILTERED", "LOGICAL", "STORED", "STORED/LOGICAL"]
    age = result["age_seconds"]
    return "\n".join([
        fmt.table(["TENANT", *columns], rows(result["tenants"], lambda r: r["account"])),
        "",
        fmt.table(["CONTAINER", *columns],
                  rows(result["containers"],
                       lambda r: f"{r['account']}/{r['container']!s}".replace("\x00", "\\0"))),
        "",
        f"scan of {result['target']} took {result['scan_seconds']} s"
        + (f"; {age:.0f} s old" if age else ""),
    ])


def policy_simulate(ctx: Context, args) -> Any:
    if args.id:
        records = [ctx.client.policy(args.id)]
    else:
        text = " ".join(args.text) if not args.file else (
            sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8"))
        if not text.strip():
            raise Refused("give the policy text, -f FILE or --id POLICY")
        records = ctx.client.add_policies(text, dry_run=True)["policies"]
    conf = ctx.access.iostack_conf
    result = simulate.simulate(
        ctx.access, ctx.reader, simulate.Candidate.from_records(records),
        ctx.client.registry("groups"), ctx.accounts(),
        keys=KeyFileProvider(conf["key_file"]) if conf.get("key_file") else None,
        sample_size=args.sample, sample_bytes=args.sample_bytes, seed=args.seed,
        limit=args.limit, progress=_simulate_progress, now=args.now)
    print(file=sys.stderr)
    result["policies"] = [{"id": r["id"], "text": r["text"]} for r in records]
    return result if args.json else print(simulate_view(result))


def _simulate_progress(state: dict[str, Any]) -> None:
    if state["phase"] == "listing":
        line = (f"listed {state['listed']} objects: {state['objects']} matched, "
                f"{state['changed_objects']} would change")
    else:
        line = f"sampling {state['sampled']}/{state['sample_size']}"
    end = "" if sys.stderr.isatty() else "\n"
    print(("\r" if sys.stderr.isatty() else "") + line, end=end, file=sys.stderr, flush=True)


def simulate_view(result: dict[str, Any]) -> str:
    projection = result["projection"]
    bound = projection["error_bound_bytes"]
    bound_text = "not estimable (sample under 2)" if bound is None else f"± {bound} bytes"
    lines = [f"{r['id']}: {r['text']}" for r in result["policies"]] + [
        f"objects matched: {result['objects']} of {result['listed']} listed"
        + (" (stopped at --limit)" if result["truncated"] else ""),
        f"bytes matched: {result['bytes']} logical, {result['stored_bytes']} stored",
        f"would change: {result['changed_objects']} objects ({result['changed_bytes']} bytes);"
        f" {result['skipped']} manifests/symlinks left as they are",
        f"projected stored bytes: {result['projected_stored_bytes']} ({bound_text}, "
        f"{projection['confidence']:.0%} confidence; sample of {projection['sample_size']} "
        f"of {projection['population']} changed objects, first "
        f"{projection['sample_bytes_per_object']} bytes of each)",
    ]
    for step in projection["per_filter"]:
        lines.append(f"  after {step['filter']}: {step['projected_bytes']} bytes")
    if projection["not_projected"]:
        lines.append(f"  not run here (sandboxed, counted as keeping size): "
                     f"{', '.join(projection['not_projected'])}")
    if result.get("expiring_objects"):
        lines.append(f"expiry: {result['expiring_objects']} objects would get an X-Delete-At "
                     f"from reconcile; {result['overdue_objects']} already past it "
                     f"({result['overdue_bytes']} bytes) would go at once")
    lines.append(f"reconcile CPU (proxy side, read + re-encode): "
                 f"~{result['reconcile_cpu_seconds']} s")
    return "\n".join(lines)


def add_simulate_parser(policy_verbs: argparse._SubParsersAction) -> None:
    """``iostack policy simulate`` (mounted on the controller CLI's ``policy`` verbs)."""
    parser = policy_verbs.add_parser(
        "simulate", parents=[common_parser()],
        help="what a policy would do to the objects already stored under its targets")
    parser.add_argument("text", nargs="*", help="policy text (quote it)")
    parser.add_argument("-f", "--file", help="read the policies from FILE ('-': stdin)")
    parser.add_argument("--id", help="simulate a stored policy instead")
    parser.add_argument("--sample", type=int, default=100,
                        help="changed objects run through the filters (default 100)")
    parser.add_argument("--sample-bytes", type=int, default=4 << 20,
                        help="bytes read of each sampled object (default 4 MiB)")
    parser.add_argument("--seed", type=int, default=0, help="the sample's random seed")
    parser.add_argument("--limit", type=int, help="list at most this many objects")
    parser.add_argument("--now", type=float, help=NOW_HELP)
    parser.set_defaults(func=_run(policy_simulate))


def _reconcile_target(args) -> tuple[scan.Target, Path]:
    try:
        target = scan.Target.parse(args.target)
    except ValueError as exc:
        raise Refused(str(exc)) from None
    return target, reconcile.state_path(resolve_state_dir(args.state_dir), target)


def reconcile_run(ctx: Context, args) -> Any:
    target, path = _reconcile_target(args)
    worker = reconcile.Reconciler(
        ctx.access, ctx.reader, target, [] if target.account else ctx.accounts(), path,
        reconcile.Throttle(args.objects_per_second, args.bytes_per_second, args.duty),
        clock=(lambda: args.now) if args.now else time.time, board=ctx.progress_board())
    worker.install_signals()
    state = worker.run()
    return state.to_json() if args.json else print(reconcile_view(state.to_json()))


def reconcile_start(ctx: Context, args) -> Any:
    target, path = _reconcile_target(args)
    current = reconcile.status(path)
    if current and current["state"] in ("running", "stopping"):
        raise Refused(f"reconcile of {target} is already running (pid {current['pid']})")
    log = path.with_suffix(".log")
    log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "iostack.cli", "reconcile", "run", str(target),
            "--swift-dir", str(ctx.swift_dir), "--state-dir", str(resolve_state_dir(
                args.state_dir)), "--duty", str(args.duty)]
    for flag, value in (("--objects-per-second", args.objects_per_second),
                        ("--bytes-per-second", args.bytes_per_second), ("--now", args.now)):
        if value:
            argv += [flag, str(value)]
    # The controller's token goes by environment, never on a command line.
    env = dict(os.environ, IOSTACK_URL=ctx.client.url, IOSTACK_TOKEN=ctx.client.token or "")
    launched = time.time()
    with open(log, "ab") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,  # noqa: S603
                                stderr=out, env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not _reported(reconcile.status(path) or {}, proc, launched):
        if proc.poll() is not None and not _reported(reconcile.status(path) or {}, proc,
                                                     launched):
            raise Refused(f"the reconcile daemon exited at once (status {proc.returncode}); "
                          f"see {log}")
        if time.monotonic() > deadline:
            raise Refused(f"the reconcile daemon did not report within 60 s; see {log}")
        time.sleep(0.2)
    if not args.wait:
        started = reconcile.status(path)
        return started if args.json else print(
            f"reconcile of {target} started (pid {proc.pid}); "
            f"'iostack reconcile status {target}' shows its progress")
    final = _wait(path)
    return final if args.json else print(reconcile_view(final))


def _reported(record: dict[str, Any], proc: subprocess.Popen, launched: float) -> bool:
    """Whether the daemon ``proc`` has written its record: running under its pid, or, for a
    small target that finished between two looks (its last save clears the pid), a pass
    that ended after it was launched."""
    if record.get("pid") == proc.pid:
        return True
    return (proc.poll() is not None and record.get("state") in ("done", "stopped")
            and float(record.get("updated") or 0) >= launched)


def _wait(path: Path) -> dict[str, Any]:
    tty = sys.stderr.isatty()
    shown = 0.0
    while True:
        status = reconcile.status(path) or {}
        if status.get("state") not in ("running", "stopping"):
            if tty:
                print(file=sys.stderr)
            return status
        if tty or time.monotonic() - shown >= 5:
            shown = time.monotonic()
            print(("\r" if tty else "") + progress_bar(status), end="" if tty else "\n",
                  file=sys.stderr, flush=True)
        time.sleep(0.5)


def progress_bar(status: dict[str, Any], width: int = 30) -> str:
    total = status.get("total") or 0
    done = min(status["scanned"], total) if total else status["scanned"]
    filled = int(width * done / total) if total else 0
    eta = status.get("eta_seconds")
    return (f"[{'#' * filled}{'.' * (width - filled)}] {status['scanned']}/{total or '?'} "
            f"objects, {status['reencoded']} re-encoded, {status['failed']} failed"
            + (f", ETA {eta:.0f} s" if eta is not None else ""))


def reconcile_status(ctx: Context, args) -> Any:
    _target, path = _reconcile_target(args)
    status = reconcile.status(path)
    if status is None:
        raise Refused(f"no reconcile of {args.target} has run")
    return status if args.json else print(reconcile_view(status))


def reconcile_stop(ctx: Context, args) -> Any:
    target, path = _reconcile_target(args)
    status = reconcile.status(path)
    if not status or status["state"] not in ("running", "stopping"):
        raise Refused(f"no reconcile of {target} is running")
    os.kill(status["pid"], signal.SIGTERM)
    deadline = time.monotonic() + 120
    while reconcile.alive(status["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    final = reconcile.status(path)
    return final if args.json else print(reconcile_view(final))


def reconcile_view(status: dict[str, Any]) -> str:
    lines = [f"reconcile of {status['target']}: {status['state']}", "  " + progress_bar(status),
             f"  skipped {status['skipped']} (up to date, manifests, expired; "
             f"{status['raced']} a tenant changed first)",
             f"  re-encoded {status['bytes_reencoded']} logical bytes: stored "
             f"{status['stored_bytes_before']} -> {status['stored_bytes_after']} bytes",
             f"  {status['objects_per_second']} objects/s over {status['seconds']:.1f} s"]
    if status.get("error"):
        lines.append(f"  error: {status['error']}")
    lines += [f"  failed: {why}" for why in status.get("failures", [])]
    return "\n".join(lines)


def _add_reconcile_parsers(subparsers, common: argparse.ArgumentParser) -> None:
    verbs = subparsers.add_parser(
        "reconcile", help="re-encode stored objects under today's policy").add_subparsers(
        dest="reconcile_command", required=True)
    throttle = argparse.ArgumentParser(add_help=False)
    throttle.add_argument("--objects-per-second", type=float, help="at most this many objects/s")
    throttle.add_argument("--bytes-per-second", type=float, help="at most this many bytes/s")
    throttle.add_argument("--now", type=float, help=NOW_HELP)
    throttle.add_argument("--duty", type=float, default=0.5,
                          help="share of wall time it works, resting in proportion to how "
                               "long objects take (default 0.5)")
    for name, handler, help_text, parents in (
            ("start", reconcile_start, "start (or resume) a pass in the background",
             [common, throttle]),
            ("run", reconcile_run, "run a pass in the foreground (what start runs)",
             [common, throttle]),
            ("status", reconcile_status, "progress, counts and ETA", [common]),
            ("stop", reconcile_stop, "stop a pass (start resumes it)", [common])):
        parser = verbs.add_parser(name, parents=parents, help=help_text)
        parser.add_argument("target", help="ACCOUNT, ACCOUNT/CONTAINER or ACCOUNT/CONTAINER/OBJECT")
        parser.set_defaults(func=_run(handler))
        if name == "start":
            parser.add_argument("--wait", action="store_true",
                                help="show a progress bar and return when the pass ends")


# -- wiring ---------------------------------------------------------------------


def _run(handler: Callable[[Context, argparse.Namespace], Any]):
    def run(args: argparse.Namespace) -> int:
        ctx = None
        try:
            ctx = Context(args)
            result = handler(ctx, args)
        except AioNotRunning as exc:
            print(f"iostack: {exc} (or give --swift-dir, --url and --token)", file=sys.stderr)
            return UNREACHABLE
        except (FileNotFoundError, ValueError) as exc:
            print(f"iostack: {exc}", file=sys.stderr)
            return UNREACHABLE
        except ControllerError as exc:
            print(f"iostack: {exc}", file=sys.stderr)
            return UNREACHABLE if exc.status == 0 else 1
        except Refused as exc:
            print(f"iostack: {exc}", file=sys.stderr)
            return 1
        finally:
            if ctx is not None:
                ctx.close()
        if args.json and result is not None:
            print(fmt.json_text(result))
        return 0
    return run


def common_parser() -> argparse.ArgumentParser:
    """The controller CLI's options, and where the Swift config is."""
    common = argparse.ArgumentParser(add_help=False, parents=[controller_options()])
    common.add_argument("--swift-dir", help="Swift config dir with proxy-server.conf and "
                        "rings (default: the all-in-one's)")
    common.add_argument("--state-dir", type=Path, help="the all-in-one's state dir")
    return common


def register(subparsers: argparse._SubParsersAction) -> dict[str, argparse._SubParsersAction]:
    common = common_parser()
    obj = subparsers.add_parser("object", help="stored objects").add_subparsers(
        dest="object_command", required=True)
    inspect_parser = obj.add_parser("inspect", parents=[common],
                                    help="what an object went through, and today's policy")
    inspect_parser.add_argument("path", help="/v1/ACCOUNT/CONTAINER/OBJECT")
    inspect_parser.add_argument("--now", type=float, help=NOW_HELP)
    inspect_parser.set_defaults(func=_run(object_inspect))
    usage_parser = subparsers.add_parser("usage", parents=[common],
                                         help="logical vs stored bytes per tenant and container")
    usage_parser.add_argument("target", nargs="?",
                              help="ACCOUNT or ACCOUNT/CONTAINER (default: every known tenant)")
    usage_parser.add_argument("--cached", action="store_true",
                              help="show the last scan and its age instead of scanning")
    usage_parser.set_defaults(func=_run(usage_cmd))
    _add_reconcile_parsers(subparsers, common)
    return {"object": obj}
