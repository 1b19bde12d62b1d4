"""``iostack storlet ...``: sandboxed filters and the sandboxes that run them.

Verbs:

``iostack storlet upload FILE.py --name NAME [--main Module.Class] [--tenant t1]``
    A tenant's or admin's own Python filter (a Storlets-API storlet):
    validated statically, run once on sample data in the tenant's sandbox
    (``upload_check``; a failure is refused with nothing registered),
    registered with the controller (metadata ``sandboxable``,
    ``extra.runtime = storlet``; the code itself through ``PUT
    /v1/filters/NAME/code``), then stored as the pinned storlet
    ``iostack_pin_<hash>.py`` (one per version) in the storlet container of
    the tenant (all tenants without ``--tenant``), whose account gets
    Storlets enabled. ``iostack filter upload`` is the same verb, mounted
    under the controller's ``filter`` by ``iostack.cli``.
``iostack filter show NAME`` / ``iostack filter rm NAME``
    The controller's verbs; for an uploaded filter, ``show`` adds its
    versions and the stored objects each encoded, and ``rm`` refuses while
    any object uses one (``add_filter_version_verbs``, mounted likewise).
``iostack storlet deploy FILTER [--tenant t1]``
    A sandbox-capable library filter, packaged and stored the same way.
``iostack storlet sandbox list`` / ``iostack storlet sandbox stop SCOPE``
    The running per-scope sandboxes of the all-in-one, and tear-down by pid.
``iostack storlet image [--podman PATH] [--tarball OUT] [--seccomp-profile OUT]``
    For the container runtime on an existing cloud (``docker_gateway``): the
    storlet image built from this host's files into the local Podman
    (``engine_image``; nothing when it is current), or only its root
    filesystem as a tarball for ``docker import``; and the seccomp profile
    that refuses what bubblewrap refuses (``engine_seccomp``).

Swift is reached as the all-in-one's reseller admin, the controller with its
admin token (``iostack.controller.client``).
"""

from __future__ import annotations

import argparse
import configparser
import functools
import hashlib
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from swiftclient.client import Connection
from swiftclient.exceptions import ClientException

from iostack.controller.client import ControllerClient, ControllerError
from iostack.endpoints import AioNotRunning, load_aio_info
from iostack.filters.metadata import FilterMetadata, Param
from iostack.storlet_runtime.host.deploy import (
    PythonStorlet,
    StorletValidationError,
    check_python_storlet,
    enable_account,
    sdk_declaration,
    upload_storlet,
)
from iostack.storlet_runtime.host.packaging import (
    NotSandboxable,
    filter_storlet,
    pin_name,
    pinned_storlet_name,
    storlet_name,
)
from iostack.storlet_runtime.host.sandbox import ScopeSandbox
from iostack.storlet_runtime.host.swift_conf import STORLET_CONTAINER, gateway_conf_path
from iostack.storlet_runtime.sdk import PARAM_SYNTAX
from iostack.storlet_runtime.storlets_api import WRAPPER_CLASS, wrapped_code
from iostack.storlet_runtime.tools.template import filter_template
from iostack.storlet_runtime.tools.version_usage import count_versions, internal_client

_FILTER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
# Cold sandbox and storlet daemon (~1.5 s) plus three samples round-tripped.
UPLOAD_CHECK_TIMEOUT = 300


def _tenant_connections(info: dict[str, Any], tenant: str | None) -> dict[str, Connection]:
    """Connections to tenants' accounts with the reseller admin's token."""
    tenants = info["tenants"]
    if tenant is not None:
        _tenant_account(info, tenant)
    admin = info["admin"]
    if info.get("auth") == "keystone":  # Keystone's admin, ResellerAdmin in project admin
        login = Connection(admin["os_auth_url"], admin["os_username"], admin["os_password"],
                           auth_version="3",
                           os_options={"project_name": admin["os_project_name"],
                                       "user_domain_name": admin["os_user_domain_name"],
                                       "project_domain_name": admin["os_project_domain_name"]})
    else:
        login = Connection(info["auth_url"], admin["user"], admin["key"])
    _, token = login.get_auth()
    return {name: Connection(preauthurl=tenants[name]["storage_url"], preauthtoken=token)
            for name in ([tenant] if tenant else sorted(tenants))}


