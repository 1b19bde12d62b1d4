"""Re-encode stored objects under today's policy, as Swift's container-reconciler moves them.

One pass walks a target's listings in order (``scan.objects``). For each
object, one raw HEAD gives its record and attributes; the pipeline a PUT of
it gets today is resolved the way the proxies resolve it (``PolicyReader``
plus ``resolve``, via ``simulate.request_info``). An object whose record
already matches is skipped, so a pass is idempotent. Otherwise the object is
read as the tenant wrote it and written back through IOStack's own proxy
middleware (``swift_access``'s ``tenant`` pipeline), which encodes it under
today's policy, with:

- ``X-Timestamp`` = the stored timestamp with its offset raised by one (the
  container-reconciler's ``slightly_later_timestamp``). It sorts after the
  object it replaces and before any later write: a tenant PUT, POST or
  DELETE made while the daemon works always has a later timestamp, so the
  object servers refuse the daemon's PUT (409, which the proxy answers as
  202), or, when the tenant's write lands while the daemon's body is on its
  way, keep the newer one (the HEAD after the write-back sees it), or the tenant's write
  supersedes it; a deleted object is never resurrected. Last-Modified is
  the timestamp's normal part, so it does not change.
- The tenant's ETag as ``Etag``: a read torn by a concurrent change fails
  the PUT (422) instead of storing bytes the tenant never wrote.
- ``X-Backend-Iostack-Object-Age``: the object's age, so the middleware
  resolves ``TO OBJECT_AGE`` as this pass did (a write is otherwise new).
- Content-Type, user metadata, ``X-Delete-At`` and Swift's other allowed
  object headers, and other middlewares' sysmeta, as stored. IOStack's own
  records and container-update overrides are not copied: the middleware
  writes the new ones.
- Under ``SET EXPIRY``, ``X-Delete-At``: the object's last write plus
  ``after`` (``simulate.expiry_due``), unless it already goes as soon; one
  already past it, a few seconds ahead (Swift refuses a time that has
  passed). An object whose body is up to date but lacks it is written back
  for it alone.

``TO OBJECT_AGE`` conditions hold or fail on the object's age at ``clock()``
(the present, unless the caller gives another time). SLO/DLO manifests and
symlinks are skipped (their segments are objects of
their own and are reconciled as such); so are objects whose ``X-Delete-At``
has passed.

Throttling: at most ``objects_per_second`` and ``bytes_per_second``, and a
duty cycle: after an object that took ``t`` seconds the daemon rests
``t * (1 - duty) / duty``, so when tenants load the cluster (every object
takes longer) it slows down with them.

Progress (``ReconcileState``) is a JSON file written atomically at most
every ``SAVE_EVERY`` seconds and at the end: the position (last object done),
counts, rate and state. A daemon killed at any point resumes from the
position; objects done after the last save are found up to date and skipped.
Each save is also published to the policy store (``ProgressBoard``), where
the console reads it; ``aio status`` (``make status``) reads the files
(``statuses``).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError
from swift.common.swob import Request
from swift.common.utils import FileLikeIter, Timestamp, close_if_possible

from iostack.atrest import scan
from iostack.atrest.inspect import StoredObject, differences, stored_object, today_layers
from iostack.atrest.simulate import expiry_due, request_info
from iostack.atrest.swift_access import SwiftAccess, object_path
from iostack.filters.errors import IntegrityError
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import resolve
from iostack.policy.view import AGE_HEADER
from iostack.stored_object import OVERRIDE_PREFIX, SYSMETA_PREFIX, NewerRecordError

LOG = logging.getLogger("iostack.reconcile")

SAVE_EVERY = 0.5  # seconds between progress saves
OVERDUE_MARGIN = 5  # seconds ahead an overdue object's X-Delete-At is set
# Object headers Swift keeps besides user metadata (proxy's default allowed_headers).
KEPT_HEADERS = ("content-disposition", "content-encoding", "content-language",
                "cache-control", "expires", "x-robots-tag", "x-delete-at")
STATES = ("running", "stopping", "stopped", "done", "failed")


@dataclass
class ReconcileState:
    """What ``iostack reconcile status`` shows; the daemon's only persistent state."""

    target: str
    state: str = "running"
    position: list[str] | None = None  # [account, container, object] last done
    scanned: int = 0
    reencoded: int = 0
    skipped: int = 0
    failed: int = 0
    raced: int = 0  # of skipped: a tenant's write or delete came first
    bytes_reencoded: int = 0
    stored_bytes_before: int = 0
    stored_bytes_after: int = 0
    total: int | None = None  # objects in the target when the pass began (listings)
    started: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    seconds: float = 0.0  # time spent in this pass, over every run
    pid: int | None = None
    error: str = ""
    failures: list[str] = field(default_factory=list)  # the last few, for status

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        rate = self.scanned / self.seconds if self.seconds else 0.0
        data["objects_per_second"] = round(rate, 2)
        remaining = (self.total - self.scanned) if self.total is not None else None
        data["eta_seconds"] = (round(max(remaining, 0) / rate, 1)
                               if rate and remaining is not None and self.state == "running"
                               else None)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ReconcileState:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def state_path(state_dir: Path, target: scan.Target) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in str(target))
    return state_dir / "atrest" / "reconcile" / f"{safe}.json"


