"""The proxy cache's pieces that need no Swift: invalidation bus (real Redis), fill tickets,
entry format, versions, and the tee that fills the cache while a body streams."""

from __future__ import annotations

import os
import threading
import uuid

import pytest
import redis

from iostack.policy.resolve import Level
from iostack.swift_middleware.cache.admission import caching_rules, entry_version, tenant_request
from iostack.swift_middleware.cache.invalidation import REMEMBERED_PATHS, InvalidationBus
from iostack.swift_middleware.cache.middleware import cacheable_read, filter_factory
from iostack.swift_middleware.cache.store import CacheStore
from iostack.swift_middleware.cache.worker import CachedObject, WorkerCache, cached_headers

PATH = "/v1/AUTH_t1/c/o"


@pytest.fixture
def redis_url(shared_redis_url) -> str:
    """The test session's private Redis."""
    return shared_redis_url


@pytest.fixture
def prefix() -> str:
    return f"iostack-test-{uuid.uuid4().hex[:8]}:"


class Recorder:
    def __init__(self) -> None:
        self.paths: list[str] = []
        self.resets = 0
        self.event = threading.Event()

    def on_path(self, path: str) -> None:
        self.paths.append(path)
        self.event.set()

    def on_reset(self) -> None:
        self.resets += 1


@pytest.fixture
def bus_pair(prefix, redis_url):
    """Two buses on one channel, like two proxies."""
    made = []

    def make() -> tuple[InvalidationBus, Recorder]:
        recorder = Recorder()
        bus = InvalidationBus(redis_url, prefix, recorder.on_path, recorder.on_reset)
        assert bus.wait_trusted(5)
        made.append(bus)
        return bus, recorder
    yield make
    for bus in made:
        bus.close()


# -- the bus -----------------------------------------------------------------------

def test_publish_reaches_every_subscriber(bus_pair):
    (a, rec_a), (_, rec_b) = bus_pair(), bus_pair()
    assert rec_a.resets == 1 and rec_b.resets == 1  # a new subscription starts empty
    assert a.publish(PATH)
    assert rec_b.event.wait(5) and rec_a.event.wait(5)
    assert rec_b.paths == [PATH] and rec_a.paths == [PATH]


def test_bad_messages_are_ignored(bus_pair, prefix, redis_url):
    bus, recorder = bus_pair()
    client = redis.Redis.from_url(redis_url)
    for junk in (b"\xff\xfe", b"/etc/passwd", b"/v1/AUTH_t1", b"x" * 9000, b"/v1/" + b"a/" * 5000):
        client.publish(bus.channel, junk)
    client.publish(bus.channel, PATH)
    client.close()
    assert recorder.event.wait(5)
    assert recorder.paths == [PATH]


def test_untrusted_without_redis_and_publish_fails_softly():
    recorder = Recorder()
    bus = InvalidationBus("redis://127.0.0.1:1/0", "x:", recorder.on_path, recorder.on_reset)
    try:
        assert not bus.wait_trusted(0.5)
        assert not bus.publish(PATH)
        assert recorder.resets == 0
    finally:
        bus.close()


def test_tickets(redis_url):
    bus = InvalidationBus(redis_url, "unused:", lambda p: None, lambda: None, subscribe=False)
    before = bus.ticket()
    assert bus.still_valid(PATH, before)
    bus.changed(PATH)
    assert not bus.still_valid(PATH, before)  # a fill that began before the write
    assert bus.still_valid("/v1/AUTH_t1/c/other", before)  # other objects are unaffected
    after = bus.ticket()
    assert bus.still_valid(PATH, after)
    bus._reset()
    assert not bus.still_valid("/v1/AUTH_t1/c/other", after)  # a reset voids every fill
    assert bus.still_valid(PATH, bus.ticket())


def test_forgotten_paths_void_older_tickets(redis_url):
    bus = InvalidationBus(redis_url, "unused:", lambda p: None, lambda: None, subscribe=False)
    old = bus.ticket()
    for n in range(REMEMBERED_PATHS + 1):
        bus.changed(f"/v1/AUTH_t1/c/{n}")
    assert not bus.still_valid("/v1/AUTH_t1/c/never-written", old)
    assert bus.still_valid("/v1/AUTH_t1/c/never-written", bus.ticket())


# -- entries and versions ----------------------------------------------------------

def rule(rid: str, **params) -> dict:
    return {"id": rid, "filter": "caching", "verb": "set", "params": params}


