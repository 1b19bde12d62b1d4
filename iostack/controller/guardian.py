"""The policy store's guardian: a journal of the namespace, and its restoration.

Nodes enforce from their own copies of the policy state and apply only
higher versions from a marked store (``iostack.policy.reader``): a flushed
Redis, one restarted without persistence, or one rolled back to an older
state (an old backup, an AOF ``everysec`` loss) stops policy changes from
reaching them. The controller makes such a store whole again:

- **Journal.** As each policy or registry change commits
  (``journal_committed``, the policy store's and the registries'
  ``after_commit``), and on the thread's ticks whenever the store's
  ``version`` moved and the marker is there, every
  key of the namespace is read in one transaction and written to
  ``<state_dir>/policy-store.json`` (0600, fsynced, replaced atomically).
  Keys with a time to live (transient state) are left out. Values stay
  JSON strings as stored; nothing is evaluated.
  The journal also records ``highest``, the highest version this
  controller ever saw committed, in the store or enforced by a proxy worker
  (``iostack.controller.convergence``).
- **Restore.** When the marker is missing, or the store's version is below
  ``highest`` (rolled back: never accepted), the journal's keys are written
  back in one ``MULTI`` (keys it does not hold are deleted) together with
  the marker, a version above ``highest`` and an invalidation announcement,
  so every node applies the restored state, all within ``interval`` of
  Redis answering. A journal that cannot be used (another format or prefix)
  leaves the store as it is and the controller logs why, until an
  administrator restores the store or removes the journal.
- **A new store.** Only a controller with no journal at all marks an unmarked
  store (``may_mark_new_store``): that is a first set-up. A store lost
  together with its journal is indistinguishable from a new one; keep the
  state dir (or a copy of the journal) on durable storage.

The controller calls ``restore_if_unmarked`` before seeding the vocabulary at
start (so seeding never vouches for an emptied store), seeds with
``mark=may_mark_new_store()``, journals once (``tick``), then ``start``s the
background thread.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

import redis

from iostack.controller.convergence import forget_gone, worker_reports
from iostack.policy.changes import announce
from iostack.policy.redis_keys import KeySpace, glob_escape
from iostack.private_files import write_private_json

LOG = logging.getLogger(__name__)
JOURNAL_FILE = "policy-store.json"
JOURNAL_FORMAT = 1


class StoreGuardian:
    def __init__(self, client: redis.Redis, keys: KeySpace, journal: Path,
                 interval: float = 0.5) -> None:
        self.redis = client
        self.keys = keys
        self.journal = Path(journal)
        self.interval = interval
        self._journaled_version: str | None = None
        # The highest version ever committed, as far as this controller knows: the
        # journal's, and every version the store showed since.
        self.highest = self._journal_highest()
        self._journal_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="iostack-guardian", daemon=True)

    # -- one step ----------------------------------------------------------------
    def tick(self) -> str:
        """Journal a changed store, or restore an unmarked or rolled-back one; what was done."""
        marker, version = self.redis.mget(self.keys.marker, self.keys.version)
        if not marker:
            return "restored" if self.restore_if_unmarked() else "unmarked"
        number = int(version or 0)
        # A version some node enforces was committed, even if no journal caught it.
        reports = worker_reports(self.redis, self.keys)
        forget_gone(self.redis, self.keys, reports)
        reported = [r.get("version") for r in reports.values()]
        self.highest = max([self.highest, *(v for v in reported if isinstance(v, int))])
        if number < self.highest:
            return "restored" if self.restore(
                f"is at version {number}, older than version {self.highest} committed "
                "before (rolled back: an old backup, or writes lost in a crash)") else "behind"
        self.highest = number
        if _s(version) == self._journaled_version:
            return "unchanged"
        return "journaled" if self.write_journal() else "unchanged"

    def _journal_highest(self) -> int:
        try:
            document = json.loads(self.journal.read_text(encoding="utf-8"))
            return max(int(document.get("version") or 0), int(document.get("highest", 0)))
        except (OSError, ValueError, TypeError, AttributeError):
            return 0

    def write_journal(self) -> bool:
        """Journal the store as it is now; False when it is unmarked or changed meanwhile.

        Called by the guardian's thread and, after each change, by the controller."""
        with self._journal_lock:
            return self._write_journal()

    def journal_committed(self) -> None:
        """After a committed change: journal it now, not at the next tick (a store lost
        within that tick would be restored without the change, silently dropping it)."""
        try:
            self.write_journal()
        except redis.RedisError as exc:  # the change is committed; the thread retries
            LOG.warning("guardian: journal not written after a change: %s", exc)

    def _write_journal(self) -> bool:
        names = list(self.redis.scan_iter(match=glob_escape(self.keys.prefix) + "*", count=500))
        with self.redis.pipeline(transaction=True) as pipe:
            pipe.get(self.keys.marker)
            pipe.get(self.keys.version)
            for name in names:
                pipe.type(name)
                pipe.pttl(name)
            head = pipe.execute()
        marker, version, meta = head[0], head[1], head[2:]
        if not marker:
            return False
        kinds = {}
        for name, kind, ttl in zip(names, meta[::2], meta[1::2], strict=True):
            if ttl == -1 and _s(kind) in _READERS:
                kinds[_s(name)] = _s(kind)
        with self.redis.pipeline(transaction=True) as pipe:
            for name, kind in kinds.items():
                _READERS[kind](pipe, name)
            pipe.get(self.keys.version)
            values = pipe.execute()
        if values[-1] != version:
            return False  # changed under us: the next tick journals the newer store
        data = {name: _plain(kind, value)
                for (name, kind), value in zip(kinds.items(), values, strict=False)}
        self.highest = max(self.highest, int(version or 0))
        document = {"format": JOURNAL_FORMAT, "prefix": self.keys.prefix,
                    "version": _s(version), "highest": self.highest,
                    "keys": {n: {"type": kinds[n], "value": v} for n, v in data.items()}}
        self.journal.parent.mkdir(parents=True, exist_ok=True)
        write_private_json(self.journal, document, indent=None)
        self._journaled_version = _s(version)
        return True

    def restore_if_unmarked(self) -> bool:
        """Refill an unmarked store from the journal; False when there is none to use."""
        if self.redis.exists(self.keys.marker):
            return False
        return self.restore("had lost its marker (flushed or restarted empty)")

    def restore(self, why: str) -> bool:
        """Make the store the journal's copy, atomically; False when there is none to use.

        Keys of the namespace the journal does not hold (say, rules of a policy
        removed after an old backup was taken) are deleted; transient keys
        (with a time to live) are left alone. The version ends above every
        version committed before (``highest``), so every node applies the
        restored state, even one that held a version the store lost.
        """
        try:
            document = json.loads(self.journal.read_text(encoding="utf-8"))
        except FileNotFoundError:
            LOG.error("the policy store %s %s, and there is no journal (%s): nodes keep "
                      "their copies and policy changes do not reach them until an "
                      "administrator sets it up again", self.keys.prefix, why, self.journal)
            return False
        if document.get("format") != JOURNAL_FORMAT or document.get("prefix") != self.keys.prefix:
            LOG.error("journal %s is not for %s: not restored", self.journal, self.keys.prefix)
            return False
        entries = document["keys"]
        present = list(self.redis.scan_iter(match=glob_escape(self.keys.prefix) + "*",
                                            count=500))
        with self.redis.pipeline(transaction=False) as pipe:
            for name in present:
                pipe.pttl(name)
            stale = [name for name, ttl in zip(present, pipe.execute(), strict=True)
                     if ttl == -1 and _s(name) not in entries]
        version = max(int(document.get("version") or 0), self.highest)
        with self.redis.pipeline(transaction=True) as pipe:
            if stale:
                pipe.delete(*stale)
            for name, entry in entries.items():
                if not name.startswith(self.keys.prefix) or entry["type"] not in _WRITERS:
                    continue
                pipe.delete(name)
                _WRITERS[entry["type"]](pipe, name, entry["value"])
            pipe.set(self.keys.version, version)
            announce(pipe, self.keys)
            pipe.execute()
        self.highest = version + 1
        LOG.warning("the policy store %s %s: restored %d keys from %s, now at version %d",
                    self.keys.prefix, why, len(entries), self.journal, version + 1)
        return True

    def may_mark_new_store(self) -> bool:
        """Whether seeding may mark an unmarked store: only when no journal exists."""
        return not self.journal.exists()

    # -- the thread --------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except redis.RedisError as exc:
                LOG.debug("guardian: policy store unreachable: %s", exc)
            except Exception:  # the guardian must outlive any one failure
                LOG.exception("guardian: unexpected error")


