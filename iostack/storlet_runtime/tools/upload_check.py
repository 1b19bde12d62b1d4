"""An uploaded filter runs once in the tenant's sandbox, on sample data, before it is registered.

``iostack filter upload`` stores the new version's pinned storlet, then runs
``python -m iostack.storlet_runtime.tools.upload_check stack SWIFT_DIR ACCOUNT
STORLET SHA256`` (its own process: the runner monkey-patches with eventlet,
as Swift servers are), which drives the storlet through ``SandboxRunner``
exactly as the data path does, in the account's own sandbox.
``upload_check local STORLET [MAIN] [--big]`` (the code on stdin, checked
statically first) runs the same check in a sandbox of its own (``local.LocalSandbox``: no Swift, no
stack), for ``iostack filter test`` and the controller's check of code
uploaded through its API. The check:

- encode each sample (empty, one line, ~300 KiB of every byte value): the
  answer must announce ``Iostack-Encoded-Length`` with an ``Iostack-Sysmeta``
  JSON object, and send exactly that many bytes;
- decode the encoded bytes whole and a range from their middle: they must
  be the sample, byte for byte;
- with ``--big`` (``iostack filter test``), a 10 MiB sample too.

The first failure is printed as JSON ``{"error": "..."}`` (exit status 1);
the upload then removes the version it stored and registers nothing.
A storlet that raises, truncates, or writes more than it read fails here,
not on the tenant's first PUT.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
from typing import Any

SAMPLES = {
    "an empty body": b"",
    "one line": b"IOStack upload check: one line of text\n",
    "300 KiB of every byte value": bytes(range(256)) * 1200,
}
BIG = {"10 MiB": bytes(range(256)) * 40960}  # ``iostack filter test`` adds it
CONTEXT = {"container": "iostack-upload-check", "object": "sample"}
LOGGER = logging.getLogger("iostack.upload_check")


class CheckFailed(Exception):
    """The filter did not round-trip a sample or broke the protocol; the message says how."""


def _run(runner: Any, account: str, storlet: str, sha: str, params: dict[str, str],
         body: bytes) -> tuple[dict[str, str], bytes]:
    try:
        metadata, chunks = runner.run(account, storlet, {**params, **CONTEXT, "account": account},
                                      [body], code_sha256=sha)
        return metadata, b"".join(chunks)
    except Exception as exc:  # noqa: BLE001 - the gateway's and storlet's errors vary
        reason = exc.body.decode(errors="replace").strip() if getattr(exc, "body", None) \
            else f"{type(exc).__name__}: {exc}"
        raise CheckFailed(f"{params['mode']} failed: {reason}") from None


def check(runner: Any, account: str, storlet: str, sha: str, big: bool = False) -> None:
    """Raise ``CheckFailed`` unless the storlet round-trips every sample under the protocol."""
    for what, sample in {**SAMPLES, **(BIG if big else {})}.items():
        metadata, encoded = _run(runner, account, storlet, sha,
                                 {"mode": "encode", "params": "{}"}, sample)
        try:
            announced = int(metadata["Iostack-Encoded-Length"])
            sysmeta = json.loads(metadata["Iostack-Sysmeta"])
        except (KeyError, ValueError):
            raise CheckFailed(f"encode of {what}: no Iostack-Encoded-Length and Iostack-Sysmeta "
                              "in its metadata") from None
        if not isinstance(sysmeta, dict) or len(encoded) != announced:
            raise CheckFailed(f"encode of {what}: announced {announced} bytes and sent "
                              f"{len(encoded)}")
        third = len(sample) // 3
        for start, end in ((0, len(sample)), (third, len(sample) - third)):
            _, decoded = _run(runner, account, storlet, sha,
                              {"mode": "decode", "sysmeta": json.dumps(sysmeta),
                               "range": f"{start}-{end}", "length": str(len(encoded))}, encoded)
            if decoded != sample[start:end]:
                raise CheckFailed(f"decode of {what}, bytes {start}-{end}: {len(decoded)} bytes "
                                  f"that are not the {end - start} it encoded")


def _check_in_stack(args: argparse.Namespace) -> None:
    from swift.common import utils

    utils.set_swift_dir(args.swift_dir)  # as a Swift server's launcher does before loading
    from iostack.storlet_runtime.host.runner import SandboxRunner

    check(SandboxRunner(args.swift_dir, LOGGER), args.account, args.storlet, args.sha256,
          args.big)


def _check_local(args: argparse.Namespace) -> None:
    from iostack.storlet_runtime.host.deploy import StorletValidationError, check_python_storlet
    from iostack.storlet_runtime.tools.local import LOCAL_ACCOUNT, LocalSandbox

    code = sys.stdin.buffer.read()
    try:
        main = check_python_storlet(args.storlet, code, args.main).main
    except StorletValidationError as exc:
        raise CheckFailed(str(exc)) from None
    with LocalSandbox(args.storlet, code, main, LOGGER) as runner:
        check(runner, LOCAL_ACCOUNT, args.storlet, hashlib.sha256(code).hexdigest(), args.big)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="upload_check")
    where = parser.add_subparsers(dest="where", required=True)
    stack = where.add_parser("stack", help="in a tenant's sandbox of a running stack")
    for name in ("swift_dir", "account", "storlet", "sha256"):
        stack.add_argument(name)
    stack.set_defaults(check=_check_in_stack)
    local = where.add_parser("local", help="in a sandbox of its own; the code on stdin")
    local.add_argument("storlet", help="its file name, <module>.py")
    local.add_argument("main", nargs="?", help="<module>.<Class> (default: its only storlet)")
    local.set_defaults(check=_check_local)
    for sub in (stack, local):
        sub.add_argument("--big", action="store_true", help="a 10 MiB sample too")
    args = parser.parse_args(argv)
    try:
        args.check(args)
    except CheckFailed as exc:
        print(json.dumps({"error": str(exc)}))
        return 1
    print(json.dumps({"ok": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