def load_state(path: Path) -> ReconcileState | None:
    try:
        return ReconcileState.from_json(json.loads(path.read_text("utf-8")))
    except FileNotFoundError:
        return None


def save_state(path: Path, state: ReconcileState) -> None:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(json.dumps(state.to_json()), "utf-8")
    tmp.replace(path)


def alive(pid: int | None) -> bool:
    """Whether ``pid`` is a reconcile daemon (not a process that reused its number)."""
    if not pid:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"reconcile" in cmdline and b"run" in cmdline


def status(path: Path) -> dict[str, Any] | None:
    """A pass's state as ``reconcile status`` shows it; a killed daemon's is ``interrupted``."""
    state = load_state(path)
    if state is None:
        return None
    data = state.to_json()
    if state.state in ("running", "stopping") and not alive(state.pid):
        data["state"], data["eta_seconds"] = "interrupted", None  # killed: start resumes it
    return data


def statuses(state_dir: Path) -> list[dict[str, Any]]:
    """Every pass recorded under ``state_dir`` (``aio status``), by target."""
    found = (status(path) for path in sorted((state_dir / "atrest" / "reconcile").glob("*.json")))
    return [data for data in found if data is not None]


def progress_line(data: dict[str, Any]) -> str:
    """``running: 40/100 scanned, 12 re-encoded, 0 failed, ETA 30 s`` (one line)."""
    total = "?" if data.get("total") is None else data["total"]
    eta = f", ETA {data['eta_seconds']:.0f} s" if data.get("eta_seconds") is not None else ""
    return (f"{data['state']}: {data['scanned']}/{total} scanned, {data['reencoded']} "
            f"re-encoded, {data['skipped']} skipped, {data['failed']} failed{eta}")


class ProgressBoard:
    """Publishes each saved state where the console reads it: the policy store's
    ``reconcile:progress`` hash, target -> the state's JSON (``docs/redis-keys.md``).

    A store that does not answer never stops a pass: the file stays the record.
    """

    def __init__(self, client: Any, keys: KeySpace) -> None:
        self.client, self.key = client, keys.reconcile_progress

    def publish(self, state: ReconcileState) -> None:
        try:
            self.client.hset(self.key, state.target, json.dumps(state.to_json()))
        except RedisError as exc:
            LOG.warning("reconcile %s: progress not published: %s", state.target, exc)


@dataclass
class Throttle:
    objects_per_second: float | None = None
    bytes_per_second: float | None = None
    duty: float = 1.0  # share of wall time the daemon may work

    def rest(self, took: float, size: int) -> float:
        """Seconds to rest after an object of ``size`` bytes that took ``took`` seconds."""
        wait = took * (1 - self.duty) / self.duty if self.duty < 1 else 0.0
        if self.objects_per_second:
            wait = max(wait, 1 / self.objects_per_second - took)
        if self.bytes_per_second:
            wait = max(wait, size / self.bytes_per_second - took)
        return max(wait, 0.0)


def _put_headers(stored: StoredObject, headers: dict[str, str], age: float) -> dict[str, str]:
    lower = {k.lower(): v for k, v in headers.items()}
    out = {"X-Timestamp": Timestamp(stored.timestamp, offset=1).internal, AGE_HEADER: str(age),
           "Content-Type": stored.content_type, "Content-Length": str(stored.logical_bytes),
           "Etag": stored.etag, "X-Backend-Allow-Reserved-Names": "true"}
    for name, value in lower.items():
        if name.startswith("x-object-meta-") or name in KEPT_HEADERS or (
                name.startswith("x-object-sysmeta-")
                and not name.startswith((SYSMETA_PREFIX.lower(), OVERRIDE_PREFIX.lower()))):
            out[name] = value
    return out