def _tenant_account(info: dict[str, Any], tenant: str) -> str:
    """The Swift account of a tenant of the all-in-one (``AUTH_t1``)."""
    tenants = info["tenants"]
    if tenant not in tenants:
        raise StorletValidationError(f"unknown tenant {tenant!r} (known: {', '.join(tenants)})")
    return tenants[tenant]["storage_url"].rstrip("/").rsplit("/", 1)[-1]


def prepare_upload(path: Path, name: str, main: str | None) -> tuple[PythonStorlet, dict]:
    """Check a tenant filter (a Storlets-API storlet); its storlet is this version's pin.

    The stored storlet is the author's module with ``storlets_api``'s class
    appended, which runs the author's class under IOStack's protocol, named
    after its content (``pinned_storlet_name``): every upload is a version
    of its own, and objects decode with the version that encoded them.
    Returned with what the class declares as an SDK filter (``sdk_declaration``).
    """
    if not _FILTER_NAME.match(name):
        raise StorletValidationError(
            f"filter name {name!r}: lower-case letters, digits and '_', starting with a letter")
    try:
        code = path.read_bytes()
    except OSError as exc:
        raise StorletValidationError(f"cannot read {path}: {exc.strerror}") from None
    module = storlet_name(name)[:-3]
    # The storlet module is renamed after its content, so only the class part of --main counts.
    cls = main.rpartition(".")[2] if main else None
    author = check_python_storlet(f"{module}.py", code, f"{module}.{cls}" if cls else None)
    # What runs is the author's storlet inside IOStack's protocol (storlets_api).
    wrapped = wrapped_code(code, author.main.rpartition(".")[2])
    pinned = pinned_storlet_name(wrapped)
    return (check_python_storlet(pinned, wrapped, f"{pinned[:-3]}.{WRAPPER_CLASS}"),
            sdk_declaration(code, author.main))


def parse_param(text: str) -> Param:
    """``--param NAME:TYPE[:MIN..MAX][=DEFAULT]`` -> the parameter a policy may give the filter.

    The storlet receives it as ``params[NAME]``, a string, as Storlets passes
    parameters (an SDK filter, typed); the DSL checks its type and range first.
    """
    match = PARAM_SYNTAX.match(text)
    if match is None:
        raise StorletValidationError(f"--param {text!r}: NAME:TYPE[:MIN..MAX][=DEFAULT], "
                                     f"e.g. by:int:0..255=1")
    low, high = (float(match[key]) if match[key] else None for key in ("min", "max"))
    try:
        return Param(match["name"], match["type"], default=match["default"], minimum=low,
                     maximum=high)
    except ValueError as exc:
        raise StorletValidationError(f"--param {text!r}: {exc}") from None


def declared_params(declared: dict, given: list[str]) -> tuple[Param, ...]:
    """The filter's parameters: its SDK declaration, each ``--param`` adding or replacing one."""
    params = {param.name: param for param in map(parse_param, declared.get("params", ()))}
    params.update((param.name, param) for param in map(parse_param, given))
    return tuple(params.values())


def filter_metadata(name: str, storlet: PythonStorlet, source: str,
                    account: str | None = None, params: tuple[Param, ...] = (),
                    declared: dict | None = None) -> FilterMetadata:
    """Registry metadata of an uploaded filter; ``account``: the one tenant it is for.

    ``declared``: what an SDK filter says of itself (``changes_size``,
    ``stages``, the first being where it runs by default).

    A filter uploaded for one tenant is that tenant's: the data path runs it
    for that account only (``extra.tenant``), whatever a policy says.
    """
    extra = {"runtime": "storlet", "storlet": storlet.name, "storlet_main": storlet.main}
    if account:
        extra["tenant"] = account
    declared = declared or {}
    stages = declared.get("stages") or ("proxy", "object")
    unknown = set(stages) - {"proxy", "object"}
    if unknown:
        raise StorletValidationError(f"stages {', '.join(sorted(unknown))}: a filter runs on "
                                     "'proxy' or 'object'")
    return FilterMetadata(
        name=name, description=f"tenant filter from {source}, run in the sandbox",
        params=params, methods=frozenset({"GET", "PUT"}), stages=frozenset(stages),
        default_stage=stages[0], changes_size=declared.get("changes_size", True),
        sandboxable=True, extra=extra)


