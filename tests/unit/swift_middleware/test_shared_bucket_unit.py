"""The shared bucket: its Lua script on a real Redis, and workers' leases over a fake one.

The lease logic runs on green threads (as in the proxy) against ``SlowStore``,
an in-memory bucket whose every call takes a round trip of green sleep: no
socket is touched, so eventlet needs no monkey-patching here. The script
itself is tested on the session's private Redis with a plain client.
tests/integration/qos/test_qos.py measures the whole through a real Swift.
"""

from __future__ import annotations

import time
import uuid

import eventlet
import pytest
import redis

from iostack.swift_middleware import shared_bucket
from iostack.swift_middleware.shared_bucket import RETRY, RedisLeases, SharedBucket

MB = 1e6
CHUNK = 65536


# -- the script, on a real Redis ---------------------------------------------------

@pytest.fixture
def client(shared_redis_url) -> redis.Redis:
    return redis.Redis.from_url(shared_redis_url)


@pytest.fixture
def leases(client) -> RedisLeases:
    return RedisLeases(client, f"iostack-test-{uuid.uuid4().hex[:8]}:")


def lease(store: RedisLeases, lessee: str = "w1", streams: int = 1, rate: float = 1e6,
          horizon: float = 0.1, minimum: float = 1, maximum: float = 1e18,
          give_back: float = 0.0) -> tuple[float, float, int]:
    return store.lease("AUTH_t1", "get", lessee, streams, rate, rate * horizon, horizon,
                       minimum, maximum, give_back)


def test_a_full_bucket_grants_what_it_holds_then_queues_leases_as_debt(leases):
    amount, covered, streams = lease(leases)
    assert amount == pytest.approx(100_000, rel=0.01) and covered < 0.01 and streams == 1
    amount, covered, _ = lease(leases)  # the bucket is empty: a horizon's worth, in debt
    assert amount == pytest.approx(100_000, rel=0.01)
    assert covered == pytest.approx(0.1, abs=0.02)
    _, covered, _ = lease(leases, "w2")
    assert covered == pytest.approx(0.15, abs=0.03), "behind the first debt, its fair part"


def test_leases_are_shared_by_streams_and_bounded_by_what_a_worker_wants(leases):
    lease(leases, "w1", streams=3)
    amount, _, streams = lease(leases, "w2", streams=1)
    assert streams == 4 and amount == pytest.approx(1e6 * 0.1 / 4, rel=0.05)
    assert lease(leases, "w2", maximum=5000)[0] == 5000
    assert lease(leases, "w2", minimum=300_000)[0] == 300_000, "a deficit is always paid"


def test_giving_back_shortens_the_queue_and_leaves_the_lessees(leases):
    lease(leases, "w1")
    _, covered, _ = lease(leases, "w1")
    assert covered > 0.05
    _, _, streams = lease(leases, "w2", streams=2)
    assert streams == 3
    lease(leases, "w2", streams=0, give_back=150_000)
    amount, covered, streams = lease(leases, "w1")
    assert streams == 1 and covered < 0.15


def test_the_lessees_are_listed_with_their_streams_until_they_leave(leases):
    before = time.time()
    lease(leases, "w1", streams=3)
    lease(leases, "w2", streams=1)
    found = leases.lessees("AUTH_t1", "get")
    assert sorted(found) == ["w1", "w2"] and found["w1"][0] == 3 and found["w2"][0] == 1
    assert all(expiry > before + shared_bucket.LESSEE_TTL - 0.5 for _n, expiry in found.values())
    lease(leases, "w2", streams=0)
    assert list(leases.lessees("AUTH_t1", "get")) == ["w1"]


def test_a_lessee_that_stops_calling_expires_and_the_bucket_key_too(leases, client,
                                                                    monkeypatch):
    monkeypatch.setattr(shared_bucket, "LESSEE_TTL", 0.2)
    monkeypatch.setattr(shared_bucket, "KEY_TTL_MS", 500)
    lease(leases, "gone", streams=5)
    time.sleep(0.3)
    assert lease(leases, "w1")[2] == 1
    time.sleep(0.7)
    assert not client.exists(leases.keys.qos_bucket("get", "AUTH_t1"))


# -- workers' leases, on green threads ---------------------------------------------