def test_versions_name_the_rules():
    levels = [Level("tenant", "AUTH_t1", (rule("P1.1"), {"id": "P2.1", "filter": "noop"})),
              Level("container", "AUTH_t1/c", (rule("P3.1", head=65536),))]
    rules = caching_rules(levels)
    assert [r["id"] for r in rules] == ["P1.1", "P3.1"]
    version = entry_version(rules)
    assert version == entry_version(list(reversed(rules)))
    assert version != entry_version([rule("P1.1"), rule("P3.1", head=131072)])
    assert version != entry_version([rule("P1.1"), rule("P4.1", head=65536)])  # re-added
    assert caching_rules([Level("global", "*", ({"id": "P5.1", "filter": "noop"},))]) == []


def test_tenant_request_uses_the_tenants_size_and_tags():
    info = tenant_request(PATH, {"Content-Length": "100", "X-Object-Sysmeta-Iostack-Size": "5000",
                                 "Content-Type": "text/csv", "X-Object-Meta-Kind": "logs"})
    assert (info.size, info.content_type, info.tags) == (5000, "text/csv", {"kind": "logs"})
    assert tenant_request(PATH, {"Content-Length": "7"}).size == 7


def test_cached_headers_drop_per_response_ones():
    kept = cached_headers({"Etag": "e", "X-Trans-Id": "t", "Date": "d", "Content-Length": "1",
                           "X-Object-Sysmeta-Iostack-Pipeline": "[]"})
    assert kept == {"Etag": "e", "X-Object-Sysmeta-Iostack-Pipeline": "[]"}


@pytest.fixture
def worker(tmp_path, prefix, redis_url):
    cache = WorkerCache(str(tmp_path / "cache"), 1 << 20, redis_url, prefix)
    assert cache.bus.wait_trusted(5)
    yield cache
    cache.bus.close()


def chunks(data: bytes, size: int = 1000):
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_fill_then_hit_whole_and_head(worker):
    headers = {"Etag": "abc", "X-Timestamp": "1.0"}
    small = os.urandom(3000)
    filler = worker.start_fill(PATH, "v", headers, len(small), 10000, worker.bus.ticket())
    assert b"".join(filler.wrap(chunks(small))) == small
    hit = worker.lookup(PATH, "v")
    assert hit.complete and hit.headers == headers and b"".join(hit.read(0, 3000)) == small
    hit.close()
    assert worker.lookup(PATH, "other-version") is None

    big = os.urandom(50000)
    other = PATH + "2"
    filler = worker.start_fill(other, "v", headers, len(big), 8192, worker.bus.ticket())
    streamed = filler.wrap(chunks(big))
    next(streamed)
    next(streamed)
    assert worker.lookup(other, "v") is None  # the head is not complete yet
    for _ in range(7):
        next(streamed)
    hit = worker.lookup(other, "v")  # published once the head is in, before the body ends
    assert hit is not None and not hit.complete
    assert (hit.cached, hit.object_length) == (8192, 50000)
    assert b"".join(hit.read(100, 8192)) == big[100:8192]
    hit.close()
    assert b"".join(streamed) == big[9000:]


def test_interrupted_or_raced_fills_publish_nothing(worker):
    body = os.urandom(5000)
    filler = worker.start_fill(PATH, "v", {}, len(body), 10000, worker.bus.ticket())
    streamed = filler.wrap(chunks(body))
    next(streamed)
    streamed.close()  # the client went away
    assert worker.lookup(PATH, "v") is None

    ticket = worker.bus.ticket()
    filler = worker.start_fill(PATH, "v", {}, len(body), 10000, ticket)
    streamed = filler.wrap(chunks(body))
    next(streamed)
    worker.written(PATH)  # a PUT finished while the old version streamed
    assert b"".join(streamed) == body[1000:]  # the client still gets its body
    assert worker.lookup(PATH, "v") is None
    assert os.listdir(os.path.join(worker.store.directory, "tmp")) == []


def test_invalidation_message_drops_the_entry(worker, prefix, redis_url):
    body = b"x" * 100
    list(worker.start_fill(PATH, "v", {}, 100, 1000, worker.bus.ticket()).wrap([body]))
    assert worker.lookup(PATH, "v") is not None
    other = InvalidationBus(redis_url, prefix, lambda p: None, lambda: None, subscribe=False)
    other.publish(PATH)
    other.close()
    store = CacheStore(worker.store.directory, 1 << 20)
    for _ in range(50):
        if PATH not in store.paths():
            break
        threading.Event().wait(0.1)
    assert PATH not in store.paths()