def _deploy(storlet: PythonStorlet, tenant: str | None) -> list[str]:
    done = []
    for tenant_name, conn in _tenant_connections(load_aio_info(), tenant).items():
        enable_account(conn)
        upload_storlet(conn, storlet)
        done.append(tenant_name)
    return done


def run_check(where: list[str], code: bytes | None = None) -> str | None:
    """Run ``upload_check WHERE...`` in its own process; the failure it names, or None.

    ``code``: the storlet's code, on its standard input (``local``).
    """
    checked = subprocess.run(  # noqa: S603 - fixed argv: this interpreter, this package
        [sys.executable, "-m", "iostack.storlet_runtime.tools.upload_check", *where],
        input=code, capture_output=True, timeout=UPLOAD_CHECK_TIMEOUT, check=False)
    if checked.returncode == 0:
        return None
    try:
        return json.loads(checked.stdout.decode().strip().splitlines()[-1])["error"]
    except (ValueError, KeyError, IndexError):
        return (checked.stderr.decode(errors="replace").strip().splitlines()
                or ["no output"])[-1]


def check_in_sandbox(info: dict[str, Any], tenant: str, storlet: PythonStorlet) -> None:
    """Run a version once in ``tenant``'s sandbox (``upload_check``); refuse it on failure.

    The version is stored first (the sandbox loads it from Swift, as on the
    data path); it is removed again when it fails, unless it was already
    there (an identical upload: objects may use it).
    """
    conn = _tenant_connections(info, tenant)[tenant]
    try:
        conn.head_object(STORLET_CONTAINER, storlet.name)
        existed = True
    except ClientException:
        existed = False
    enable_account(conn)
    upload_storlet(conn, storlet)
    reason = run_check(["stack", info["swift_dir"], _tenant_account(info, tenant), storlet.name,
                        hashlib.sha256(storlet.code).hexdigest()])
    if reason is None:
        return
    if not existed:
        conn.delete_object(STORLET_CONTAINER, storlet.name)
    raise StorletValidationError(f"filter {storlet.name}: it failed its check in {tenant}'s "
                                 f"sandbox: {reason}. Nothing was registered.")


def cmd_test(args: argparse.Namespace) -> int:
    """``filter test FILE``: the upload's check (and 10 MiB) in a local sandbox of its own.

    No stack needs to run: the sandbox is this host's bubblewrap, set up for
    this one check and removed after it (``local``).
    """
    storlet, _ = prepare_upload(Path(args.file), "test_upload", args.main)
    reason = run_check(["local", storlet.name, storlet.main, "--big"], storlet.code)
    if reason is not None:
        raise StorletValidationError(f"{args.file}: {reason}")
    print(f"{args.file}: round trip, ranges, empty, one line, 300 KiB and 10 MiB bodies "
          f"pass in a local sandbox")
    return 0


def cmd_upload(args: argparse.Namespace) -> int:
    storlet, declared = prepare_upload(Path(args.file), args.name, args.main)
    params = declared_params(declared, getattr(args, "param", None) or [])
    client = ControllerClient.from_env(getattr(args, "url", None), getattr(args, "token", None))
    info = load_aio_info()
    check_in_sandbox(info, args.tenant or sorted(info["tenants"])[0], storlet)
    account = _tenant_account(info, args.tenant) if args.tenant else None
    client.put("filters", args.name, filter_metadata(args.name, storlet, Path(args.file).name,
                                                     account, params, declared).to_json())
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


