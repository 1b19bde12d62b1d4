"""A running all-in-one for tests and benchmarks: reuse ``make run``'s, or start a private one.

``running_stack()`` yields the ``aio.json`` of the stack ``make run`` started
when it answers; otherwise it starts a private stack on free ports (through
the ``iostack aio`` command, so its daemons are not children of the caller)
and stops it on exit.

``started_stack(state_dir, *args)`` starts a stack of one's own in
``state_dir`` (a cluster with ``--nodes 3``) and stops and removes it on
exit, also when the caller fails.

``redis_set_of(state_dir)`` is a cluster's policy store (its Redis
servers and Sentinels), ``seconds_until_accepted`` times how long the
controller refuses policy changes after a fault of it, and
``proxies_leasing`` says which proxies share a QoS bucket through it again:
the fault test and the QoS failover test and benchmark kill its master so.

``SharedServices`` is one private Redis and one private RabbitMQ that
several stacks use (the test suite's: starting a broker takes seconds, a
vhost a fraction of one). Each stack gets its own vhost and keeps its Redis
keys under its own namespace; none of them uses the machine's services.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import redis

from iostack.aio.processes import ProcessManager
from iostack.aio.redis_set import RedisSet
from iostack.aio.services import Services
from iostack.controller.client import ControllerClient, ControllerError
from iostack.endpoints import AioNotRunning, load_aio_info
from iostack.policy.connection import connect
from iostack.ports import free_port
from iostack.swift_middleware.shared_bucket import LESSEE_TTL, RedisLeases

PORT_SETTINGS = ("proxy", "proxy2", "account", "container", "object", "controller", "block",
                 "iscsi", "keystone")
# A free port may be taken by someone else's connection or server before the stack binds
# it (free ports and outgoing connections share a range): a start that failed so is
# retried on other ports, this many times in all.
START_ATTEMPTS = 3
PORT_TAKEN = "Address already in use"


class StackStartError(RuntimeError):
    """The private stack did not start; the message has the command's output."""


