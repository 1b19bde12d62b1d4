"""The cache store: object heads on a fast local directory (SSD), shared by a proxy's workers.

A GET is answered from the cached head at once while the rest streams from the
object servers (``HeadCachedSource``).

Layout under ``cache_dir``::

    index.sqlite3          path -> version, bytes on disk, last use (LRU clock)
    data/ab/<sha256(path)> one entry: a header (path, version, object length,
                           cached length) followed by the cached bytes
    tmp/                   entries being written

Entries are keyed by object path and carry a *version* — an opaque string the
middleware builds from the object's ETag and X-Timestamp; ``lookup`` returns
only an entry of the exact version asked for, so stale data is never served.
``invalidate(path)`` drops an entry (the middleware calls it on PUT, POST and
DELETE and when a pub/sub invalidation arrives from another proxy).

Concurrency: entries are written to a temp file and renamed into place; each
rename, eviction and invalidation happens inside a SQLite write transaction,
so worker processes and threads agree on what is on disk and the total stays
under ``cache_size`` (least recently used entries are evicted first). Readers
take no lock: an open entry stays readable even if it is replaced or evicted,
and its header is checked against the requested version.

Store the bytes as they are stored in Swift (below the encryption view), not
the decrypted ones, or the cache would keep plaintext at rest.

Everything under ``cache_dir`` is the proxy's alone: directories are created
0700 and files (entries, the index) 0600 from the moment they exist, so no
other local user can read a cached head or plant an entry. A ``cache_dir``
left by an earlier version with looser permissions is tightened at start.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import struct
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from iostack.filters.base import ByteSource, RangedSource
from iostack.filters.errors import ConfigError

KIB = 1024

_MAGIC = b"IOSCACH1"
_HEADER_PREFIX = struct.Struct(">8sI")  # magic, JSON header length
_READ_CHUNK = 256 * KIB
_STALE_TEMP_SECONDS = 3600
_DIR_MODE = 0o700  # the cache is the proxy's alone (see the module docstring)
_FILE_MODE = 0o600

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, path TEXT NOT NULL, "
    "version TEXT NOT NULL, size INTEGER NOT NULL, last_used INTEGER NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_lru ON entries (last_used)",
)


class CachedBytes(RangedSource):
    """The cached first ``cached`` bytes of an object of ``object_length`` bytes."""

    cached: int
    object_length: int

    @property
    def length(self) -> int:
        return self.cached

    @property
    def complete(self) -> bool:
        return self.cached == self.object_length


class CachedHead(CachedBytes):
    """An open cache entry: a ``ByteSource`` over the cached first bytes of an object."""

    def __init__(self, fd: int, data_offset: int, object_length: int, cached: int) -> None:
        self._fd = fd
        self._offset = data_offset
        self.object_length = object_length
        self.cached = cached

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        pos = start
        while pos < end:
            data = os.pread(self._fd, min(_READ_CHUNK, end - pos), self._offset + pos)
            if not data:
                raise OSError(f"cache entry shrank while being read at {pos}")
            pos += len(data)
            yield data

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> CachedHead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class HeadCachedSource(RangedSource):
    """A whole object: the cached head from flash, the rest from ``lower`` (the object servers).

    The middleware should send the tail request with ``If-Match`` on the cached
    ETag so an object replaced in between fails instead of mixing versions.
    """

    def __init__(self, head: CachedHead, lower: ByteSource) -> None:
        self._head = head
        self._lower = lower

    @property
    def length(self) -> int:
        return self._head.object_length

    def _read(self, start: int, end: int) -> Iterator[bytes]:
        cached = self._head.cached
        if start < cached:
            yield from self._head.read(start, min(end, cached))
        if end > cached:
            yield from self._lower.read(max(start, cached), end)


class CacheFill:
    """Writes one entry while the object streams past; ``commit`` publishes it."""

    def __init__(self, store: CacheStore, path: str, version: str, length: int, want: int):
        self._store = store
        self.path = path
        self.version = version
        self.object_length = length
        self.want = want
        self._written = 0
        self.temp_path = os.path.join(store.directory, "tmp", f"{uuid.uuid4().hex}.part")
        header = json.dumps(
            {"path": path, "version": version, "length": length, "cached": want}
        ).encode()
        self.header = _HEADER_PREFIX.pack(_MAGIC, len(header)) + header
        # closed by commit() or abort()
        self._file = open(os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                  _FILE_MODE), "wb")
        self._file.write(self.header)

    @property
    def full(self) -> bool:
        return self._written >= self.want

    def write(self, chunk: bytes) -> None:
        """Feed the object's bytes in order from its first byte; the excess is ignored."""
        room = self.want - self._written
        if room > 0 and self._file is not None:
            piece = chunk[:room]
            self._file.write(piece)
            self._written += len(piece)

    def commit(self) -> bool:
        """Publish the entry if the head arrived in full; drop it otherwise."""
        if self._file is None:
            return False
        self._file.close()
        self._file = None
        if self._written != self.want:
            os.unlink(self.temp_path)
            return False
        self._store._publish(self)
        return True

    def abort(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
            os.unlink(self.temp_path)

    def __enter__(self) -> CacheFill:
        return self

    def __exit__(self, exc_type: object, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.abort()


class CacheStore:
    """LRU-by-bytes cache of object heads under ``directory``, capped at ``capacity`` bytes."""

    def __init__(self, directory: str | os.PathLike[str], capacity: int,
                 thread_local: Callable[[], Any] = threading.local) -> None:
        """``thread_local`` makes the per-thread holder of SQLite connections; under
        eventlet pass the OS thread's (``patcher.original("threading").local``) so
        green threads share a worker's connection instead of opening one each."""
        if capacity <= 0:
            raise ConfigError(f"cache_size must be positive, got {capacity}")
        self.directory = os.fspath(directory)
        self.capacity = capacity
        try:
            os.makedirs(self.directory, mode=_DIR_MODE, exist_ok=True)
            if os.stat(self.directory).st_mode & 0o077:
                os.chmod(self.directory, _DIR_MODE)
            os.makedirs(os.path.join(self.directory, "tmp"), mode=_DIR_MODE, exist_ok=True)
            os.makedirs(os.path.join(self.directory, "data"), mode=_DIR_MODE, exist_ok=True)
            # SQLite gives its -wal and -shm files the database file's mode.
            os.close(os.open(self._index_path, os.O_WRONLY | os.O_CREAT, _FILE_MODE))
        except OSError as exc:
            raise ConfigError(f"cache_dir {self.directory}: {exc.strerror}") from None
        self._local = thread_local()
        with self._transaction() as db:
            for statement in _SCHEMA:
                db.execute(statement)
        self._remove_stale_temp_files()

    # -- reads ------------------------------------------------------------------

    def lookup(self, path: str, version: str) -> CachedHead | None:
        """The cached head of ``path`` at ``version``, or ``None``; the caller closes it."""
        key = _key(path)
        row = self._db().execute("SELECT version FROM entries WHERE key = ?", (key,)).fetchone()
        if row is None or row[0] != version:
            return None
        try:
            fd = os.open(self._data_path(key), os.O_RDONLY)
        except FileNotFoundError:
            return None
        head = _open_entry(fd, path, version)
        if head is None:
            os.close(fd)
            return None
        self._db().execute(
            "UPDATE entries SET last_used = ? WHERE key = ? AND version = ?",
            (time.time_ns(), key, version),
        )
        return head

    def usage(self) -> int:
        """Bytes the cache holds on disk, entry headers included."""
        return self._db().execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0]

    def paths(self) -> list[str]:
        return [row[0] for row in self._db().execute("SELECT path FROM entries ORDER BY path")]

    # -- writes -----------------------------------------------------------------

    def fill(self, path: str, version: str, length: int, head: int) -> CacheFill | None:
        """Start caching ``path``: the whole object if ``length <= head``, else its first ``head``
        bytes. ``None`` when the entry could never fit in the cache."""
        want = min(length, head)
        fill = CacheFill(self, path, version, length, want)
        if len(fill.header) + want > self.capacity:
            fill.abort()
            return None
        return fill

    def put(self, path: str, version: str, length: int, chunks: Iterable[bytes],
            head: int) -> bool:
        """Cache from an iterable of the object's bytes; ``True`` if an entry was published."""
        fill = self.fill(path, version, length, head)
        if fill is None:
            return False
        try:
            for chunk in chunks:
                fill.write(chunk)
                if fill.full:
                    break
        except BaseException:
            fill.abort()
            raise
        return fill.commit()

    def invalidate(self, path: str) -> bool:
        """Drop whatever is cached for ``path``; ``True`` if there was something."""
        key = _key(path)
        with self._transaction() as db:
            gone = db.execute("DELETE FROM entries WHERE key = ?", (key,)).rowcount > 0
            _unlink(self._data_path(key))
        return gone

    def clear(self) -> None:
        with self._transaction() as db:
            for (key,) in db.execute("SELECT key FROM entries").fetchall():
                _unlink(self._data_path(key))
            db.execute("DELETE FROM entries")

    def _publish(self, fill: CacheFill) -> None:
        key = _key(fill.path)
        size = len(fill.header) + fill.want
        target = self._data_path(key)
        os.makedirs(os.path.dirname(target), mode=_DIR_MODE, exist_ok=True)
        with self._transaction() as db:
            os.replace(fill.temp_path, target)
            db.execute(
                "INSERT OR REPLACE INTO entries (key, path, version, size, last_used) "
                "VALUES (?, ?, ?, ?, ?)",
                (key, fill.path, fill.version, size, time.time_ns()),
            )
            self._evict(db, keep=key)

    def _evict(self, db: sqlite3.Connection, keep: str) -> None:
        total = db.execute("SELECT COALESCE(SUM(size), 0) FROM entries").fetchone()[0]
        if total <= self.capacity:
            return
        victims = db.execute(
            "SELECT key, size FROM entries WHERE key != ? ORDER BY last_used", (keep,)
        )
        for key, size in victims.fetchall():
            if total <= self.capacity:
                break
            db.execute("DELETE FROM entries WHERE key = ?", (key,))
            _unlink(self._data_path(key))
            total -= size

    # -- plumbing ---------------------------------------------------------------

    @property
    def _index_path(self) -> str:
        return os.path.join(self.directory, "index.sqlite3")

    def _data_path(self, key: str) -> str:
        return os.path.join(self.directory, "data", key[:2], key)

    def _db(self) -> sqlite3.Connection:
        # One connection per thread, and a new one after a fork: SQLite
        # connections may not cross either.
        db = getattr(self._local, "db", None)
        if db is None or self._local.pid != os.getpid():
            db = sqlite3.connect(
                self._index_path,
                timeout=30, isolation_level=None, check_same_thread=True,
            )
            db.execute("PRAGMA journal_mode=WAL")
            # A cache index may lose its last writes in a power cut; entries
            # are re-validated against their headers on read.
            db.execute("PRAGMA synchronous=OFF")
            self._local.db, self._local.pid = db, os.getpid()
        return db

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db())

    def _remove_stale_temp_files(self) -> None:
        tmp = os.path.join(self.directory, "tmp")
        cutoff = time.time() - _STALE_TEMP_SECONDS
        for entry in os.scandir(tmp):
            try:
                if entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except FileNotFoundError:
                pass


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``: holds SQLite's write lock across file renames."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, exc_type: object, *rest: object) -> None:
        self._db.execute("COMMIT" if exc_type is None else "ROLLBACK")


def _key(path: str) -> str:
    return hashlib.sha256(path.encode()).hexdigest()


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _open_entry(fd: int, path: str, version: str) -> CachedHead | None:
    """Check an entry file's header and size; ``None`` if it is not ``path`` at ``version``."""
    prefix = os.pread(fd, _HEADER_PREFIX.size, 0)
    if len(prefix) != _HEADER_PREFIX.size:
        return None
    magic, header_length = _HEADER_PREFIX.unpack(prefix)
    if magic != _MAGIC or header_length > 64 * KIB:
        return None
    try:
        header: dict[str, Any] = json.loads(os.pread(fd, header_length, _HEADER_PREFIX.size))
    except ValueError:
        return None
    data_offset = _HEADER_PREFIX.size + header_length
    if (
        header.get("path") != path
        or header.get("version") != version
        or os.fstat(fd).st_size != data_offset + header.get("cached", -1)
    ):
        return None
    return CachedHead(fd, data_offset, header["length"], header["cached"])