def _s(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes) else value


def _plain(kind: str, value: Any) -> Any:
    if kind == "hash":
        return {_s(k): _s(v) for k, v in value.items()}
    if kind == "set":
        return sorted(_s(v) for v in value)
    if kind == "list":
        return [_s(v) for v in value]
    if kind == "zset":
        return [[_s(m), s] for m, s in value]
    return _s(value)


_READERS = {
    "string": lambda pipe, name: pipe.get(name),
    "hash": lambda pipe, name: pipe.hgetall(name),
    "set": lambda pipe, name: pipe.smembers(name),
    "list": lambda pipe, name: pipe.lrange(name, 0, -1),
    "zset": lambda pipe, name: pipe.zrange(name, 0, -1, withscores=True),
}


def _write_hash(pipe, name: str, value: dict[str, str]) -> None:
    if value:
        pipe.hset(name, mapping=value)


def _write_set(pipe, name: str, value: list[str]) -> None:
    if value:
        pipe.sadd(name, *value)


def _write_list(pipe, name: str, value: list[str]) -> None:
    if value:
        pipe.rpush(name, *value)


def _write_zset(pipe, name: str, value: list[list[Any]]) -> None:
    if value:
        pipe.zadd(name, {member: score for member, score in value})


_WRITERS = {
    "string": lambda pipe, name, value: pipe.set(name, value),
    "hash": _write_hash,
    "set": _write_set,
    "list": _write_list,
    "zset": _write_zset,
}
