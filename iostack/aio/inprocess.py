"""The all-in-one's proxy pipeline loaded in this process, to count what one request costs.

Tests and benchmarks use it to measure how many policy lookups each kind of
request makes on the real pipeline (real Swift middlewares, the stack's
Redis and backend servers): ``count_lookups(info)`` sends a small set of
requests through ``proxy-server.conf`` as a tenant and returns, per request
kind, the number of ``PolicyReader.lookup`` calls it made.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from swift.common import constraints, storage_policy, utils
from swift.common.swob import Request

from iostack.controller.reader import PolicyReader


def load_proxy(info: dict[str, Any]) -> Any:
    """The stack's proxy WSGI pipeline, in this process."""
    from swift.common.wsgi import loadapp

    utils.set_swift_dir(info["swift_dir"])
    constraints.reload_constraints()
    storage_policy.reload_storage_policies()
    return loadapp(str(Path(info["swift_dir"]) / "proxy-server.conf"))


@contextmanager
def counted_lookups() -> Iterator[list[Any]]:
    """Every ``PolicyReader.lookup`` call made in this process meanwhile."""
    calls: list[Any] = []
    original = PolicyReader.lookup

    def lookup(self: PolicyReader, request: Any) -> Any:
        calls.append(request)
        return original(self, request)

    PolicyReader.lookup = lookup
    try:
        yield calls
    finally:
        PolicyReader.lookup = original


def count_lookups(info: dict[str, Any], tenant: str = "t1",
                  policy: Callable[[str], None] | None = None) -> dict[str, int]:
    """Policy lookups per request kind, through the real pipeline.

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
        counts[kind] = len(calls)
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


def main() -> None:  # pragma: no cover - a manual helper
    from iostack.aio.state import load_aio_info

    print(json.dumps(count_lookups(load_aio_info()), indent=2))
