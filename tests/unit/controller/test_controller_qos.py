"""The global SLO controller's arithmetic: caps, minimums, max-min fairness, per-proxy split."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iostack.controller.qos import QosController, allocate, split
from iostack.monitoring.aggregator import Interval

rates = st.floats(min_value=0, max_value=1e9, allow_nan=False)
scopes = st.dictionaries(st.sampled_from("abcdef"), rates, min_size=1)


@settings(max_examples=300, deadline=None)
@given(demand=scopes, data=st.data(), capacity=st.floats(min_value=1, max_value=2e9))
def test_allocation_keeps_caps_capacity_and_minimums(demand, data, capacity):
    names = sorted(demand)
    caps = data.draw(st.dictionaries(st.sampled_from(names), rates))
    minimums = data.draw(st.dictionaries(st.sampled_from(names), rates))
    shares = data.draw(st.dictionaries(st.sampled_from(names),
                                       st.floats(min_value=0.1, max_value=10)))
    alloc = allocate(demand, caps, minimums, shares, capacity)
    assert sum(alloc.values()) <= capacity * (1 + 1e-9) + 1e-6
    for t, rate in alloc.items():
        assert rate >= -1e-9
        if t in caps:
            assert rate <= caps[t] * (1 + 1e-9) + 1e-6
    wanted_minimums = sum(min(minimums.get(t, 0), demand[t], caps.get(t, float("inf")))
                          for t in names)
    if wanted_minimums <= capacity:
        for t in names:
            floor = min(minimums.get(t, 0), demand[t], caps.get(t, float("inf")))
            assert alloc[t] >= floor * (1 - 1e-9) - 1e-6


def test_spare_capacity_is_shared_max_min_fairly_by_share():
    alloc = allocate({"small": 1, "a": 100, "b": 100}, {}, {}, {}, 31)
    assert alloc["small"] == pytest.approx(1) and alloc["a"] == pytest.approx(15)
    weighted = allocate({"gold": 100, "bronze": 100}, {}, {}, {"gold": 4}, 50)
    assert weighted["gold"] == pytest.approx(40) and weighted["bronze"] == pytest.approx(10)
    # Minimum first, then fairness among the rest; a cap leaves its spare to others.
    mixed = allocate({"min": 100, "x": 100, "capped": 100}, {"capped": 5}, {"min": 60}, {}, 100)
    assert mixed == pytest.approx({"min": 60 + 17.5, "x": 17.5, "capped": 5})
    # Capacity nobody asked for is handed out too, up to the caps.
    idle = allocate({"capped": 1, "free": 1}, {"capped": 40}, {}, {}, 100)
    assert idle == pytest.approx({"capped": 40, "free": 60})


def test_minimums_scale_down_when_capacity_cannot_hold_them():
    alloc = allocate({"a": 100, "b": 100}, {}, {"a": 60, "b": 60}, {}, 60)
    assert alloc == pytest.approx({"a": 30, "b": 30})


@given(total=st.floats(min_value=0, max_value=1e9),
       wants=st.dictionaries(st.text(min_size=1, max_size=3), rates, min_size=1, max_size=6))
def test_split_adds_up_to_the_total_and_never_starves_a_worker(total, wants):
    parts = split(total, wants)
    assert sum(parts.values()) == pytest.approx(total, rel=1e-9, abs=1e-6)
    assert all(p >= total * 0.05 / len(wants) - 1e-6 for p in parts.values())


def test_split_follows_demand():
    parts = split(100, {"busy": 1000, "idle": 0})
    assert parts["busy"] == pytest.approx(97.5) and parts["idle"] == pytest.approx(2.5)
    assert split(100, {"p1": 10, "p2": 10}) == pytest.approx({"p1": 50, "p2": 50})


class Published:
    def __init__(self) -> None:
        self.messages: list[dict] = []

    def publish(self, key: str, message: dict, items: int = 1) -> None:
        self.messages.append(message)


def test_controller_splits_a_cap_and_shifts_it_to_the_busy_proxy(redis_client, keys, store,
                                                                 reader):
    store.submit("FOR TENANT t1 DO SET bandwidth WITH get=10MiBps")
    assert reader.wait_version(int(redis_client.get(keys.version)))
    published = Published()
    qos = QosController(redis_client, keys, reader.resolve, published, {})

    def interval(p1: int, p2: int) -> Interval:
        out = Interval("proxy", 1.0, 1.0, sources={"p1", "p2"})
        out.by_source = {("p1", "AUTH_t1", "c"): [0, p1, 1], ("p2", "AUTH_t1", "c"): [0, p2, 1]}
        return out

    cap = 10 * 2**20
    qos.on_interval(interval(cap // 2, cap // 2))
    first = published.messages[-1]["sources"]
    assert first["p1"]["AUTH_t1"]["get"] + first["p2"]["AUTH_t1"]["get"] == pytest.approx(cap)
    # p2 goes quiet: within a few intervals nearly all of the cap moves to p1.
    for _ in range(3):
        assigned = published.messages[-1]["sources"]["p1"]["AUTH_t1"]["get"]
        qos.on_interval(interval(int(assigned), 0))
    last = published.messages[-1]["sources"]
    assert last["p1"]["AUTH_t1"]["get"] >= 0.9 * cap
    assert last["p1"]["AUTH_t1"]["get"] + last["p2"]["AUTH_t1"]["get"] == pytest.approx(cap)
    status = qos.status()["AUTH_t1"]
    assert status["get"]["assigned"] == pytest.approx(cap) and status["slo"]["mode"] == "max"
    # A stream starts on p2, which holds only the floor and is pinned at it:
    # one interval later the two workers share the cap equally.
    floor = int(last["p2"]["AUTH_t1"]["get"])
    qos.on_interval(interval(int(last["p1"]["AUTH_t1"]["get"]), floor))
    shared = published.messages[-1]["sources"]
    assert shared["p2"]["AUTH_t1"]["get"] == pytest.approx(cap / 2, rel=0.01)
    # Light traffic below its part (not pinned) does not take half from a busy worker.
    qos.on_interval(interval(int(shared["p1"]["AUTH_t1"]["get"]), 1000))
    qos.on_interval(interval(int(published.messages[-1]["sources"]["p1"]["AUTH_t1"]["get"]),
                             1000))
    light = published.messages[-1]["sources"]
    assert light["p1"]["AUTH_t1"]["get"] >= 0.9 * cap
