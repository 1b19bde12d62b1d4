"""Token buckets and the QoS middleware's decisions, with a fake application and clock.

tests/integration/qos/test_qos.py measures the same shaping through a real Swift.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from fakeswift import FakeReader, FakeSwift, deny, request, rule, use_reader

from iostack.filters.builtin.bandwidth import scope_of
from iostack.filters.library import get_filter
from iostack.policy.reader import PolicyStoreUnavailable
from iostack.swift_middleware import qos, shared_bucket
from iostack.swift_middleware.qos import QosMiddleware, Shaper, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_bucket_holds_a_burst_then_paces_at_its_rate():
    clock = Clock()
    bucket = TokenBucket(1000, burst=0.1, clock=clock)  # holds 100 units
    assert bucket.reserve(100) == 0
    assert bucket.reserve(50) == pytest.approx(0.05)
    assert bucket.reserve(50) == pytest.approx(0.10), "queued behind the first debt"
    clock.now = 0.10
    assert bucket.reserve(0) == 0
    clock.now = 10  # idle time never saves more than the burst
    assert bucket.reserve(100) == 0 and bucket.reserve(100) == pytest.approx(0.1)


def test_rate_changes_keep_the_debt_and_refunds_return_tokens():
    clock = Clock()
    bucket = TokenBucket(100, burst=0.01, clock=clock)
    bucket.reserve(1)
    assert bucket.reserve(10) == pytest.approx(0.1)
    bucket.set_rate(1000)
    assert bucket.reserve(0) == pytest.approx(0.01)
    bucket.refund(10)
    assert bucket.reserve(0) == 0


def test_a_reservation_queued_at_a_low_rate_is_covered_sooner_when_the_rate_rises():
    """A worker pacing on its own at a floor of 25 kB/s (a Redis outage) queues three
    64 KiB chunks: about 8 s at that rate. The next assignment gives it 2 MB/s: the
    last chunk's wait is what is left of the debt at the new rate, not the 8 s."""
    clock = Clock()
    bucket = TokenBucket(25_000, burst=0.05, clock=clock)
    tickets = [bucket.ticket(65536) for _ in range(3)]
    assert bucket.wait(tickets[-1]) == pytest.approx((3 * 65536 - 1250) / 25_000)
    clock.now = 1.0
    bucket.set_rate(2_000_000)
    assert bucket.wait(tickets[-1]) == pytest.approx((3 * 65536 - 1250 - 25_000) / 2e6)
    assert bucket.wait(tickets[0]) == pytest.approx((65536 - 1250 - 25_000) / 2e6)
    clock.now = 1.1
    assert bucket.wait(tickets[-1]) == 0


def test_scope_is_the_container_only_when_a_container_rule_set_it():
    sources = [{"level": "tenant", "target": "AUTH_t1"}]
    assert scope_of(sources, "AUTH_t1", "logs") == "AUTH_t1"
    sources.append({"level": "container", "target": "AUTH_t1/logs"})
    assert scope_of(sources, "AUTH_t1", "logs") == "AUTH_t1/logs"
    assert scope_of(sources, "AUTH_t1", None) == "AUTH_t1"


@pytest.mark.parametrize(("target", "level"), [("AUTH_t1/logs", "container"),
                                               ("*/logs", "container"),
                                               ("AUTH_t1/logs/a.csv", "object")])
def test_a_multipart_part_draws_from_the_bucket_the_tenant_wrote_to(target, level):
    """Regression: a part stored in <bucket>+segments under the bucket's rule was
    shaped by a bucket of its own (AUTH_t1/logs+segments), doubling the cap."""
    sources = [{"level": "tenant", "target": "AUTH_t1"}, {"level": level, "target": target}]
    assert scope_of(sources, "AUTH_t1", "logs+segments") == "AUTH_t1/logs"
    assert scope_of(sources, "AUTH_t1", "logs") == "AUTH_t1/logs"
    own = [{"level": "container", "target": "AUTH_t1/logs+segments"}]
    assert scope_of(own, "AUTH_t1", "logs+segments") == "AUTH_t1/logs+segments"


def test_assignments_override_policy_caps_and_minimums_shape_nothing_alone():
    shaper = Shaper(0.05)
    cap = get_filter("bandwidth").validate({"get": 1000, "ops": 5})
    floor = get_filter("bandwidth").validate({"get": 1000, "mode": "min"})
    assert shaper.rate("AUTH_t1", "get", cap) == 1000 and shaper.rate("AUTH_t1", "put", cap) == 0
    assert shaper.rate("AUTH_t1", "get", floor) == 0
    shaper.assign({"sources": {"me": {"AUTH_t1": {"get": 400, "ops": 2}},
                               "other": {"AUTH_t1": {"get": 600}}}}, "me")
    assert shaper.rate("AUTH_t1", "get", cap) == 400 and shaper.rate("AUTH_t1", "ops", cap) == 2
    shaper.assign({"sources": {"other": {}}}, "me")  # not for me: keep the last one
    assert shaper.rate("AUTH_t1", "get", cap) == 400


