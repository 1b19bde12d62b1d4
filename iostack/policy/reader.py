"""Data-path access to policies: enforce from a local copy, kept current in the background.

The Swift middleware builds a ``RequestInfo`` for each request and calls
``PolicyReader.resolve(request)``, which returns the ordered pipeline (filter,
params, stage, sandboxed) computed by ``resolve.resolve``, the same code the
controller's ``explain`` runs.

- **Local copy.** The reader holds the whole compiled policy state of the
  store (``iostack.policy.snapshot.PolicyState``), one version of it, and
  answers every lookup from memory: no request waits for Redis, so a store
  that is down, hung (``CLIENT PAUSE``), restarting, flushed or failing
  over costs tenants nothing. Only policy *changes* wait for it.
- **Kept current** by the change stream (``<prefix>invalidate``: every
  message, and every re-subscription, reads the state again) and by a poll
  of the ``version`` key every ``poll_interval`` seconds, which catches a
  message lost while a connection was being replaced. Both run in
  background threads.
- **Only forward.** A state is applied only if its version is higher than
  the one held. A store without its marker (flushed, restarted empty) or
  older than the copy (rolled back) is not applied: the node keeps
  enforcing what it holds, logs it, and reports the store's version next to
  its own (``stats``); the controller's guardian restores such a store.
- **Persisted** (``snapshot``: a file path): each applied version is written
  to the node's disk (``SnapshotFile``: 0600, checksummed, replaced
  atomically) and read back when the reader starts, so a proxy restarted
  while the store is down enforces the last version it saw. The write
  (two fsyncs) goes through ``offload``: in a proxy worker, eventlet's
  thread pool, since a green thread that fsyncs stops every request of the
  worker until the disk answers.
- **Fail closed** only when enforcement is unknown: a node that has never
  held a valid version (no usable file, and the store unreadable or
  unmarked), or one enforcing a version an operator revoked (``iostack
  policy revoke``: the store's state is not to be trusted, say after a
  compromise; the revocation is a version like any other, persisted, so a
  restart does not undo it), raises ``PolicyStoreUnavailable`` naming the
  cause; the callers
  decide (writes answer 503, selection and QoS fail open). Such a node asks
  the store again at most once a second (``RETRY_AFTER``), within the
  store's timeout (``iostack.policy.connection``).

With ``live=True`` (the controller's ``explain`` and tests) there is no
background thread, copy or file: each lookup checks the store's version
(one round trip) and reads the state again when it changed; an unreadable
or unmarked store raises ``PolicyStoreUnavailable``.

- **Reported.** A reader given a ``node`` name (its proxy's address) writes
  what it enforces to ``<prefix>policy_nodes`` under ``<node>/<pid>``:
  version, when it applied it, the store's version it last saw, and when it
  reported (JSON). It reports after each version it applies and every
  ``REPORT_EVERY`` seconds, so a store that was flushed learns it again,
  and removes its report when it is closed or its process exits cleanly;
  ``iostack policy status`` and the controller's guardian read it.

Config (middleware, ``iostack.swift_middleware.shared_reader``):
``redis_url``, ``key_prefix`` (``iostack:``), ``policy_snapshot``
(the file), ``policy_poll_interval`` (1 s).
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from iostack.filters.metadata import FilterMetadata
from iostack.policy.changes import Subscription
from iostack.policy.connection import connect
from iostack.policy.redis_keys import DEFAULT_PREFIX, KeySpace
from iostack.policy.resolve import Level, RequestInfo, Resolution, resolve
from iostack.policy.snapshot import PolicyState, SnapshotFile, StateScript

LOG = logging.getLogger(__name__)
RETRY_AFTER = 1.0  # seconds between a version-less node's attempts to read the store
REPORT_EVERY = 5.0  # seconds between a worker's reports of the version it enforces
UNMARKED = ("the policy store has no marker (flushed, restarted empty, or never set up "
            "by a controller): its rules cannot be trusted")


class PolicyStoreUnavailable(RuntimeError):
    """The rules cannot be known (no copy held, and the store unreadable or its marker
    missing): nothing that changes stored bytes may proceed without them."""


class PolicyReader:
    """Resolve requests against a local copy of the policy state (see the module docstring)."""

    def __init__(self, redis_url: str | None = None, prefix: str = DEFAULT_PREFIX,
                 snapshot: str | Path | None = None, poll_interval: float = 1.0,
                 live: bool = False, node: str | None = None,
                 client: redis.Redis | None = None,
                 offload: Callable[..., Any] = lambda function, *args: function(*args)
                 ) -> None:
        self.keys = KeySpace(prefix)
        self.redis = client or connect(redis_url, health_check_interval=30)
        self.read_state = StateScript(self.redis, prefix)
        self.live = live
        self.node = f"{node}/{os.getpid()}" if node else None
        self._reported_at = 0.0
        if self.node:
            # A process that exits cleanly takes its report with it, so it is not
            # shown behind until it falls silent.
            atexit.register(self._forget)
        self.file = SnapshotFile(snapshot, prefix) if snapshot and not live else None
        self.offload = offload
        self._state: PolicyState | None = self.file.load() if self.file else None
        self._applied = time.time() if self._state else None
        self._store_version: int | None = None  # the store's, when last read
        self._refresh_lock = threading.Lock()
        self._failed: tuple[float, str] | None = None  # a version-less node's last try
        self._reported: tuple[str, int] | None = None  # the last refusal logged
        self.lookups = 0  # calls to lookup (one per request on the data path)
        self.round_trips = 0  # of them, those that had to ask Redis
        self.loads = 0  # states read from the store
        self._stop = threading.Event()
        self._subscription = self._poller = None
        if not live:
            self._subscription = Subscription(
                self.redis, self.keys.invalidate, lambda _data: self._refresh_quietly(),
                self._refresh_quietly, lambda: None, "iostack-policy")
            self._poller = threading.Thread(target=self._poll, args=(poll_interval,),
                                            name="iostack-policy-poll", daemon=True)
            self._poller.start()

    # -- the data path ----------------------------------------------------------

    def resolve(self, request: RequestInfo) -> Resolution:
        levels, filters, object_types = self.lookup(request)
        return resolve(request, levels, filters, object_types)

    def lookup(self, request: RequestInfo
               ) -> tuple[list[Level], dict[str, FilterMetadata], dict[str, list[str]]]:
        """Levels and vocabulary for ``request``, from the copy held.

        Raises ``PolicyStoreUnavailable`` when no version is known (see the module docstring).
        """
        self.lookups += 1
        state = self._live_state() if self.live else self._state or self._first_state()
        if state.revoked:
            raise PolicyStoreUnavailable(
                f"the policy state (version {state.version}) was revoked by an operator: "
                f"{state.revoked}; writes are refused until it is reinstated "
                "(iostack policy reinstate)")
        return state.levels(request), state.filters, state.object_types

    @property
    def version(self) -> int | None:
        """The version enforced, None before the first."""
        return self._state.version if self._state else None

    def _first_state(self) -> PolicyState:
        with self._refresh_lock:
            if self._state is not None:
                return self._state
            if self._failed and time.monotonic() - self._failed[0] < RETRY_AFTER:
                raise PolicyStoreUnavailable(self._failed[1])
            self.round_trips += 1
            try:
                self._refresh_locked()
            except redis.RedisError as exc:
                cause = f"the policy store cannot be read: {exc}"
            else:
                if self._state is not None:
                    return self._state
                cause = UNMARKED
            message = f"this node holds no policy version yet, and {cause}"
            self._failed = (time.monotonic(), message)
            raise PolicyStoreUnavailable(message)

    def _live_state(self) -> PolicyState:
        try:
            self.round_trips += 1
            version = int(self.redis.get(self.keys.version) or 0)
            if self._state is None or version != self._state.version:
                self.loads += 1
                _version, self._state = self.read_state()
        except redis.RedisError as exc:
            raise PolicyStoreUnavailable(f"the policy store cannot be read: {exc}") from None
        if self._state is None:
            raise PolicyStoreUnavailable(UNMARKED)
        return self._state

    # -- keeping the copy current -------------------------------------------------

    def refresh(self) -> str:
        """Read the store's state and apply it if newer than the copy.

        Returns ``applied``, ``current``, ``older`` (a rolled-back store) or
        ``unmarked``; raises ``redis.RedisError`` when the store cannot be read.
        """
        with self._refresh_lock:
            return self._refresh_locked()

    def _refresh_locked(self) -> str:
        version, state = self.read_state()
        self.loads += 1
        self._store_version = version
        held = self._state
        if state is None:
            return self._refused("unmarked", version)
        if held is not None and state.version <= held.version:
            return "current" if state.version == held.version else self._refused("older", version)
        self._state, self._applied, self._failed = state, time.time(), None
        if self.file is not None:
            try:
                self.offload(self.file.save, state)
            except OSError as exc:
                LOG.error("policy snapshot %s not written (version %d is enforced from "
                          "memory only): %s", self.file.path, state.version, exc)
        self._report()
        return "applied"

    def _report(self) -> None:
        """Write what this worker enforces to ``policy_nodes`` (see the module docstring)."""
        if self.node is None:
            return
        self._reported_at = time.monotonic()
        try:
            self.redis.hset(self.keys.policy_nodes, self.node, json.dumps({
                "version": self.version, "applied": self._applied,
                "store_version": self._store_version, "reported": time.time()}))
        except redis.RedisError as exc:  # the next poll reports again
            LOG.debug("policy version not reported: %s", exc)

    def _refused(self, why: str, version: int) -> str:
        if self._reported != (why, version):
            self._reported = (why, version)
            held = self.version
            LOG.warning("policy store %s at version %d is %s: not applied; enforcing version %s",
                        self.keys.prefix, version,
                        "unmarked (flushed or restarted empty)" if why == "unmarked"
                        else "older than this node's copy (rolled back)", held)
        return why

    def _refresh_quietly(self) -> None:
        try:
            self.refresh()
        except redis.RedisError as exc:
            LOG.debug("policy store %s unreadable; enforcing version %s: %s",
                      self.keys.prefix, self.version, exc)

    def _poll(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                version = int(self.redis.get(self.keys.version) or 0)
            except redis.RedisError:
                continue
            except Exception:  # the poller must outlive any one failure
                LOG.exception("policy poll failed")
                continue
            self._store_version = version
            if self._state is None or version > self._state.version:
                self._refresh_quietly()
            elif time.monotonic() - self._reported_at >= REPORT_EVERY:
                self._report()

    def wait_version(self, version: int, timeout: float = 5.0) -> bool:
        """Whether the copy reaches ``version`` (or a later one) within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while (self.version or 0) < version:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def wait_subscribed(self, timeout: float = 5.0) -> bool:
        return self._subscription is not None and self._subscription.wait_active(timeout)

    def _forget(self) -> None:
        try:
            self.redis.hdel(self.keys.policy_nodes, self.node)
        except redis.RedisError as exc:
            LOG.debug("policy version report not removed: %s", exc)

    def close(self) -> None:
        self._stop.set()
        if self._subscription:
            self._subscription.close()
        if self.node:
            atexit.unregister(self._forget)
            self._forget()
        self.redis.close()

    def stats(self) -> dict[str, Any]:
        return {"version": self.version, "applied": self._applied,
                "store_version": self._store_version, "lookups": self.lookups,
                "round_trips": self.round_trips, "loads": self.loads,
                "subscribed": bool(self._subscription and self._subscription.active)}
