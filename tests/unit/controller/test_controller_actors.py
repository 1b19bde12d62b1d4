"""Policy actors on a real Redis: enforce when the condition holds, revert TRANSIENT ones."""

from __future__ import annotations

import pytest

from iostack.controller.actors import ActorManager, holds
from iostack.monitoring.aggregator import Interval, Totals


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def interval(start: float = 999.0, **per_account: dict) -> Interval:
    """An interval where each account did what its dict says (``puts=5, gets=1``)."""
    out = Interval("proxy", start, 1.0)
    for account, counts in per_account.items():
        totals = Totals()
        totals.add_sample({"ops": {"PUT": counts.get("puts", 0), "GET": counts.get("gets", 0)}})
        out.per_key[(account, "c")] = totals
    return out


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def actors(redis_client, keys, store, registries, clock):
    return ActorManager(redis_client, keys, store, lambda: registries.vocabulary().groups,
                        hold=3.0, clock=clock)


def pipeline(store, path: str = "/v1/AUTH_t1/c/o") -> list[str]:
    return [e.filter for e in store.explain("PUT", path)[1].pipeline]


def add(store, text: str) -> str:
    return store.submit(text)["policies"][0]["id"]


def test_conditions_with_and_or_and_missing_values():
    cond = {"op": "OR", "left": {"op": "AND",
                                 "left": {"metric": "PUTS_SEC", "op": ">", "value": 3},
                                 "right": {"metric": "GETS_SEC", "op": "<=", "value": 1}},
            "right": {"metric": "LATENCY", "op": ">", "value": 0.5}}
    assert holds(cond, {"PUTS_SEC": 4, "GETS_SEC": 1, "LATENCY": None})
    assert not holds(cond, {"PUTS_SEC": 4, "GETS_SEC": 2, "LATENCY": None})
    assert holds(cond, {"PUTS_SEC": 0, "GETS_SEC": 9, "LATENCY": 0.6})
    assert not holds(cond, {"PUTS_SEC": 3, "GETS_SEC": 0, "LATENCY": 0.5})


def test_enforced_when_the_condition_holds_and_kept_without_transient(store, actors, clock):
    pid = add(store, "FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression")
    actors.on_interval(interval(AUTH_t1={"puts": 3}))
    assert pipeline(store) == []
    assert actors.states()[pid]["targets"]["tenant:AUTH_t1"]["state"] == "idle"
    actors.on_interval(interval(1000.0, AUTH_t1={"puts": 4}))
    assert pipeline(store) == ["compression"]
    state = actors.states()[pid]["targets"]["tenant:AUTH_t1"]
    assert state["state"] == "enforced" and state["interval_applied"] == 1000.0
    for n in range(5):
        clock.now += 1
        actors.on_interval(interval(1001.0 + n, AUTH_t1={"puts": 0}))
    assert pipeline(store) == ["compression"], "not TRANSIENT: stays on"


def test_transient_reverts_after_the_hold_time_only(store, actors, clock):
    pid = add(store, "FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression TRANSIENT")
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    assert pipeline(store) == ["compression"]
    # A dip shorter than the hold time does not flap.
    clock.now += 1
    actors.on_interval(interval(AUTH_t1={"puts": 0}))
    clock.now += 1
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    clock.now += 2.5
    actors.on_interval(interval(AUTH_t1={"puts": 0}))
    clock.now += 2.5
    actors.on_interval(interval(AUTH_t1={"puts": 0}))
    assert pipeline(store) == ["compression"]
    clock.now += 0.5
    actors.on_interval(interval(AUTH_t1={"puts": 0}))
    assert pipeline(store) == []
    assert actors.states()[pid]["targets"]["tenant:AUTH_t1"]["state"] == "reverted"
    assert store.get(pid)["status"] == "stored"
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    assert pipeline(store) == ["compression"]


def test_each_target_is_enforced_on_its_own_metrics(store, actors, registries):
    registries.add_tenant("t2")
    add(store, "FOR TENANT t1, TENANT t2 WHEN PUTS_SEC > 3 DO SET compression")
    actors.on_interval(interval(AUTH_t1={"puts": 1}, AUTH_t2={"puts": 5}))
    assert pipeline(store, "/v1/AUTH_t1/c/o") == []
    assert pipeline(store, "/v1/AUTH_t2/c/o") == ["compression"]


def test_groups_sum_their_tenants(store, actors, registries):
    registries.add_tenant("t2")
    registries.put_group("busy", ["t1", "t2"])
    add(store, "FOR GROUP busy WHEN PUTS_SEC > 3 DO SET compression")
    actors.on_interval(interval(AUTH_t1={"puts": 2}, AUTH_t2={"puts": 2}, AUTH_t3={"puts": 9}))
    assert pipeline(store, "/v1/AUTH_t2/c/o") == ["compression"]


def test_deleting_a_policy_removes_its_rules_and_its_actor(store, actors):
    pid = add(store, "FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression")
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    store.delete(pid)
    assert pipeline(store) == []
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    assert pid not in actors.states()
    assert pipeline(store) == []


def test_a_restarted_manager_resumes_from_the_state_in_redis(redis_client, keys, store,
                                                             registries, actors, clock):
    pid = add(store, "FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression TRANSIENT")
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    clock.now += 1
    actors.on_interval(interval(AUTH_t1={"puts": 0}))  # false since now
    restarted = ActorManager(redis_client, keys, store, lambda: {}, hold=3.0, clock=clock)
    clock.now += 3
    restarted.on_interval(interval(AUTH_t1={"puts": 0}))
    assert pipeline(store) == [], "the hold time counted from before the restart"
    assert restarted.states()[pid]["targets"]["tenant:AUTH_t1"]["state"] == "reverted"


def test_one_failing_actor_does_not_stop_the_others(store, actors, monkeypatch):
    bad = add(store, "FOR TENANT t1 WHEN PUTS_SEC > 3 DO SET compression")
    good = add(store, "FOR CONTAINER t1/c WHEN PUTS_SEC > 3 DO SET noop")
    original = store.enforce

    def enforce(pid, target=None):
        if pid == bad:
            raise RuntimeError("store hiccup")
        return original(pid, target)

    monkeypatch.setattr(store, "enforce", enforce)
    actors.on_interval(interval(AUTH_t1={"puts": 9}))
    states = actors.states()
    assert "store hiccup" in states[bad]["error"]
    assert states[good]["targets"]["container:AUTH_t1/c"]["state"] == "enforced"
    assert pipeline(store) == ["noop"]