def aio_command(verb: str, state_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(  # noqa: S603 - fixed argv
        [sys.executable, "-m", "iostack.cli", "aio", verb, "--state-dir", str(state_dir), *extra],
        capture_output=True, text=True, timeout=300, check=False,
    )


def free_port_args(names: tuple[str, ...] = PORT_SETTINGS) -> list[str]:
    """``--<name>-port N`` arguments with distinct free ports."""
    chosen: set[int] = set()
    while len(chosen) < len(names):
        chosen.add(free_port())
    return [arg for name, port in zip(names, sorted(chosen), strict=True)
            for arg in (f"--{name}-port", str(port))]


def start_on_free_ports(state_dir: Path, *args: str) -> subprocess.CompletedProcess:
    """``iostack aio start --json`` in ``state_dir`` on free ports, again on others while
    a server found its port taken. A failed start is stopped; its logs stay."""
    for _ in range(START_ATTEMPTS - 1):
        started = _start(state_dir, args)
        if started.returncode == 0 or not _lost_a_port(state_dir / "log"):
            return started
        print(f"iostack aio start in {state_dir}: a port was taken; again on others",
              file=sys.stderr, flush=True)
        aio_command("stop", state_dir, "--purge")
        shutil.rmtree(state_dir, ignore_errors=True)
    return _start(state_dir, args)


def _start(state_dir: Path, args: tuple[str, ...]) -> subprocess.CompletedProcess:
    started = aio_command("start", state_dir, "--json", *args, *free_port_args())
    if started.returncode != 0:
        aio_command("stop", state_dir)
    return started


def _lost_a_port(log_dir: Path) -> bool:
    return any(PORT_TAKEN in log.read_text(errors="replace")
               for log in log_dir.glob("*.log") if log.is_file())


def answering_stack() -> dict[str, Any] | None:
    """The default state dir's stack if its proxy answers, else None."""
    try:
        info = load_aio_info()
        with urllib.request.urlopen(f"{info['swift_url']}/healthcheck", timeout=2):  # noqa: S310 - aio's
            return info
    except (AioNotRunning, OSError, KeyError):
        return None


class SharedServices:
    """Private Redis and RabbitMQ in ``state_dir`` for several stacks, each started on first use."""

    def __init__(self, state_dir: Path, timeout: float = 60.0) -> None:
        self.state_dir = state_dir
        self.services = Services(state_dir, ProcessManager(state_dir), timeout)

    def stack_args(self, namespace: str) -> list[str]:
        """``iostack aio start`` arguments for a stack with this namespace."""
        redis = self.services.ensure("redis", "").url
        self.services.ensure("rabbitmq", "")
        return ["--namespace", namespace, "--redis-url", redis,
                "--amqp-url", self.services.add_amqp_vhost(namespace)]

    def stop(self) -> None:
        """Stop the servers and remove their state dir."""
        self.services.stop_private()
        shutil.rmtree(self.state_dir, ignore_errors=True)


@contextmanager
def running_stack(private_root: Path,
                  shared: SharedServices | None = None) -> Iterator[dict[str, Any]]:
    """``make run``'s stack, or a private one in ``private_root/<pid>`` for this caller.

    Each caller gets its own state dir, so test sessions and benchmarks that
    run at the same time never share (or stop) each other's stack. A stack
    that started and stopped cleanly leaves nothing behind; after a failure
    its state dir and logs stay for inspection. With ``shared`` it uses those
    services (its own vhost); otherwise it starts private ones of its own.
    """
    running = answering_stack()
    if running:
        yield running
        return
    state_dir = private_root / str(os.getpid())
    # Its own namespace: Redis and RabbitMQ may be shared with other stacks.
    namespace = f"iostack-{os.getpid()}"
    services = shared.stack_args(namespace) if shared else ["--namespace", namespace]
    started = start_on_free_ports(state_dir, *services)
    if started.returncode != 0:
        raise StackStartError(f"all-in-one did not start:\n{started.stdout}\n{started.stderr}")
    try:
        yield json.loads(started.stdout)
    finally:
        if aio_command("stop", state_dir, "--purge").returncode == 0:
            shutil.rmtree(state_dir, ignore_errors=True)


@contextmanager
def started_stack(state_dir: Path, *args: str) -> Iterator[dict[str, Any]]:
    """A stack of the caller's own in ``state_dir``, started with ``args`` on free ports.

    On exit it is stopped with ``--purge`` (which for a cluster also removes
    its namespaces and interfaces) and its state dir removed. A stack that
    failed to start, or to stop, is stopped but its state dir and logs stay
    for inspection.
    """
    started = start_on_free_ports(state_dir, *args)
    if started.returncode != 0:
        raise StackStartError(f"the stack did not start (logs in {state_dir / 'log'}):\n"
                              f"{started.stdout}\n{started.stderr}")
    try:
        yield json.loads(started.stdout)
    finally:
        if aio_command("stop", state_dir, "--purge").returncode == 0:
            shutil.rmtree(state_dir, ignore_errors=True)


def redis_set_of(state_dir: Path) -> RedisSet:
    """A cluster's Redis servers and Sentinels, on the ports ``aio start`` recorded."""
    services = Services(state_dir, ProcessManager(state_dir), 30)
    services.redis_sentinel = True
    return services.redis_set()


def seconds_until_accepted(admin: ControllerClient, policy: str, since: float,
                           timeout: float) -> float | None:
    """Seconds from ``since`` (``time.monotonic``) until the controller accepts ``policy``,
    tried every 0.2 s while it answers 503 (no writable store); None past ``timeout``.
    Any other refusal is raised: only the store's absence may delay a change."""
    while time.monotonic() - since < timeout:
        try:
            admin.add_policies(policy)
            return time.monotonic() - since
        except ControllerError as exc:
            if exc.status != 503:
                raise
            time.sleep(0.2)
    return None


def proxies_leasing(info: dict[str, Any], scope: str, direction: str, since: float) -> set[str]:
    """The proxies (``host:port``) whose workers leased the scope's shared QoS bucket on the
    store's master after ``since`` (wall clock); none while no master answers. A lessee's
    entry expires ``LESSEE_TTL`` after its last lease (Redis time)."""
    client = connect(info["redis_url"])
    try:
        found = RedisLeases(client, info["key_prefix"]).lessees(scope, direction)
    except redis.RedisError:
        return set()
    finally:
        client.close()
    return {lessee.removeprefix("proxy-").rsplit("-", 1)[0]  # proxy-<ip>:<port>-<pid>
            for lessee, (_streams, expiry) in found.items() if expiry > since + LESSEE_TTL}
