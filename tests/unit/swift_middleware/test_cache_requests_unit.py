"""The proxy cache middleware (``iostack_cache``) over a fake Swift, a fake policy reader and
a cache directory under tmp: hits, misses, and writes that invalidate.

The invalidation bus keeps its real fill tickets but neither subscribes nor
publishes through Redis (test_cache_middleware_unit.py tests the bus on a real
Redis; tests/integration/swift_middleware/test_caching.py the whole cache).
"""

from __future__ import annotations

import pytest
from fakeswift import FakeReader, FakeSwift, Stored, deny, md5, request, rule, use_reader

from iostack.policy.reader import PolicyStoreUnavailable
from iostack.swift_middleware.cache import worker
from iostack.swift_middleware.cache.invalidation import InvalidationBus
from iostack.swift_middleware.cache.middleware import filter_factory

PATH = "/v1/AUTH_t1/c/o"
BODY = bytes(range(256)) * 400  # 100 KiB


class LocalBus(InvalidationBus):
    """Trusted from the start, without a subscription; records what it would publish."""

    trusted = True

    def __init__(self, redis_url, prefix, on_path, on_reset, subscribe=True, **kwargs) -> None:
        super().__init__(redis_url, prefix, on_path, on_reset, subscribe=False, **kwargs)
        self.published: list[str] = []

    def wait_trusted(self, timeout: float) -> bool:
        return True

    def publish(self, path: str) -> bool:
        self.published.append(path)
        return True


def stored(body: bytes) -> Stored:
    return Stored({"Etag": md5(body),
                   "X-Timestamp": "1700000000.00000", "Content-Type": "application/octet-stream",
                   "Content-Length": str(len(body))}, body)


@pytest.fixture
def reader(monkeypatch) -> FakeReader:
    reader = FakeReader(rule("caching"))
    use_reader(monkeypatch, reader)
    return reader


@pytest.fixture
def swift() -> FakeSwift:
    swift = FakeSwift()
    swift.objects[PATH] = stored(BODY)
    return swift


@pytest.fixture
def cache(monkeypatch, tmp_path, swift, reader):
    monkeypatch.setattr(worker, "InvalidationBus", LocalBus)
    mw = filter_factory({}, cache_dir=str(tmp_path / "cache"), cache_size=str(1 << 22))(swift)
    yield mw
    for cached in mw._workers.values():
        cached.bus.close()


def object_gets(swift: FakeSwift) -> int:
    return len(swift.calls_to("GET", PATH))


def bus(cache) -> LocalBus:
    return cache.worker().bus


def test_a_miss_fills_and_the_next_reads_are_hits(cache, swift):
    assert request(cache, "GET", PATH).body == BODY
    assert object_gets(swift) == 1
    hit = request(cache, "GET", PATH)
    assert hit.status_int == 200 and hit.body == BODY
    assert hit.headers["Etag"] == swift.objects[PATH].headers["Etag"]
    ranged = request(cache, "GET", PATH, headers={"Range": "bytes=1000-1999"})
    assert ranged.status_int == 206 and ranged.body == BODY[1000:2000]
    head = request(cache, "HEAD", PATH)
    assert head.status_int == 200 and head.content_length == len(BODY)
    assert object_gets(swift) == 1 and swift.calls_to("HEAD", PATH) == []
    assert request(cache, "GET", PATH, headers={"If-None-Match": head.etag}).status_int == 304


@pytest.mark.parametrize("method", ["PUT", "DELETE", "POST"])
def test_a_write_drops_the_entry_and_tells_the_other_proxies(cache, swift, method):
    request(cache, "GET", PATH)
    assert request(cache, method, PATH, b"new body" if method == "PUT" else None).is_success
    assert bus(cache).published == [PATH]
    after = request(cache, "GET", PATH)
    assert object_gets(swift) == 2  # a miss: the object servers answered
    if method == "DELETE":
        assert after.status_int == 404
    else:
        assert after.body == (b"new body" if method == "PUT" else BODY)


def test_objects_without_a_caching_rule_are_neither_cached_nor_invalidated(cache, swift,
                                                                           reader):
    reader.levels = [rule("noop")]
    request(cache, "GET", PATH)
    request(cache, "GET", PATH)
    assert object_gets(swift) == 2
    request(cache, "PUT", PATH, b"x")
    assert bus(cache).published == []


def test_a_write_with_unknown_policies_still_invalidates(cache, swift, reader):
    request(cache, "GET", PATH)
    reader.error = PolicyStoreUnavailable("Redis is down")
    request(cache, "PUT", PATH, b"new body")
    assert bus(cache).published == [PATH]
    reader.error = None
    assert request(cache, "GET", PATH).body == b"new body"


def test_a_changed_caching_rule_makes_older_entries_unreachable(cache, swift, reader):
    request(cache, "GET", PATH)
    reader.levels = [rule("caching", head=65536)]
    request(cache, "GET", PATH)
    assert object_gets(swift) == 2


def test_a_hit_is_authorized_like_the_proxy_server_would(cache, swift):
    request(cache, "GET", PATH)
    denied = request(cache, "GET", PATH, **{"swift.authorize": deny})
    assert denied.status_int == 401 and BODY[:100] not in denied.body
    assert object_gets(swift) == 1  # refused by the cache itself, from the container's ACL
    assert swift.calls_to("HEAD", "/v1/AUTH_t1/c")  # which it asked for


def test_a_large_object_is_served_head_from_cache_tail_from_swift(cache, swift, reader):
    reader.levels = [rule("caching", head=65536)]
    big = bytes(range(251)) * 1000
    swift.objects[PATH] = stored(big)
    request(cache, "GET", PATH)
    swift.calls.clear()
    assert request(cache, "GET", PATH).body == big
    (tail,) = swift.calls_to("GET", PATH)
    assert tail.headers["Range"] == f"bytes=65536-{len(big) - 1}"
    assert tail.headers["If-Match"] == swift.objects[PATH].headers["Etag"]  # the cached version


def test_reads_the_cache_cannot_answer_go_to_swift(cache, swift):
    request(cache, "GET", PATH)
    for query, headers in (("?multipart-manifest=get", {}), ("", {"X-Newest": "true"})):
        request(cache, "GET", PATH + query, headers=headers)
    assert object_gets(swift) == 3
