"""The data-path reader: one round trip per miss, cached hits, invalidation within a second."""

from __future__ import annotations

import time

from iostack.policy.resolve import RequestInfo


def count_commands(reader):
    calls = []
    original = reader.redis.execute_command

    def counting(*args, **kwargs):
        calls.append(args[0])
        return original(*args, **kwargs)

    reader.redis.execute_command = counting
    return calls


def pipeline_of(reader, method="PUT", path="/v1/AUTH_t1/logs/a.csv", **kw):
    return [e.as_tuple() for e in reader.resolve(RequestInfo.from_path(method, path, **kw))
            .pipeline]


def wait_until(predicate, timeout=1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


def test_one_round_trip_on_a_miss_none_on_a_hit(store, reader, registries):
    before = reader.stats()["generation"]
    registries.put_group("gold", ["t1"])
    store.submit("FOR ALL DO SET noop\nFOR G:gold DO SET compression WITH level=3\n"
                 "FOR CONTAINER t1/logs DO SET compression WITH algorithm=gzip")
    # Let the invalidation messages of these changes arrive before counting.
    assert wait_until(lambda: reader.stats()["generation"] >= before + 2)
    time.sleep(0.1)
    calls = count_commands(reader)
    first = pipeline_of(reader)
    assert first == [("noop", {}, "proxy", False),
                     ("compression", {"algorithm": "gzip", "frame_size": 262144, "level": 3},
                      "proxy", False)]
    assert calls in (["EVALSHA"], ["EVALSHA", "SCRIPT LOAD", "EVALSHA"])
    calls.clear()
    assert pipeline_of(reader, path="/v1/AUTH_t1/logs/other.csv") == first
    assert calls == []  # same container, no object rules: served from the cache


def test_object_rules_are_read_for_that_object_only(store, reader):
    store.submit("FOR OBJECT t1/logs/special.csv DO SET noop")
    assert wait_until(lambda: pipeline_of(reader, path="/v1/AUTH_t1/logs/special.csv")
                      == [("noop", {}, "proxy", False)])
    assert pipeline_of(reader, path="/v1/AUTH_t1/logs/plain.csv") == []


def test_a_policy_change_reaches_the_reader_within_a_second(store, reader):
    assert pipeline_of(reader) == []  # now cached
    store.submit("FOR TENANT t1 DO SET noop")
    start = time.monotonic()
    assert wait_until(lambda: pipeline_of(reader) == [("noop", {}, "proxy", False)], 1.0)
    assert time.monotonic() - start < 1.0
    store.delete(store.list()[0]["id"])
    assert wait_until(lambda: pipeline_of(reader) == [], 1.0)


def test_a_filter_registered_later_is_seen(store, reader, registries):
    assert pipeline_of(reader) == []
    registries.put_filter({"name": "upper", "description": "toy", "methods": ["PUT"],
                           "extra": {"runtime": "storlet"}})
    store.submit("FOR TENANT t1 DO SET upper")
    assert wait_until(lambda: pipeline_of(reader) == [("upper", {}, "proxy", True)])


def test_while_unsubscribed_the_cache_is_bypassed(store, reader):
    reader._subscription._active.clear()  # as when the invalidation connection drops
    calls = count_commands(reader)
    pipeline_of(reader)
    pipeline_of(reader)
    assert calls.count("EVALSHA") == 2


def test_a_cached_container_lookup_never_shadows_object_rules(store, reader):
    store.submit("FOR OBJECT t1/logs/secret.csv DO SET encryption")
    assert wait_until(lambda: pipeline_of(reader, path="/v1/AUTH_t1/logs/secret.csv") != [])
    reader.invalidate()
    # A listing or container HEAD resolves the container path first...
    assert pipeline_of(reader, "GET", "/v1/AUTH_t1/logs") == []
    assert pipeline_of(reader, "HEAD", "/v1/AUTH_t1/logs") == []
    # ...and the object's rule still holds for the object.
    assert [f for f, *_ in pipeline_of(reader, path="/v1/AUTH_t1/logs/secret.csv")] == \
        ["encryption"]


def test_a_store_without_its_marker_is_unavailable(store, reader, redis_client, keys):
    import pytest

    from iostack.policy.reader import PolicyStoreUnavailable

    assert pipeline_of(reader) == []
    redis_client.delete(keys.marker)
    reader.invalidate()  # FLUSHALL publishes nothing: the cache is dropped by hand here
    with pytest.raises(PolicyStoreUnavailable, match="no marker"):
        pipeline_of(reader)


def test_an_unreachable_store_is_unavailable(keys):
    import pytest

    from iostack.policy.reader import PolicyReader, PolicyStoreUnavailable

    reader = PolicyReader("redis://127.0.0.1:1/0", prefix=keys.prefix, subscribe=False)
    with pytest.raises(PolicyStoreUnavailable, match="cannot be read"):
        pipeline_of(reader)


def test_lookups_and_round_trips_are_counted(store, reader):
    before = reader.stats()
    pipeline_of(reader)
    pipeline_of(reader)
    after = reader.stats()
    assert after["lookups"] - before["lookups"] == 2
    assert after["round_trips"] - before["round_trips"] <= 1