def test_an_assignment_reaches_the_workers_own_buckets():
    """Requests/s are paced per worker: its bucket follows its part."""
    shaper = Shaper(0.05)
    shaper.assign({"sources": {"me": {"AUTH_t1": {"ops": 3}}}}, "me")
    held = shaper.bucket("AUTH_t1", "ops", shaper.rate("AUTH_t1", "ops", None))
    assert held.rate == 3
    shaper.assign({"sources": {"me": {"AUTH_t1": {"ops": 60}}}}, "me")
    assert held.rate == 60
    shaper.assign({"sources": {"me": {}}}, "me")  # no part for it now: keep pacing
    assert held.rate == 60


def app(env, start_response):
    data = env["wsgi.input"].read()
    start_response("200 OK", [])
    return [b"a" * 1000, data]


@pytest.fixture
def middleware(monkeypatch):
    mw = QosMiddleware(app, {"burst": "0.01", "shared_buckets": "false"})
    slept = []
    monkeypatch.setattr(qos.eventlet, "sleep", slept.append)
    mw.slept = slept
    return mw


def call(mw, method="GET", body=b""):
    env = {"REQUEST_METHOD": method, "PATH_INFO": "/v1/AUTH_t1/c/o",
           "wsgi.input": io.BytesIO(body)}
    statuses = []
    out = b"".join(mw(env, lambda status, headers: statuses.append((status, dict(headers)))))
    return statuses[0], out


def test_over_the_ops_limit_past_the_wait_is_429_with_retry_after(middleware, monkeypatch):
    params = get_filter("bandwidth").validate({"ops": 2, "wait": 0.6})
    monkeypatch.setattr(middleware, "_policy", lambda view: ("AUTH_t1", params))
    statuses = [call(middleware)[0][0] for _ in range(3)]
    # One token in the bucket, then one 0.5 s away (waited), then 1.0 s away (> 0.6 s).
    assert statuses[:2] == ["200 OK"] * 2 and statuses[2].startswith("429")
    (_, headers), body = call(middleware)
    assert headers["Retry-After"] == "1" and b"AUTH_t1 is over its limit of 2" in body
    assert middleware.slept == pytest.approx([0.5], abs=0.05)


def test_bodies_are_paced_both_ways_and_untouched(monkeypatch):
    shaped = Shaped(monkeypatch, app)  # bytes wait until their time comes: a clock is needed
    params = get_filter("bandwidth").validate({"get": 10_000, "put": 1000})
    monkeypatch.setattr(shaped.mw, "_policy", lambda view: ("AUTH_t1", params))
    status, out = call(shaped.mw, "PUT", b"p" * 500)
    assert out == b"a" * 1000 + b"p" * 500
    assert shaped.slept and sum(shaped.slept) == pytest.approx(0.49, abs=0.02)
    shaped.slept.clear()
    assert call(shaped.mw, "GET")[1] == b"a" * 1000
    assert sum(shaped.slept) == pytest.approx(0.099, abs=0.02)


def test_no_policy_no_assignment_passes_through(middleware, monkeypatch):
    monkeypatch.setattr(middleware, "_policy", lambda view: ("AUTH_t1", None))
    assert call(middleware, "PUT", b"x" * 100000)[1].endswith(b"x" * 100000)
    assert middleware.slept == []


# -- through the request view, over a fake Swift and a fake reader ------------------

class Shaped:
    """``iostack_qos`` over a fake Swift (or ``swift``), its buckets on a clock that
    sleeping advances."""

    def __init__(self, monkeypatch, swift: Any = None) -> None:
        self.clock = Clock()
        self.slept: list[float] = []
        self.swift = FakeSwift()
        self.reader = FakeReader()
        use_reader(monkeypatch, self.reader)
        for module in (qos, shared_bucket):
            monkeypatch.setattr(module, "TokenBucket", lambda rate, burst, *_: TokenBucket(
                rate, burst, clock=self.clock))
        monkeypatch.setattr(qos.eventlet, "sleep", self.sleep)
        self.mw = QosMiddleware(swift or self.swift, {"burst": "0.01", "shared_buckets": "false"})

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.clock.now += seconds


@pytest.fixture
def shaped(monkeypatch) -> Shaped:
    return Shaped(monkeypatch)


