"""The all-in-one's proxy pipeline loaded in one process, to count what one request costs.

Tests and benchmarks use it to measure how many policy lookups each kind of
request makes on the real pipeline (real Swift middlewares, the stack's
Redis and backend servers): ``count_lookups(info)`` sends a small set of
requests through ``proxy-server.conf`` as a tenant and returns, per request
kind, the number of ``PolicyReader.lookup`` calls it made and how many of
them were network round trips to the policy store (``round_trips``).

Loading the pipeline imports Storlets, which monkey-patches eventlet into
the whole process: callers run it in a process of its own,

    python -m iostack.aio.inprocess AIO_JSON ["SET ENCRYPTION"]

which prints the counts as JSON (``lookups_in_subprocess`` does that).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from swift.common import constraints, storage_policy, utils
from swift.common.swob import Request

from iostack.controller.client import ControllerClient
from iostack.policy.reader import PolicyReader


def load_proxy(info: dict[str, Any]) -> Any:
    """The stack's proxy WSGI pipeline, in this process."""
    from swift.common.wsgi import loadapp

    utils.set_swift_dir(info["swift_dir"])
    constraints.reload_constraints()
    storage_policy.reload_storage_policies()
    return loadapp(str(Path(info["swift_dir"]) / "proxy-server.conf"))


@contextmanager
def counted_lookups() -> Iterator[list[int]]:
    """Every ``PolicyReader.lookup`` call made in this process meanwhile: the round
    trips to the store each made (0 when answered from the local copy)."""
    calls: list[int] = []
    original = PolicyReader.lookup

    def lookup(self: PolicyReader, request: Any) -> Any:
        before = self.round_trips
        try:
            return original(self, request)
        finally:
            calls.append(self.round_trips - before)

    PolicyReader.lookup = lookup
    try:
        yield calls
    finally:
        PolicyReader.lookup = original


def lookups_in_subprocess(aio_json: Path, actions: str | None = None
                          ) -> dict[str, list[int]]:
    """``count_lookups`` in a process of its own (see the module docstring)."""
    argv = [sys.executable, "-m", "iostack.aio.inprocess", str(aio_json)]
    done = subprocess.run(argv + ([actions] if actions else []),  # noqa: S603 - fixed argv
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"counting lookups failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def count_lookups(info: dict[str, Any], tenant: str = "t1",
                  policy: Callable[[str], None] | None = None) -> dict[str, list[int]]:
    """[policy lookups, round trips to the store] per request kind, through the real
    pipeline, in this process.

    ``policy(container)`` may add policies to the container used (for
    example ``SET ENCRYPTION``) before the requests are sent.
    """
    app = load_proxy(info)
    token, storage = _auth(app, info, tenant)
    container = f"lookups-{uuid.uuid4().hex[:8]}"
    path = f"{storage}/{container}"

    def send(method: str, suffix: str = "", body: bytes | None = None,
             **headers: str) -> int:
        req = Request.blank(f"{path}{suffix}", environ={"REQUEST_METHOD": method},
                            headers={"X-Auth-Token": token, **headers}, body=body)
        resp = req.get_response(app)
        b"".join(resp.app_iter or [])
        if resp.status_int >= 400:
            raise RuntimeError(f"{method} {path}{suffix}: {resp.status}")
        return resp.status_int

    send("PUT")
    if policy is not None:
        policy(container)
    requests = {
        "PUT object": lambda: send("PUT", "/o", b"x" * 4096),
        "GET object": lambda: send("GET", "/o"),
        "Range GET": lambda: send("GET", "/o", Range="bytes=10-20"),
        "HEAD object": lambda: send("HEAD", "/o"),
        "POST object": lambda: send("POST", "/o", **{"X-Object-Meta-Color": "blue"}),
        "GET container": lambda: send("GET"),
        "HEAD container": lambda: send("HEAD"),
        "COPY object": lambda: send("COPY", "/o", Destination=f"{container}/o2"),
    }
    counts = {}
    for kind, make in requests.items():
        with counted_lookups() as calls:
            make()
        counts[kind] = [len(calls), sum(calls)]
    return counts


def _auth(app: Any, info: dict[str, Any], tenant: str) -> tuple[str, str]:
    creds = info["tenants"][tenant]
    req = Request.blank("/auth/v1.0", headers={"X-Auth-User": creds["user"],
                                               "X-Auth-Key": creds["key"]})
    resp = req.get_response(app)
    if resp.status_int != 200:
        raise RuntimeError(f"auth as {creds['user']}: {resp.status}")
    storage = resp.headers["X-Storage-Url"]
    return resp.headers["X-Auth-Token"], "/" + storage.split("/", 3)[3]


def main(argv: list[str]) -> int:
    info = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    admin = ControllerClient(info["controller_url"], info["admin_token"])
    added: list[str] = []

    def policy(container: str) -> None:
        account = info["tenants"]["t1"].get("account", "AUTH_t1")
        added.extend(p["id"] for p in admin.add_policies(
            f"FOR CONTAINER {account}/{container} DO {argv[1]}")["policies"])
        time.sleep(0.3)  # the proxies' invalidation

    try:
        counts = count_lookups(info, policy=policy if len(argv) > 1 else None)
    finally:
        for pid in added:
            admin.delete_policy(pid)
    print(json.dumps(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