class SlowStore:
    """The bucket of ``LEASE_LUA`` in memory; every call takes ``rtt`` (green)."""

    def __init__(self, rtt: float) -> None:
        self.rtt = rtt
        self.tokens: float | None = None
        self.stamp = 0.0
        self.lessees: dict[str, int] = {}
        self.calls: list[tuple[str, int, float, float]] = []  # lessee, streams, amount, back
        self.fail = False
        self.stall = 0.0  # the next call takes this much longer (an fsync, a busy machine)

    def lease(self, scope, direction, lessee, streams, rate, capacity, horizon, minimum,
              maximum, give_back):
        stall, self.stall = self.stall, 0.0
        eventlet.sleep(self.rtt / 2 + stall)
        if self.fail:
            raise redis.ConnectionError("Redis is down")
        now = time.monotonic()
        if streams:
            self.lessees[lessee] = streams
        else:
            self.lessees.pop(lessee, None)
        everyone = max(sum(self.lessees.values()), streams)
        tokens = capacity if self.tokens is None else self.tokens
        tokens = min(capacity, tokens + (now - self.stamp) * rate) + give_back
        amount = 0.0
        if streams:
            amount = min(maximum, max(minimum, rate * horizon * streams / everyone, tokens))
            tokens -= amount
        self.tokens, self.stamp = min(capacity, tokens), now
        self.calls.append((lessee, streams, amount, give_back))
        eventlet.sleep(self.rtt / 2)
        return amount, max(0.0, -self.tokens / rate), everyone


def run_streams(buckets: list[SharedBucket], starts: list[float], seconds: float,
                size: int = 16 * CHUNK, hop: bool = True) -> tuple[float, list[list[float]]]:
    """Streams GETting ``size`` bytes over and over, each GET on the next worker (``hop``).

    Returns the start time and each stream's chunk times."""
    t0 = time.monotonic()
    times: list[list[float]] = [[] for _ in starts]

    def stream(n: int, start: float) -> None:
        eventlet.sleep(start)
        worker = n
        while time.monotonic() < t0 + seconds:
            body = buckets[worker % len(buckets)].stream(size)
            try:
                for _ in range(size // CHUNK):
                    body.take(CHUNK)
                    times[n].append(time.monotonic())
            finally:
                body.close()
            worker += hop

    for thread in [eventlet.spawn(stream, n, start) for n, start in enumerate(starts)]:
        thread.wait()
    return t0, times


def rate_between(times: list[float], start: float, end: float) -> float:
    return sum(CHUNK for t in times if start <= t < end) / (end - start)


def workers(store: SlowStore | None, count: int, rate: float, share: float) -> list[SharedBucket]:
    return [SharedBucket(store, "AUTH_t1", "get", f"w{n}", rate, share, 0.05)
            for n in range(count)]


@pytest.mark.parametrize("count", [1, 2, 4])
def test_streams_moving_between_workers_get_the_rate_fairly(count):
    """Each GET lands on another worker, the round trip is as long as a GET: the total
    holds the rate, shared evenly, where per-worker buckets got half of it."""
    rate = 20 * MB
    t0, times = run_streams(workers(SlowStore(0.04), count, rate, rate / count),
                            [0, 0, 0], seconds=2.5)
    rates = [rate_between(t, t0 + 1, t0 + 2.5) for t in times]
    assert sum(rates) == pytest.approx(rate, rel=0.08), rates
    assert sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)) >= 0.95, rates


def test_a_new_stream_gets_its_share_at_once_and_the_total_holds():
    rate = 20 * MB
    t0, times = run_streams(workers(SlowStore(0.04), 2, rate, rate / 2), [0, 0, 1.0],
                            seconds=2.0)
    first = rate_between(times[2], t0 + 1.0, t0 + 1.5)
    assert first == pytest.approx(rate / 3, rel=0.3), "neither stalled nor unshaped"
    assert sum(rate_between(t, t0 + 1.0, t0 + 2.0) for t in times) == pytest.approx(
        rate, rel=0.08)