class Reconciler:
    """One pass over a target (see the module docstring)."""

    def __init__(self, access: SwiftAccess, reader: PolicyReader, target: scan.Target,
                 accounts: list[str], path: Path, throttle: Throttle | None = None,
                 clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep,
                 board: ProgressBoard | None = None) -> None:
        self.access = access
        self.board = board
        self.reader = reader
        self.target = target
        self.accounts = accounts
        self.path = path
        self.throttle = throttle or Throttle()
        self.clock = clock
        self.sleep = sleep
        self.stopping = False

    def request_stop(self, *_args: Any) -> None:
        self.stopping = True

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self.request_stop)
        signal.signal(signal.SIGINT, self.request_stop)

    def _count(self) -> int:
        """Objects in the target now (container HEADs: account listings' counts lag)."""
        if self.target.obj:
            return 1
        return sum(self.access.object_count(account, container) for account, container
                   in scan.containers(self.access, self.target, self.accounts))

    def run(self) -> ReconcileState:
        state = load_state(self.path)
        if state is None or state.state == "done":
            state = ReconcileState(str(self.target))
            state.total = self._count()
        state.state, state.pid, state.error = "running", os.getpid(), ""
        self._save(state)
        saved = began = time.monotonic()
        seconds = state.seconds
        marker = tuple(state.position) if state.position else None
        try:
            for account, container, entry in scan.objects(self.access, self.target,
                                                          self.accounts, marker=marker):
                if self.stopping:
                    break
                started = time.monotonic()
                size = self._one(state, account, container, entry["name"])
                state.scanned += 1
                state.position = [account, container, entry["name"]]
                state.seconds = seconds + time.monotonic() - began
                if time.monotonic() - saved >= SAVE_EVERY:
                    state.updated = time.time()
                    self._save(state)
                    saved = time.monotonic()
                rest = self.throttle.rest(time.monotonic() - started, size)
                while rest > 0 and not self.stopping:  # a stop is not kept waiting
                    self.sleep(min(rest, 0.2))
                    rest -= 0.2
            state.state = "stopped" if self.stopping else "done"
        except Exception as exc:  # the state says why; a restart resumes from the position
            state.state, state.error = "failed", f"{type(exc).__name__}: {exc}"
            raise
        finally:
            state.seconds = seconds + time.monotonic() - began
            state.updated, state.pid = time.time(), None
            self._save(state)
        return state

    def _save(self, state: ReconcileState) -> None:
        save_state(self.path, state)
        if self.board is not None:
            self.board.publish(state)

    def _one(self, state: ReconcileState, account: str, container: str, obj: str) -> int:
        """Examine and, if needed, re-encode one object; the bytes it moved."""
        headers = self.access.stored_headers(account, container, obj)
        if headers is None:
            state.skipped += 1
            return 0
        try:
            stored = stored_object(account, container, obj, headers)
        except (IntegrityError, NewerRecordError) as exc:  # never re-encoded from a guess
            self._failed(state, f"{object_path(account, container, obj)}: {exc}")
            return 0
        # Swift refuses a PUT whose X-Delete-At has passed (now, whatever the clock says).
        if stored.kind != "object" or (stored.delete_at and stored.delete_at <= time.time()):
            state.skipped += 1
            return 0
        info = request_info(stored, self.clock())
        levels, filters, object_types = self.reader.lookup(info)
        pipeline = resolve(info, levels, filters, object_types).pipeline
        due = expiry_due(pipeline, stored)
        # Swift refuses an X-Delete-At that has passed: an overdue object goes at the next pass.
        delete_at = None if due is None else max(due, int(time.time()) + OVERDUE_MARGIN)
        if delete_at is None and not differences(stored, today_layers(
                {"pipeline": [e.to_json() for e in pipeline]}, filters), filters):
            state.skipped += 1
            return 0
        return self._reencode(state, stored, headers, delete_at)

    def _reencode(self, state: ReconcileState, stored: StoredObject,
                  headers: dict[str, str], delete_at: int | None = None) -> int:
        path = object_path(stored.account, stored.container, stored.obj)
        app = self.access.tenant.app
        get = Request.blank(path, environ={"REQUEST_METHOD": "GET"},
                            headers={"X-Backend-Allow-Reserved-Names": "true",
                                     "If-Match": stored.etag})
        source = get.get_response(app)
        if source.status_int in (404, 412):
            close_if_possible(source.app_iter)
            state.skipped += 1
            state.raced += 1
            return 0
        if source.status_int != 200:
            close_if_possible(source.app_iter)
            self._failed(state, f"{path}: GET {source.status}")
            return 0
        put_headers = _put_headers(stored, headers, request_info(stored, self.clock()).age)
        if delete_at is not None:
            put_headers["x-delete-at"] = str(delete_at)
        put = Request.blank(path, environ={"REQUEST_METHOD": "PUT"}, headers=put_headers)
        put.environ["wsgi.input"] = FileLikeIter(source.app_iter)
        try:
            resp = put.get_response(app)
            resp.body  # noqa: B018 - read the answer to its end
        finally:
            close_if_possible(source.app_iter)
        after = self.access.stored_headers(stored.account, stored.container, stored.obj)
        if resp.status_int in (202, 409, 412, 422) or (resp.is_success and (
                after is None or after.get("X-Backend-Timestamp") != put_headers["X-Timestamp"])):
            # A tenant's write, delete or change came first, or landed while the
            # body was on its way (its newer timestamp supersedes the write-back):
            # theirs stands. The proxy answers 202 when the object servers hold a
            # newer timestamp.
            state.skipped += 1
            state.raced += 1
            return 0
        if not resp.is_success:
            self._failed(state, f"{path}: PUT {resp.status}")
            return 0
        state.reencoded += 1
        state.bytes_reencoded += stored.logical_bytes
        state.stored_bytes_before += stored.stored_bytes
        state.stored_bytes_after += int(after.get("Content-Length", 0))
        return stored.logical_bytes

    @staticmethod
    def _failed(state: ReconcileState, why: str) -> None:
        state.failed += 1
        state.failures = (state.failures + [why])[-10:]
