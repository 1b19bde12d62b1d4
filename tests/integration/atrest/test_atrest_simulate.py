"""``iostack policy simulate`` against the real stack: counts exact, projection within its bound."""

from __future__ import annotations

import os
import random

import pytest

pytestmark = pytest.mark.integration

OBJECTS = 200


def mixed_objects(seed: int = 7) -> dict[str, bytes]:
    """Half compressible CSV, half random bytes, 1-60 KB each."""
    rng = random.Random(seed)
    bodies = {}
    for n in range(OBJECTS):
        size = rng.randint(1000, 60000)
        bodies[f"o{n:04d}"] = os.urandom(size) if n % 2 else b"".join(
            b"%d,user%d,login,%d\n" % (n, rng.randint(0, 50), rng.randint(0, 10**6))
            for _ in range(size // 24))
    return bodies


def test_simulate_projects_what_the_policy_then_stores(t1, container, policies, iostack_json):
    bodies = mixed_objects()
    for name, body in bodies.items():
        t1.put_object(container, name, body)
    text = f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION"
    sampled = iostack_json("policy", "simulate", text, "--sample", "40")
    whole = iostack_json("policy", "simulate", text, "--sample", str(OBJECTS))
    logical = sum(len(b) for b in bodies.values())
    for result in (sampled, whole):
        assert (result["objects"], result["bytes"]) == (OBJECTS, logical)
        assert result["changed_objects"] == OBJECTS
        assert result["stored_bytes"] == logical  # nothing is filtered yet
        assert result["reconcile_cpu_seconds"] > 0
    assert sampled["projection"]["sample_size"] == 40
    assert sampled["projection"]["population"] == OBJECTS
    assert whole["projection"]["error_bound_bytes"] == 0

    # What the policy really stores: the same bodies written under it.
    policies.add(text)
    for name, body in bodies.items():
        t1.put_object(container, name, body)
    stored = iostack_json("usage", f"AUTH_t1/{container}")["containers"][0]["stored_bytes"]
    assert stored < 0.8 * logical
    assert abs(whole["projected_stored_bytes"] - stored) <= 0.01 * stored
    assert abs(sampled["projected_stored_bytes"] - stored) <= \
        sampled["projection"]["error_bound_bytes"]
    after = iostack_json("policy", "simulate", text)
    assert after["changed_objects"] == 0 and after["objects"] == OBJECTS


def test_simulate_honours_to_conditions_and_limits(t1, container, iostack, iostack_json):
    sizes = [500, 5000, 50000]
    for n, size in enumerate(sizes):
        t1.put_object(container, f"o{n}", b"x" * size)
    result = iostack_json("policy", "simulate",
                          f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION "
                          "TO OBJECT_SIZE > 1K")
    assert (result["listed"], result["objects"], result["bytes"]) == (3, 2, 55000)
    limited = iostack_json("policy", "simulate",
                           f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION",
                           "--limit", "2")
    assert limited["listed"] == 2 and limited["truncated"] is True
    text = iostack("policy", "simulate", f"FOR CONTAINER AUTH_t1/{container} DO SET COMPRESSION")
    assert text.returncode == 0, text.stderr
    assert "objects matched: 3 of 3 listed" in text.stdout
    assert "projected stored bytes:" in text.stdout
    bad = iostack("policy", "simulate", "FOR CONTAINER AUTH_t1/x DO SET COMPRESION")
    assert bad.returncode == 1 and "did you mean COMPRESSION" in bad.stderr