@pytest.mark.parametrize("rate", [1 * MB, 100 * MB])
def test_a_worker_is_charged_exactly_what_its_streams_moved_and_leaves_when_idle(rate):
    """Slow or fast (leases, or bytes moved on credit while a lease is under way), what
    the bucket is charged once the worker is idle is what the streams moved."""
    store = SlowStore(0.01)
    bucket = workers(store, 1, rate, rate)[0]
    _, times = run_streams([bucket], [0], seconds=0.01, size=8 * CHUNK)
    eventlet.sleep(0.05)
    lessee, streams, _, _ = store.calls[-1]
    assert (lessee, streams) == ("w0", 0), "left the lessees"
    assert bucket.held() == 0 and store.lessees == {}
    charged = sum(amount - back for _, _, amount, back in store.calls)
    assert charged == pytest.approx(len(times[0]) * CHUNK)
    if rate < 10 * MB:
        # At 100 MB/s the bytes moved on credit while a lease is under way (a 10 ms
        # round trip: 1 MB, more on a loaded machine) exceed a GET's length, and the
        # next lease pays them by design: only a slow stream shows the length bound.
        assert max(amount for _, _, amount, _ in store.calls) <= 8 * CHUNK, \
            "never past the length"


def test_a_failed_lease_falls_back_to_the_workers_share_then_retries():
    store = SlowStore(0.005)
    store.fail = True
    bucket = workers(store, 1, 10 * MB, 1 * MB)[0]
    t0, times = run_streams([bucket], [0], seconds=0.5, size=4 * CHUNK, hop=False)
    moved = rate_between(times[0], t0, t0 + 0.5)
    assert moved == pytest.approx(1 * MB, rel=0.25), "the worker's own share, not refused"
    assert not bucket.shared and bucket.down_until > time.monotonic() + RETRY - 1
    store.fail = False
    bucket.down_until = time.monotonic()  # as RETRY seconds later
    t0, times = run_streams([bucket], [0], seconds=0.5, size=4 * CHUNK, hop=False)
    assert rate_between(times[0], t0 + 0.1, t0 + 0.5) == pytest.approx(10 * MB, rel=0.15)


def test_a_body_longer_than_its_length_still_moves_at_the_rate():
    bucket = workers(SlowStore(0.005), 1, 10 * MB, 10 * MB)[0]
    body = bucket.stream(2 * CHUNK)
    started = time.monotonic()
    for _ in range(40):
        body.take(CHUNK)
    body.close()
    # Throttled past its declared length (never faster than the rate); a loaded
    # machine only makes it slower, so the upper bound is loose.
    elapsed, paced = time.monotonic() - started, 40 * CHUNK / (10 * MB)
    assert 0.75 * paced <= elapsed < 4 * paced


def test_a_stalled_redis_does_not_stop_the_streams_and_is_charged_when_it_answers():
    """While a lease is late the streams go on at their part; the bucket is charged after."""
    rate = 10 * MB
    store = SlowStore(0.002)
    bucket = workers(store, 1, rate, rate)[0]
    eventlet.spawn_after(0.5, setattr, store, "stall", 0.4)
    t0, times = run_streams([bucket], [0, 0], seconds=1.0, hop=False)
    assert sum(rate_between(t, t0 + 0.45, t0 + 0.95) for t in times) == pytest.approx(
        rate, rel=0.15), "through the stall"
    eventlet.sleep(0.05)
    charged = sum(amount - back for _, _, amount, back in store.calls)
    assert charged == pytest.approx(sum(len(t) for t in times) * CHUNK)


@pytest.mark.parametrize("fail", [False, True], ids=["shared", "own bucket"])
def test_fast_streams_never_sleep_under_the_hubs_resolution_and_keep_the_rate(fail,
                                                                             monkeypatch):
    """64 KiB chunks at 125 MB/s are 0.5 ms apart: Swift's poll hub truncates such a
    sleep to a 0 ms poll and spins until it is due. Waits that short are not slept; the
    bytes stay counted, so the next wait is longer and the rate still holds."""
    from iostack.swift_middleware import shared_bucket

    slept: list[float] = []
    green_sleep = eventlet.sleep
    monkeypatch.setattr(shared_bucket.eventlet, "sleep",
                        lambda seconds=0: (slept.append(seconds), green_sleep(seconds))[1])
    store = SlowStore(0.002)
    store.fail = fail
    rate = 125 * MB
    bucket = workers(store, 1, rate, rate)[0]
    t0, times = run_streams([bucket], [0], seconds=0.6, size=64 * CHUNK, hop=False)
    # Not counted: yields (0: the streams' start), SlowStore's round trips, the grace.
    waits = [s for s in slept if s not in (0, 0.002 / 2, shared_bucket.GRACE)]
    assert waits and min(waits) >= shared_bucket.MIN_SLEEP, sorted(waits)[:5]
    assert rate_between(times[0], t0 + 0.2, t0 + 0.6) == pytest.approx(rate, rel=0.1)