def _filter_accounts(info: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    """The accounts an uploaded filter was deployed to: its tenant's, or every tenant's."""
    owner = meta.get("extra", {}).get("tenant")
    return [owner] if owner else [_tenant_account(info, t) for t in sorted(info["tenants"])]


def version_usage(meta: dict[str, Any]) -> dict[str, int]:
    """SHA-256 of each code that encoded objects of an uploaded filter -> how many objects.

    Every version the controller kept is there (0 when unused), and so is
    code that is not among them (objects of an upload from before versions
    were kept, under the filter's old storlet name).
    """
    versions = [v["sha256"] for v in meta.get("extra", {}).get("versions", [])]
    storlets = {pin_name(v) for v in versions} | {storlet_name(meta["name"])}
    info = load_aio_info()
    counts = count_versions(internal_client(info["swift_dir"]),
                            _filter_accounts(info, meta), storlets)
    return {**dict.fromkeys(versions, 0), **counts}


def _uploaded(args: argparse.Namespace) -> dict[str, Any] | None:
    """The filter's metadata if it is uploaded code; None leaves the verb to the controller's
    own (which also answers an unknown filter or an unreachable controller)."""
    try:
        meta = ControllerClient.from_env(args.url, args.token).item("filters", args.name)
    except (ControllerError, AioNotRunning):
        return None
    return meta if meta.get("extra", {}).get("runtime") == "storlet" else None


def _usage(meta: dict[str, Any] | None) -> dict[str, int] | None:
    """``version_usage``, or None where there is nothing to count or no stack to count in.

    A controller reached without the all-in-one (``--url``) cannot be
    counted here: its verbs run as they are, and only remove the
    registration (the versions stay pinned in Swift, so no object loses
    its code).
    """
    if meta is None:
        return None
    try:
        return version_usage(meta)
    except AioNotRunning:
        return None


def cmd_show_versions(show: Any, args: argparse.Namespace) -> int:
    """``filter show``, with an uploaded filter's versions and the objects each encoded."""
    meta = _uploaded(args)
    usage = _usage(meta)
    if usage is None:
        return show(args)
    if args.json:
        print(json.dumps({**meta, "objects_by_version": usage}, indent=2, sort_keys=True))
        return 0
    status = show(args)
    current = meta["extra"].get("code_sha256")
    uploaded = {v["sha256"]: v["uploaded"] for v in meta["extra"].get("versions", [])}
    print(f"{'VERSION':<18} {'STORLET':<50} {'UPLOADED':<21} OBJECTS")
    for digest, count in usage.items():
        mark = "*" if digest == current else " "
        print(f"{mark}{digest[:16]:<17} {pin_name(digest):<50} "
              f"{uploaded.get(digest, '(not kept)'):<21} {count}")
    return status


def cmd_rm_unused(rm: Any, args: argparse.Namespace) -> int:
    """``filter rm`` of an uploaded filter: refused while objects use any of its versions.

    Then the registration goes, and so do its pinned versions in Swift (no
    object uses them). Re-encoding stored objects is the stored-data
    reconciliation's job; until it runs, the objects keep the filter.
    """
    meta = _uploaded(args)
    usage = _usage(meta)
    if usage is None:
        return rm(args)
    used = {digest: count for digest, count in usage.items() if count}
    if used:
        print(f"iostack: filter {args.name}: {sum(used.values())} stored objects were encoded "
              f"by its code and decode with it ("
              + ", ".join(f"version {d[:16]}: {c}" for d, c in used.items())
              + "); delete or re-encode them first. Nothing was removed.", file=sys.stderr)
        return 2
    status = rm(args)
    if status == 0:
        info = load_aio_info()
        for conn in _tenant_connections(info, None).values():
            account = conn.url.rstrip("/").rsplit("/", 1)[-1]
            if account not in _filter_accounts(info, meta):
                continue
            for digest in usage:
                try:
                    conn.delete_object(STORLET_CONTAINER, pin_name(digest))
                except ClientException as exc:
                    if exc.http_status != 404:
                        raise
    return status


def add_filter_version_verbs(verbs: Any) -> None:
    """``filter show`` and ``filter rm`` (the controller's) learn about uploaded versions."""
    for verb, command in (("show", cmd_show_versions), ("rm", cmd_rm_unused)):
        parser = verbs.choices[verb]
        parser.set_defaults(func=_guarded(functools.partial(command, parser.get_default("func"))))


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
    up.add_argument("file", help="the filter's Python source (an SDK filter or a "
                                 "Storlets storlet)")
    up.add_argument("--name", required=True, help="filter name used in policies")
    up.add_argument("--main", help="Module.Class of the storlet (default: the only class "
                                   "with __call__)")
    up.add_argument("--tenant", help="deploy to this tenant only (default: every tenant)")
    up.add_argument("--param", action="append", metavar="NAME:TYPE[:MIN..MAX][=DEFAULT]",
                    help="a parameter policies may give it (SET f WITH NAME=v); repeatable")
    up.set_defaults(func=_guarded(cmd_upload))


def cmd_new(args: argparse.Namespace) -> int:
    """``filter new NAME``: write ``NAME.py``, a working filter to start from."""
    if not _FILTER_NAME.match(args.name):
        raise StorletValidationError(f"filter name {args.name!r}: lower-case letters, digits "
                                     "and '_', starting with a letter")
    path = Path(args.dir) / f"{args.name}.py"
    try:
        with path.open("x", encoding="utf-8") as out:
            out.write(filter_template(args.name))
    except OSError as exc:
        raise StorletValidationError(f"cannot write {path}: {exc.strerror}") from None
    print(f"wrote {path}; try it: iostack filter test {path}")
    return 0


def add_test_parser(subparsers: Any, parents: list[argparse.ArgumentParser] = ()) -> None:
    """Add the ``test`` and ``new`` verbs: write a filter, run it in the sandbox."""
    test = subparsers.add_parser("test", parents=list(parents),
                                 help="run your Python filter on sample data in a local "
                                      "sandbox (no stack needed)")
    test.add_argument("file", help="the filter's Python source (an SDK filter or a "
                                   "Storlets storlet)")
    test.add_argument("--main", help="Module.Class of the storlet (default: the only class "
                                     "with __call__)")
    test.set_defaults(func=_guarded(cmd_test))
    new = subparsers.add_parser("new", parents=list(parents),
                                help="write NAME.py, a working filter to start from")
    new.add_argument("name", help="the filter's name (a Python module name)")
    new.add_argument("--dir", default=".", help="where to write it (default: here)")
    new.set_defaults(func=_guarded(cmd_new))


def register(subparsers: Any) -> dict[str, Any]:
    verbs = subparsers.add_parser("storlet", help="sandboxed filters (Storlets)").add_subparsers(
        dest="storlet_command", required=True)
    add_upload_parser(verbs)
    add_test_parser(verbs)
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
    image = verbs.add_parser("image", help="build the container runtime's storlet image")
    image.add_argument("--podman", default="/usr/bin/podman", help="the engine's podman")
    image.add_argument("--tarball", help="only write the image's root filesystem here")
    image.add_argument("--seccomp-profile", help="also write the engine's seccomp profile here")
    image.set_defaults(func=cmd_image)
    return {"storlet": verbs}


def cmd_image(args: argparse.Namespace) -> int:
    from iostack.storlet_runtime.host.config import SandboxConfig
    from iostack.storlet_runtime.tools import engine_image, engine_seccomp

    packages = SandboxConfig.from_gateway_conf({}).python_path
    try:
        if args.tarball:
            inputs = engine_image.image_inputs(packages)
            engine_image.write_rootfs(inputs, Path(args.tarball))
            print(f"{args.tarball}: import it as "
                  f"{engine_image.IMAGE_REPOSITORY}:{engine_image.image_tag(inputs)} "
                  f"(docker import --change 'CMD [\"/usr/bin/python3\"]' {args.tarball} NAME)")
        else:
            print(engine_image.ensure_image(args.podman, {}, Path(tempfile.gettempdir()),
                                            packages))
    except engine_image.ImageError as exc:
        print(f"iostack storlet image: {exc}", file=sys.stderr)
        return 1
    if args.seccomp_profile:
        base = json.loads(engine_seccomp.SYSTEM_SECCOMP.read_text())
        profile = engine_seccomp.seccomp_profile(base, engine_seccomp.denied_syscalls())
        Path(args.seccomp_profile).write_text(json.dumps(profile, indent=1))
        print(f"{args.seccomp_profile}: set seccomp_profile to it in containers.conf "
              "(or the engine's default profile)")
    return 0
