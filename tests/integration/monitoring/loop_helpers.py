"""Load and observation helpers for the control-loop tests (real Swift, RabbitMQ, controller)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import swiftclient

from iostack.controller.client import ControllerClient

PIPELINE = "x-object-sysmeta-iostack-pipeline"
BODY = b"2026-11-25 PUT /v1/AUTH_t2/ramp/object 201 bytes=20480 agent=loadgen\n" * 300


def paced(rate: float, seconds: float, action: Callable[[int], None]) -> None:
    """Call ``action(i)`` ``rate`` times a second for ``seconds``, on a fixed schedule."""
    start = time.monotonic()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        action(i)


class Writer:
    """PUTs objects into one container and remembers when each was written."""

    def __init__(self, conn: swiftclient.Connection, container: str) -> None:
        self.conn = conn
        self.container = container
        self.written: list[tuple[float, str]] = []

    def put(self, _i: int = 0) -> None:
        name = f"o-{uuid.uuid4().hex[:12]}"
        self.written.append((time.time(), name))
        self.conn.put_object(self.container, name, BODY)

    def get(self, _i: int = 0) -> None:
        self.conn.get_object(self.container, self.written[-1][1])


def filters_stored(stored, account: str, container: str, name: str) -> list[str]:
    headers, _ = stored(account, container, name)
    return [f["name"] for f in json.loads(headers.get(PIPELINE, "[]"))]


def actor_target(client: ControllerClient, pid: str, target: str) -> dict[str, Any]:
    return client.policy(pid).get("actor", {}).get("targets", {}).get(target, {})


def wait_for_state(client: ControllerClient, pid: str, target: str, state: str,
                   timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = actor_target(client, pid, target)
        if current.get("state") == state:
            return current
        if time.monotonic() > deadline:
            raise AssertionError(f"actor of {pid} on {target} is {current} after {timeout}s, "
                                 f"not {state}")
        time.sleep(0.2)
