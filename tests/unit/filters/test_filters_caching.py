"""caching: LRU by bytes, head caching, versions, invalidation, threads and processes."""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from filters_testlib import CountingSource, chunked

from iostack.filters.base import BytesSource, read_all
from iostack.filters.errors import ConfigError
from iostack.swift_middleware.cache.store import CacheStore, HeadCachedSource

KIB = 1024


def body(path: str, version: str, length: int) -> bytes:
    seed = hashlib.sha256(f"{path}@{version}".encode()).digest()
    return (seed * (length // len(seed) + 1))[:length]


def put(store: CacheStore, path: str, version: str, length: int, head: int = 64 * KIB) -> bool:
    return store.put(path, version, length, chunked(body(path, version, length), 5000), head)


def cached_bytes(store: CacheStore, path: str, version: str) -> bytes | None:
    head = store.lookup(path, version)
    if head is None:
        return None
    with head:
        return read_all(head)


def data_files(root: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in (root / "data").rglob("*") if p.is_file()}


def test_small_objects_are_cached_whole(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    assert put(store, "/AUTH_t1/c/small", "e1", 1000)
    head = store.lookup("/AUTH_t1/c/small", "e1")
    with head:
        assert head.complete and head.object_length == 1000
        assert read_all(head) == body("/AUTH_t1/c/small", "e1", 1000)


def test_empty_objects_are_cached(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    assert put(store, "/a/c/empty", "e0", 0)
    with store.lookup("/a/c/empty", "e0") as head:
        assert head.complete and read_all(head) == b""


def test_large_objects_keep_their_head_and_the_rest_streams_from_below(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    path, length, head_size = "/AUTH_t1/c/big", 300 * KIB, 64 * KIB
    data = body(path, "e1", length)
    assert put(store, path, "e1", length, head=head_size)
    head = store.lookup(path, "e1")
    assert (head.cached, head.complete) == (head_size, False)
    lower = CountingSource(BytesSource(data))
    whole = HeadCachedSource(head, lower)
    assert whole.length == length
    assert read_all(whole, 0, head_size) == data[:head_size]
    assert lower.reads == []  # served from the cache alone
    assert read_all(whole) == data
    assert lower.reads == [(head_size, length)]  # only the tail came from the object servers
    assert read_all(whole, head_size - 5, head_size + 5) == data[head_size - 5 : head_size + 5]
    assert lower.reads[-1] == (head_size, head_size + 5)
    head.close()


def test_only_the_requested_version_is_served(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    put(store, "/a/c/o", "etag1-ts1", 500)
    assert store.lookup("/a/c/o", "etag2-ts2") is None
    put(store, "/a/c/o", "etag2-ts2", 700)
    assert store.lookup("/a/c/o", "etag1-ts1") is None
    assert cached_bytes(store, "/a/c/o", "etag2-ts2") == body("/a/c/o", "etag2-ts2", 700)
    assert len(data_files(tmp_path)) == 1  # the new version replaced the old file


def test_invalidate_removes_the_entry_and_its_file(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    put(store, "/a/c/o", "v", 500)
    assert store.invalidate("/a/c/o") is True
    assert store.lookup("/a/c/o", "v") is None
    assert data_files(tmp_path) == {} and store.usage() == 0
    assert store.invalidate("/a/c/o") is False


def test_lru_eviction_by_bytes(tmp_path):
    entry = 100 * KIB
    store = CacheStore(tmp_path, int(3.5 * entry))
    for name in "abc":
        assert put(store, f"/a/c/{name}", "v", entry, head=entry)
    assert store.lookup("/a/c/a", "v").close() is None  # a is now the most recently used
    assert put(store, "/a/c/d", "v", entry, head=entry)
    assert store.paths() == ["/a/c/a", "/a/c/c", "/a/c/d"]  # b was least recently used
    assert store.usage() <= store.capacity
    assert sum(data_files(tmp_path).values()) == store.usage()
    # One big entry pushes out as many small ones as it needs to.
    assert put(store, "/a/c/big", "v", int(2.4 * entry), head=4 * entry)
    assert store.paths() == ["/a/c/big", "/a/c/d"]
    assert store.usage() <= store.capacity


def test_an_entry_larger_than_the_cache_is_not_attempted(tmp_path):
    store = CacheStore(tmp_path, 10 * KIB)
    assert store.fill("/a/c/o", "v", 20 * KIB, head=20 * KIB) is None
    assert not any((tmp_path / "tmp").iterdir())


def test_an_interrupted_fill_publishes_nothing(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    fill = store.fill("/a/c/o", "v", 10_000, head=64 * KIB)
    fill.write(b"x" * 4000)  # the client went away
    assert fill.commit() is False
    assert store.lookup("/a/c/o", "v") is None
    with pytest.raises(RuntimeError), store.fill("/a/c/p", "v", 10, head=64 * KIB) as other:
        other.write(b"0123456789")
        raise RuntimeError("backend died")
    assert store.lookup("/a/c/p", "v") is None
    assert not any((tmp_path / "tmp").iterdir())


def test_fill_ignores_bytes_past_the_head(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    fill = store.fill("/a/c/o", "v", 200 * KIB, head=64 * KIB)
    for chunk in chunked(b"y" * 200 * KIB, 30 * KIB):
        fill.write(chunk)
    assert fill.full and fill.commit()
    assert cached_bytes(store, "/a/c/o", "v") == b"y" * 64 * KIB


def test_damaged_entry_files_are_misses(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    put(store, "/a/c/o", "v", 5000)
    (entry,) = (tmp_path / "data").rglob("*/*")
    entry.write_bytes(entry.read_bytes()[:-1])
    assert store.lookup("/a/c/o", "v") is None
    entry.write_bytes(b"garbage")
    assert store.lookup("/a/c/o", "v") is None


def test_state_is_shared_between_store_instances(tmp_path):
    CacheStore(tmp_path, 1 << 20)
    first, second = CacheStore(tmp_path, 1 << 20), CacheStore(tmp_path, 1 << 20)
    put(first, "/a/c/o", "v", 3000)
    assert cached_bytes(second, "/a/c/o", "v") == body("/a/c/o", "v", 3000)
    second.invalidate("/a/c/o")
    assert first.lookup("/a/c/o", "v") is None


def test_bad_configuration_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="cache_size must be positive"):
        CacheStore(tmp_path, 0)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="cache_dir"):
        CacheStore(tmp_path / "file" / "cache", 1 << 20)


PATHS = [f"/AUTH_t1/c/o{i}" for i in range(6)]
VERSIONS = ["v1", "v2", "v3"]
SIZES = {path: (i + 1) * 20 * KIB for i, path in enumerate(PATHS)}


def churn(store: CacheStore, seed: int, rounds: int) -> list[str]:
    """Random puts, lookups and invalidations; returns every wrong answer seen."""
    rng = random.Random(seed)
    errors = []
    for _ in range(rounds):
        path, version = rng.choice(PATHS), rng.choice(VERSIONS)
        action = rng.random()
        if action < 0.4:
            put(store, path, version, SIZES[path], head=64 * KIB)
        elif action < 0.9:
            got = cached_bytes(store, path, version)
            if got is not None and got != body(path, version, SIZES[path])[: 64 * KIB]:
                errors.append(f"{path}@{version}: wrong bytes")
        else:
            store.invalidate(path)
    return errors


def assert_consistent(root: Path, store: CacheStore) -> None:
    assert store.usage() <= store.capacity
    assert sum(data_files(root).values()) == store.usage()
    assert len(data_files(root)) == len(store.paths())
    assert not any((root / "tmp").iterdir())


def test_concurrent_threads_never_see_wrong_bytes(tmp_path):
    store = CacheStore(tmp_path, 200 * KIB)
    errors: list[str] = []
    threads = [threading.Thread(target=lambda s=s: errors.extend(churn(store, s, 150)))
               for s in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert_consistent(tmp_path, store)


WORKER = """
import sys
sys.path.insert(0, sys.argv[3])
from iostack.swift_middleware.cache.store import CacheStore
from test_filters_caching import churn
errors = churn(CacheStore(sys.argv[1], 200 * 1024), int(sys.argv[2]), 150)
print("\\n".join(errors))
sys.exit(1 if errors else 0)
"""


def test_concurrent_worker_processes_share_the_cache_safely(tmp_path):
    here = os.path.dirname(__file__)
    CacheStore(tmp_path, 200 * KIB)
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(seed), here],
                                stdout=subprocess.PIPE, text=True) for seed in range(3)]
    outputs = [(w.communicate(timeout=120)[0], w.returncode) for w in workers]
    assert outputs == [("\n", 0)] * 3
    assert_consistent(tmp_path, CacheStore(tmp_path, 200 * KIB))


def test_cache_directories_and_entries_are_private_from_creation(tmp_path, no_chmod):
    store = CacheStore(tmp_path / "cache", 1 << 20)
    with store.fill("/v1/AUTH_t1/c/o", "v1", 5, 5) as fill:
        # The entry being written is already private.
        assert oct(os.stat(fill.temp_path).st_mode & 0o777) == "0o600"
        fill.write(b"hello")
    cache = tmp_path / "cache"
    modes = {str(p.relative_to(cache)): oct(p.stat().st_mode & 0o777)
             for p in [cache, *cache.rglob("*")]}
    expected = {name: "0o700" if (cache / name).is_dir() else "0o600" for name in modes}
    assert modes == expected
    assert any(name.startswith("data/") and (cache / name).is_file() for name in modes)
    assert "index.sqlite3" in modes


def test_a_loose_cache_dir_from_before_is_tightened(tmp_path):
    loose = tmp_path / "cache"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)  # noqa: S103 - the loose mode under test
    CacheStore(loose, 1 << 20)
    assert loose.stat().st_mode & 0o777 == 0o700