def test_a_get_rate_paces_the_apps_body_to_that_rate(shaped):
    shaped.reader.levels = [rule("bandwidth", get=100_000)]
    chunks = [bytes([n]) * 10_000 for n in range(100)]
    shaped.swift.register("GET", "/v1/AUTH_t1/c/o", 200, {}, chunks)
    resp = request(shaped.mw, "GET", "/v1/AUTH_t1/c/o")
    assert resp.body == b"".join(chunks)
    # 1 MB at 100 kB/s, less the 1 kB burst, on the fake clock; paced chunk by chunk.
    assert shaped.clock.now == pytest.approx((1_000_000 - 1000) / 100_000)
    assert len(shaped.slept) == 100 and max(shaped.slept) == pytest.approx(0.1, abs=0.011)


def test_a_put_rate_paces_the_reads_of_the_client_body(shaped):
    shaped.reader.levels = [rule("bandwidth", put=50_000)]
    body = b"p" * 200_000
    assert request(shaped.mw, "PUT", "/v1/AUTH_t1/c/o", body).status_int == 201
    assert shaped.swift.objects["/v1/AUTH_t1/c/o"].body == body
    assert shaped.clock.now == pytest.approx((200_000 - 500) / 50_000)


def test_anonymous_requests_do_not_drain_a_tenants_ops_bucket(shaped):
    shaped.reader.levels = [rule("bandwidth", ops=1, wait=0.5)]
    for _ in range(5):
        assert request(shaped.mw, "GET", "/v1/AUTH_t1/c/o",
                       **{"swift.authorize": deny}).status_int == 401
    assert shaped.reader.requests == [] and shaped.slept == []
    # The tenant's bucket is still full: one request now, the next is a second away (> wait).
    assert request(shaped.mw, "GET", "/v1/AUTH_t1/c/o").status_int == 404
    assert request(shaped.mw, "GET", "/v1/AUTH_t1/c/o").status_int == 429
    assert shaped.slept == []


def test_an_unreadable_policy_store_serves_unshaped(shaped):
    shaped.reader.levels = [rule("bandwidth", get=1000)]
    shaped.reader.error = PolicyStoreUnavailable("Redis is down")
    shaped.swift.register("GET", "/v1/AUTH_t1/c/o", 200, {}, [b"x" * 100_000])
    assert len(request(shaped.mw, "GET", "/v1/AUTH_t1/c/o").body) == 100_000
    assert shaped.slept == []


# -- shared buckets: rates from the assignments, streams with their lengths -------------

def test_a_shared_bucket_runs_at_the_sum_of_the_parts_and_falls_back_to_this_workers():
    shaper = Shaper(0.05)  # no Redis: every bucket uses its fallback
    cap = get_filter("bandwidth").validate({"get": 1000})
    held = shaper.shared("AUTH_t1", "get", cap)
    assert (held.rate, held.own.rate) == (1000, 1000), "before any assignment: the policy's cap"
    assert shaper.shared("AUTH_t1", "put", cap) is None
    shaper.assign({"sources": {"me": {"AUTH_t1": {"get": 100}},
                               "other": {"AUTH_t1": {"get": 200}}}}, "me")
    assert (held.rate, held.own.rate) == (300, 100), "a GET under way follows the assignment"
    shaper.assign({"sources": {"me": {}, "other": {"AUTH_t2": {"get": 50}}}}, "me")
    carried = shaper.shared("AUTH_t2", "get", None)
    assert carried is not None and carried.rate == 50, "a scope other workers carry is shaped"


class Recorded:
    """A shared bucket that records the streams the middleware opens on it."""

    def __init__(self) -> None:
        self.streams: list[dict] = []

    def stream(self, length):
        record = {"length": length, "taken": 0, "closed": False}
        self.streams.append(record)

        class Stream:
            def take(self, amount):
                record["taken"] += amount

            def close(self):
                record["closed"] = True

        return Stream()


def test_streams_are_opened_with_their_body_length_and_closed_at_the_end(shaped, monkeypatch):
    bucket = Recorded()
    monkeypatch.setattr(Shaper, "shared", lambda *_: bucket)
    shaped.reader.levels = [rule("bandwidth", get=1000, put=1000)]
    assert request(shaped.mw, "PUT", "/v1/AUTH_t1/c/o", b"p" * 500).status_int == 201
    assert bucket.streams == [{"length": 500, "taken": 500, "closed": True}]
    assert request(shaped.mw, "GET", "/v1/AUTH_t1/c/o").body == b"p" * 500
    assert bucket.streams[1] == {"length": 500, "taken": 500, "closed": True}
    shaped.swift.register("GET", "/v1/AUTH_t1/c/chunked", 200, {}, [b"x" * 1000] * 3)
    assert len(request(shaped.mw, "GET", "/v1/AUTH_t1/c/chunked").body) == 3000
    assert bucket.streams[2] == {"length": None, "taken": 3000, "closed": True}, \
        "no Content-Length: a stream of unknown length"
