"""Counters and aggregation: what proxies count merges into per-target metrics per interval."""

from __future__ import annotations

import pytest

from iostack.monitoring.aggregator import METRICS, Aggregator, Totals
from iostack.monitoring.counters import Window, bucket_of, bucket_upper, percentile


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def batch(source: str, start: float, samples: list[dict], stage: str = "proxy",
          lost: int = 0) -> dict:
    return {"v": 1, "source": source, "stage": stage, "start": start, "interval": 1.0,
            "lost": lost, "samples": samples}


def sample(account: str, container: str | None = None, puts: int = 0, gets: int = 0,
           bytes_in: int = 0, bytes_out: int = 0, active: int = 0, **extra) -> dict:
    return {"account": account, "container": container, "ops": {"PUT": puts, "GET": gets},
            "bytes_in": bytes_in, "bytes_out": bytes_out, "active": active, **extra}


def test_latency_buckets_bound_their_values_within_a_fifth():
    for seconds in (0.00005, 0.001, 0.0123, 0.5, 3.0):
        upper = bucket_upper(bucket_of(seconds))
        assert seconds <= upper * 1.0000001
        assert upper <= max(seconds * 1.2, 1e-4)
    hist = {bucket_of(0.010): 90, bucket_of(0.200): 10}
    assert percentile(hist, 0.5) == pytest.approx(bucket_upper(bucket_of(0.010)))
    assert percentile(hist, 0.95) == pytest.approx(bucket_upper(bucket_of(0.200)))
    assert percentile({}, 0.5) is None


def test_window_counts_bytes_ops_latency_and_active_requests_then_starts_empty():
    window = Window()
    key = ("AUTH_t1", "logs")
    window.started(key)
    window.started(key)
    window.transferred(key, received=100)
    window.transferred(key, sent=7)
    window.finished(key, "PUT", 0.02)
    (first,) = window.flush()
    assert first["account"] == "AUTH_t1" and first["container"] == "logs"
    assert first["ops"] == {"PUT": 1} and first["bytes_in"] == 100 and first["bytes_out"] == 7
    assert first["active"] == 1 and first["latency"]["PUT"]["count"] == 1
    # The request still in progress shows in the next interval with nothing else.
    (second,) = window.flush()
    assert second["ops"] == {} and second["active"] == 1
    window.finished(key, "GET", 0.01)
    assert window.flush()[0]["active"] == 0
    assert window.flush() == []


def test_intervals_close_once_every_live_source_reported():
    clock = Clock()
    agg = Aggregator(grace=0.5, clock=clock)
    closed = []
    agg.on_interval(closed.append)
    agg.add("k", batch("p1", 998.0, [sample("AUTH_t1", puts=1)]))  # p1 alone: closes at once
    agg.add("k", batch("p2", 998.0, [sample("AUTH_t1", puts=1)]))  # too late for 998
    assert [i.start for i in closed] == [998.0] and agg.late == 1
    agg.add("k", batch("p1", 999.0, [sample("AUTH_t1", puts=3)]))
    assert len(closed) == 1, "p2 is live: its batch is awaited"
    agg.add("k", batch("p2", 999.0, [sample("AUTH_t1", "c", puts=2, bytes_in=10)]))
    assert [i.start for i in closed] == [998.0, 999.0]
    assert closed[-1].value("PUTS_SEC", "AUTH_t1") == 5
    assert closed[-1].value("PUT_BW", "AUTH_t1/c") == 10


def test_a_silent_source_delays_an_interval_by_the_grace_only():
    clock = Clock()
    agg = Aggregator(grace=0.5, clock=clock)
    closed = []
    agg.on_interval(closed.append)
    agg.add("k", batch("p1", 998.0, []))
    agg.add("k", batch("p2", 998.0, []))
    agg.add("k", batch("p1", 999.0, [sample("AUTH_t1", puts=4)]))
    clock.now = 1000.4
    agg.tick()
    assert [i.start for i in closed] == [998.0]
    clock.now = 1000.5
    agg.tick()
    assert [i.start for i in closed] == [998.0, 999.0]
    assert closed[-1].sources == {"p1"}


