"""The metric-driven control loop on the real all-in-one (paper, Fig. 4).

Requests through the real proxy are counted by the metric middleware,
published to RabbitMQ, aggregated by the controller, and the policy actors
switch filters on (and TRANSIENT ones off) in the real policy store, which
the data path picks up.
"""

from __future__ import annotations

import time
import uuid

import pytest
from loop_helpers import BODY, Writer, filters_stored, paced, wait_for_state

pytestmark = pytest.mark.integration


@pytest.fixture
def t2(swift_for):
    return swift_for("t2")


@pytest.fixture
def writer(t2):
    container = f"loop-{uuid.uuid4().hex[:8]}"
    t2.put_container(container)
    return Writer(t2, container)


def test_compression_comes_on_by_itself_past_three_puts_per_second(
        aio, policies, writer, stored):
    (pid,) = policies.add("FOR TENANT t2 WHEN PUTS_SEC > 3 DO SET COMPRESSION")
    paced(1, 3, writer.put)
    fast_from = time.time()
    paced(2, 2, writer.put)
    paced(6, 3, writer.put)
    paced(10, 3, writer.put)
    state = wait_for_state(policies.client, pid, "tenant:AUTH_t2", "enforced", 5)
    crossing = state["interval_applied"]  # start of the first interval over 3 PUTs/s
    assert crossing >= fast_from - 1, "enforced before the load went past 3 PUTs/s"
    assert state["values"]["PUTS_SEC"] > 3
    # Reaction: from the end of that interval to the rules being in the store.
    assert state["applied"] - (crossing + 1) < 2.0
    before = [n for t, n in writer.written if t < crossing]
    after = [n for t, n in writer.written if t > state["applied"] + 1.0]
    assert len(before) >= 3 and len(after) >= 10
    for name in before:
        assert filters_stored(stored, "AUTH_t2", writer.container, name) == [], name
    for name in after:
        assert filters_stored(stored, "AUTH_t2", writer.container, name) == ["compression"]
    for _, name in writer.written:
        assert writer.conn.get_object(writer.container, name)[1] == BODY


def test_transient_filter_comes_on_under_load_and_off_after_it(aio, policies, writer, stored):
    (pid,) = policies.add(f"FOR CONTAINER t2/{writer.container} WHEN PUTS_SEC > 3 "
                          f"DO SET COMPRESSION TRANSIENT")
    target = f"container:AUTH_t2/{writer.container}"
    paced(8, 4, writer.put)
    on = wait_for_state(policies.client, pid, target, "enforced", 5)
    high = [n for t, n in writer.written if t > on["applied"] + 1.0]
    assert high and all(filters_stored(stored, "AUTH_t2", writer.container, n)
                        == ["compression"] for n in high)
    # Load stops: reverted once the condition has stayed false for the hold time.
    off = wait_for_state(policies.client, pid, target, "reverted", 15)
    assert off["since"] - on["applied"] >= 5.0 - 0.5  # the stack's actor_hold default
    assert policies.client.policy(pid)["status"] == "stored"
    time.sleep(1.0)  # the policy cache hears of it well within this
    writer.put()
    assert filters_stored(stored, "AUTH_t2", writer.container, writer.written[-1][1]) == []
    for _, name in writer.written:
        assert writer.conn.get_object(writer.container, name)[1] == BODY


def test_and_or_conditions(aio, policies, t2):
    both = Writer(t2, f"and-{uuid.uuid4().hex[:8]}")
    either = Writer(t2, f"or-{uuid.uuid4().hex[:8]}")
    for w in (both, either):
        t2.put_container(w.container)
        w.put()
    (and_pid,) = policies.add(f"FOR CONTAINER t2/{both.container} "
                              f"WHEN PUTS_SEC > 3 AND GETS_SEC > 3 DO SET NOOP")
    (or_pid,) = policies.add(f"FOR CONTAINER t2/{either.container} "
                             f"WHEN PUTS_SEC > 1000 OR (GETS_SEC > 3 AND PUTS_SEC < 1) DO SET NOOP")
    and_target, or_target = (f"container:AUTH_t2/{w.container}" for w in (both, either))
    # Only PUTs on one, only GETs on the other.
    paced(6, 3, lambda i: (both.put(), either.get()))
    wait_for_state(policies.client, or_pid, or_target, "enforced", 4)
    wait_for_state(policies.client, and_pid, and_target, "idle", 1)
    puts = policies.client.metric_series("PUTS_SEC", f"AUTH_t2/{both.container}", last=5)
    assert max(v["value"] for v in puts["values"]) > 3, "PUTs alone do not satisfy AND"
    paced(6, 3, lambda i: (both.put(), both.get()))
    wait_for_state(policies.client, and_pid, and_target, "enforced", 4)


def test_metrics_api_and_watch_view(aio, policies, writer):
    from iostack.controller.formatting import monitoring_view

    paced(5, 2, writer.put)
    time.sleep(1.6)
    series = policies.client.metric_series("PUTS_SEC", f"t2/{writer.container}", last=5)
    assert max(v["value"] for v in series["values"]) >= 3
    put_bw = policies.client.metric_series("PUT_BW", "AUTH_t2", last=5)["values"]
    assert max(v["value"] for v in put_bw) >= 3 * len(BODY)
    snapshot = policies.client.monitoring()
    assert snapshot["connected"] and snapshot["sources"]["proxy"]
    assert "TARGET" in monitoring_view(snapshot)
