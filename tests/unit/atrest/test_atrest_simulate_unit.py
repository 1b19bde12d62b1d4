"""Simulation's pure parts: where a candidate's rules go, what it lists, the estimate's bound."""

from __future__ import annotations

import os
import random

from iostack.atrest.inspect import stored_object
from iostack.atrest.scan import Target
from iostack.atrest.simulate import Candidate, Projection, Sampled, _sample_one, with_candidate
from iostack.policy.resolve import Level, PipelineEntry, RequestInfo


def rule(level: str, target: str, filt: str = "compression", rid: str = "new-1.1",
         **extra) -> dict:
    return {"id": rid, "policy": rid.split(".")[0], "level": level, "target": target,
            "verb": "set", "filter": filt, "params": {}, "seq": 1, "index": 0} | extra


def test_candidate_rules_go_after_todays_at_their_level_and_only_where_they_apply():
    info = RequestInfo("PUT", "AUTH_t1", "logs", "a.csv", 10)
    today = [Level("tenant", "AUTH_t1", (rule("tenant", "AUTH_t1", "encryption", "P1.1",
                                              seq=7),))]
    candidate = Candidate({"new-1"}, [rule("tenant", "AUTH_t1"),
                                      rule("container", "AUTH_t1/logs", rid="new-1.2"),
                                      rule("container", "AUTH_t2/logs", rid="new-1.3"),
                                      rule("group", "gold", rid="new-1.4")])
    levels = with_candidate(today, candidate, info, {"gold": ["AUTH_t1"], "lead": ["AUTH_t2"]})
    assert [(lv.level, lv.target) for lv in levels] == [
        ("group", "gold"), ("tenant", "AUTH_t1"), ("container", "AUTH_t1/logs")]
    tenant = levels[1].rules
    assert [r["id"] for r in tenant] == ["P1.1", "new-1.1"]
    assert tenant[1]["seq"] > tenant[0]["seq"]


def test_a_stored_policy_already_in_force_is_not_added_twice():
    info = RequestInfo("PUT", "AUTH_t1", "logs", "a.csv", 10)
    in_force = rule("container", "AUTH_t1/logs", rid="P7.1")
    levels = with_candidate([Level("container", "AUTH_t1/logs", (in_force,))],
                            Candidate({"P7"}, [in_force]), info, {})
    assert [r["id"] for lv in levels for r in lv.rules] == ["P7.1"]


def test_a_candidate_lists_each_target_once_and_groups_as_their_tenants():
    candidate = Candidate({"new-1"}, [rule("tenant", "AUTH_t1"),
                                      rule("container", "AUTH_t1/logs"),
                                      rule("container", "*/logs"),
                                      rule("group", "gold")])
    assert candidate.targets({"gold": ["AUTH_t2"]}) == [
        Target("AUTH_t1"), Target(None, "logs"), Target("AUTH_t2")]
    assert Candidate({"g"}, [rule("global", "*"), rule("tenant", "AUTH_t1")]).targets({}) == \
        [Target(None)]


def _stored(n: int):
    return stored_object("a", "c", f"o{n}", {"Content-Length": "100"})


def test_the_estimate_is_exact_for_the_whole_population_and_bounded_for_a_sample():
    rng = random.Random(3)
    ratios = [rng.choice((0.1, 1.0)) for _ in range(400)]
    sizes = [rng.randint(1000, 50000) for _ in range(400)]
    whole = Projection(400, random.Random(0))
    for n in range(400):
        whole.offer(_stored(n), [])
    samples = [Sampled(x, x, [round(r * x)], 0.01) for x, r in zip(sizes, ratios, strict=True)]
    whole.population_bytes = sum(sizes)
    exact = whole.estimate(samples, ["compression"])
    truth = sum(round(r * x) for x, r in zip(sizes, ratios, strict=True))
    assert exact["changed_projected_bytes"] == truth and exact["error_bound_bytes"] == 0

    inside = 0
    for seed in range(40):
        pick = random.Random(seed).sample(range(400), 40)
        part = Projection(40, random.Random(seed), population=400,
                          population_bytes=sum(sizes))
        estimate = part.estimate([samples[i] for i in pick], ["compression"])
        assert estimate["sample_size"] == 40 and estimate["error_bound_bytes"] > 0
        inside += abs(estimate["changed_projected_bytes"] - truth) <= \
            estimate["error_bound_bytes"]
    assert inside >= 34  # a 95 % bound holds in most of 40 samples


def test_a_reservoir_keeps_a_uniform_sample_of_bounded_size():
    projection = Projection(10, random.Random(1))
    for n in range(1000):
        projection.offer(_stored(n), [])
    assert projection.population == 1000 and len(projection.reservoir) == 10
    assert sum(int(s.obj[1:]) for s, _ in projection.reservoir) > 10 * 100  # not the first ten


class OneObject:
    """``SwiftAccess.read`` of one body."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def read(self, account, container, obj, limit=None):
        return {}, self.body[:limit]


def test_a_sample_is_projected_as_the_proxy_stores_it():
    steps = [PipelineEntry("compression", {}, "proxy", False)]
    for body, kept in ((os.urandom(3 << 20), True), (b"user,login,1234\n" * 100_000, False)):
        stored = stored_object("AUTH_t1", "c", "o", {"Content-Length": str(len(body))})
        sampled = _sample_one(OneObject(body), stored, steps, None, 4 << 20)
        # Random bytes are kept as they came (no frames, no index); text compresses.
        assert (sampled.after == [len(body)]) is kept
        assert kept or sampled.after[0] < len(body) // 10