def test_targets_tenants_containers_any_account_groups_and_everything():
    agg = Aggregator(clock=Clock())
    agg.add("k", batch("p1", 999.0, [
        sample("AUTH_t1", "logs", puts=2, gets=1, bytes_out=100),
        sample("AUTH_t1", "img", puts=1),
        sample("AUTH_t2", "logs", puts=4, active=3),
        sample("AUTH_t3", None, gets=5),
    ]))
    interval = agg.latest()
    assert interval.value("PUTS_SEC", "*") == 7
    assert interval.value("PUTS_SEC", "AUTH_t1") == 3
    assert interval.value("PUTS_SEC", "AUTH_t1/logs") == 2
    assert interval.value("PUTS_SEC", "*/logs") == 6
    assert interval.value("PUTS_SEC", ["AUTH_t1", "AUTH_t3"]) == 3
    assert interval.value("GETS_SEC", ["AUTH_t1", "AUTH_t3"]) == 6
    assert interval.value("OPS_SEC", "AUTH_t1") == 4
    assert interval.value("GET_BW", "AUTH_t1") == 100
    assert interval.value("ACTIVE_REQUESTS", "*") == 3
    assert interval.value("PUTS_SEC", "AUTH_nobody") == 0
    assert set(interval.targets()) == {"*", "AUTH_t1", "AUTH_t1/logs", "AUTH_t1/img",
                                       "AUTH_t2", "AUTH_t2/logs", "AUTH_t3"}


def test_latency_percentiles_come_from_the_merged_histograms_of_all_sources():
    fast = Window()
    slow = Window()
    for _ in range(90):
        fast.finished(("AUTH_t1", "c"), "GET", 0.005)
    for _ in range(10):
        slow.finished(("AUTH_t1", "c"), "GET", 0.5)
    agg = Aggregator(clock=Clock())
    agg.add("k", batch("p1", 999.0, fast.flush()))
    agg.add("k", batch("p1", 1000.0, slow.flush()))
    merged = Totals()
    for interval in agg.history["proxy"]:
        merged.merge(interval.totals(lambda key: True))
    assert merged.value("GET_LATENCY_P50", 1) == pytest.approx(bucket_upper(bucket_of(0.005)))
    assert merged.value("GET_LATENCY_P95", 1) == pytest.approx(bucket_upper(bucket_of(0.5)))
    assert merged.value("LATENCY", 1) == pytest.approx((90 * 0.005 + 10 * 0.5) / 100)
    assert merged.value("PUT_LATENCY_P95", 1) is None  # no PUT: no value, never 0


def test_every_builtin_metric_has_a_value_and_run_time_metrics_read_gauges():
    totals = Totals()
    totals.add_sample(sample("AUTH_t1", puts=1, latency={"PUT": {
        "count": 1, "sum": 0.1, "buckets": {str(bucket_of(0.1)): 1}}},
        gauges={"queue_depth": 7}))
    for metric in METRICS:
        assert totals.value(metric.name, 1.0) is not None or "GET" in metric.name
    assert totals.value("QUEUE_DEPTH", 1.0) == 7
    assert totals.value("UNKNOWN_ONE", 1.0) is None


def test_malformed_batches_are_refused_with_the_reason_and_change_nothing():
    agg = Aggregator(clock=Clock())
    with pytest.raises(ValueError, match="malformed metric batch"):
        agg.add("metrics.proxy.x", {"source": "p1", "samples": []})
    with pytest.raises(ValueError, match="malformed"):
        agg.add("k", batch("p1", 999.0, "not a list"))  # type: ignore[arg-type]
    assert agg.latest() is None and agg.received == 0


def test_series_and_lost_samples():
    agg = Aggregator(history=2, clock=Clock())
    for start, puts in ((997.0, 1), (998.0, 2), (999.0, 3)):
        agg.add("k", batch("p1", start, [sample("AUTH_t1", puts=puts)], lost=1))
    assert agg.series("PUTS_SEC", "AUTH_t1") == [(998.0, 2), (999.0, 3)]
    assert agg.series("PUTS_SEC", "AUTH_t1", last=1) == [(999.0, 3)]
    assert agg.lost == 3