def test_corrupt_entry_is_a_miss_and_dropped(worker):
    worker.store.put(PATH, "v", 10, [b"\x00\x00\x00\x05{bad}"], 1000)
    assert worker.lookup(PATH, "v") is None
    assert PATH not in worker.store.paths()


def test_unusable_directory_disables_the_cache(tmp_path, prefix, redis_url):
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    cache = WorkerCache(str(blocker / "cache"), 1 << 20, redis_url, prefix)
    try:
        assert cache.store is None and not cache.usable
        assert cache.lookup(PATH, "v") is None
        assert cache.start_fill(PATH, "v", {}, 10, 10, 0) is None
        cache.written(PATH)  # nothing to drop, no error
    finally:
        cache.bus.close()


def test_cached_object_rejects_non_string_headers(tmp_path):
    store = CacheStore(tmp_path, 1 << 20)
    payload = b'{"a": 1}'
    store.put(PATH, "v", 4 + len(payload), [len(payload).to_bytes(4, "big") + payload], 100)
    head = store.lookup(PATH, "v")
    with pytest.raises(ValueError):
        CachedObject(head)
    head.close()


@pytest.mark.parametrize("size", ["0", "-5", "1G", "", "abc"])
def test_bad_cache_size_is_refused_by_name(size):
    with pytest.raises(ValueError, match="cache_size must be a positive number of bytes"):
        filter_factory({}, cache_size=size)(lambda env, start: [])


@pytest.mark.parametrize(("extra", "cacheable"), [
    ({}, True),
    ({"HTTP_X_BACKEND_ETAG_IS_AT": "X-Object-Sysmeta-Iostack-Etag",
      "HTTP_X_BACKEND_IGNORE_RANGE_IF_METADATA_PRESENT": "X-Object-Sysmeta-Iostack-Pipeline",
      "HTTP_RANGE": "bytes=0-1", "HTTP_IF_MATCH": "x"}, True),
    ({"QUERY_STRING": "multipart-manifest=get"}, False),
    ({"HTTP_X_NEWEST": "True"}, False),
    ({"HTTP_X_RUN_STORLET": "upper.py"}, False),
    ({"HTTP_X_BACKEND_IOSTACK_RAW": "true"}, False),
    ({"HTTP_X_BACKEND_STORAGE_POLICY_INDEX": "1"}, False),
])
def test_only_ordinary_reads_use_the_cache(extra, cacheable):
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": PATH, **extra}
    assert cacheable_read(env) is cacheable


def test_lost_subscription_bypasses_then_empties_the_cache(tmp_path, prefix, redis_url):
    """Messages published while a worker is not subscribed are lost: it must not trust its
    entries then, and must start empty when it subscribes again."""
    name = f"iostack-test-bus-{uuid.uuid4().hex[:8]}"
    cache = WorkerCache(str(tmp_path / "cache"), 1 << 20, redis_url, prefix)
    cache.bus.close()
    cache.bus = InvalidationBus(redis_url, prefix, cache.drop, cache._clear, client_name=name)
    admin = redis.Redis.from_url(redis_url)
    try:
        assert cache.bus.wait_trusted(5)
        list(cache.start_fill(PATH, "v", {}, 100, 1000, cache.bus.ticket()).wrap([b"x" * 100]))
        assert cache.lookup(PATH, "v") is not None
        ticket = cache.bus.ticket()
        ids = [c["id"] for c in admin.client_list() if c.get("name") == name]
        assert ids
        for client_id in ids:
            admin.client_kill_filter(_id=client_id)
        assert wait_for(lambda: not cache.usable)
        assert cache.lookup(PATH, "v") is None  # bypassed while untrusted
        assert not cache.bus.still_valid(PATH, ticket)  # fills running then are void
        assert wait_for(lambda: cache.usable)  # subscribed again ...
        assert cache.store.paths() == []  # ... and emptied first
    finally:
        admin.close()
        cache.bus.close()


def wait_for(check, timeout: float = 10.0) -> bool:
    deadline = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if check():
            return True
        deadline.wait(0.02)
    return False


def test_empty_objects_are_cached(worker):
    filler = worker.start_fill(PATH, "v", {"Etag": "d41d8cd98f00b204e9800998ecf8427e"}, 0, 1000,
                               worker.bus.ticket())
    assert list(filler.wrap([])) == []
    hit = worker.lookup(PATH, "v")
    assert hit is not None and hit.complete and hit.object_length == 0
    assert b"".join(hit.read(0, 0)) == b""
    hit.close()


def test_bad_validate_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="validate must be none or head"):
        filter_factory({}, validate="always")(lambda env, start: [])
