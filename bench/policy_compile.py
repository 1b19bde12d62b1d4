"""Policy compile time for 10,000 policies, and explain latency, against baselines.

    .venv/bin/python bench/policy_compile.py [--policies 10000] [--repeat 5] [--redis-url URL]

Compile: the same 10,000 generated policies (tenant, container, object and
group targets; parameters with units; WHEN conditions; TO conditions) go
through each stage in turn, every repetition:

- baseline: ``json.loads`` of the compiled policies (reading what compiling
  produces), so the ratio says what the DSL costs over reading stored JSON;
- lex (PLY tokens only), parse (syntax tree), parse+check (vocabulary,
  units, ranges), parse+check+compile (rules and conflict checks);
- submit: one atomic ``PolicyStore.submit`` of all of them into Redis.

Explain, with those policies stored: ``PolicyStore.explain`` (a version
check, one round trip, plus ``resolve``), the data-path reader reading the
whole state (what each policy change costs every worker) and answering a
lookup from its local copy, against a Redis ``PING`` round trip measured alongside. Medians over the
repetitions; Redis is the all-in-one's (``make run``'s, or a private one
started for the run) unless ``--redis-url`` is given; keys live under a
private prefix deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from contextlib import nullcontext
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import print_table, stack
from iostack.controller.compiler import compile_policies
from iostack.controller.policy_store import PolicyStore
from iostack.controller.registry import Registries
from iostack.dsl.checker import check
from iostack.dsl.lexer import tokenize
from iostack.dsl.parser import parse
from iostack.policy.connection import connect
from iostack.policy.reader import PolicyReader
from iostack.policy.redis_keys import KeySpace
from iostack.policy.resolve import RequestInfo

TENANTS = 500


def generate(count: int, seed: int = 7) -> str:
    """``count`` policies over distinct (target, filter) pairs, so none conflict."""
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        tenant = f"t{i % TENANTS}"
        shape = i // TENANTS % 5
        if shape == 0:
            lines.append(f"FOR TENANT {tenant} DO SET compression WITH level={rng.randint(1, 9)}, "
                         f"algorithm={rng.choice(['gzip', 'zstd'])} ON PROXY")
        elif shape == 1:
            lines.append(f"FOR CONTAINER {tenant}/c{i} DO SET encryption WITH frame_size=64K "
                         f"TO OBJECT_TYPE=DOCS, OBJECT_SIZE > {rng.randint(1, 64)}M")
        elif shape == 2:
            lines.append(f"FOR OBJECT:{tenant}/c{i}/o{i}.csv DO SET caching WITH head=4M")
        elif shape == 3:
            lines.append(f"FOR TENANT:{tenant} WHEN PUTS_SEC > {rng.randint(1, 50)} AND "
                         f"(GET_BW > 30MBps OR LATENCY > 200ms) DO SET noop TRANSIENT")
        else:
            lines.append(f"FOR G:g{i % 20}, CONTAINER {tenant}/logs{i} DO SET noop ON OBJECT "
                         f"TO OBJECT_NAME=~\\.log$, OBJECT_TAG=class:cold")
    return "\n".join(lines)


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def latency(fn, n: int) -> float:
    """Median seconds per call over ``n`` calls."""
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--explains", type=int, default=2000, help="calls per explain sample")
    parser.add_argument("--redis-url", help="default: the all-in-one's Redis")
    args = parser.parse_args()

    text = generate(args.policies)
    with (nullcontext({"redis_url": args.redis_url}) if args.redis_url else stack()) as info:
        client = connect(info["redis_url"], decode_responses=True)
        keys = KeySpace(f"iostack-bench-{uuid.uuid4().hex[:8]}:")
        try:
            run(args, text, client, keys, info["redis_url"])
        finally:
            for key in client.scan_iter(keys.prefix + "*", count=1000):
                client.delete(key)
    return 0


def run(args, text: str, client: redis.Redis, keys: KeySpace, redis_url: str) -> None:
    registries = Registries(client, keys)
    registries.seed()
    registries.put_group("g0", ["t0"])
    for g in range(20):
        registries.put_group(f"g{g}", [f"t{g}"])
    vocab = registries.vocabulary()
    vocab.tenants = {f"AUTH_t{i}" for i in range(TENANTS)}
    store = PolicyStore(client, keys, registries)

    def compile_all():
        checked = check(parse(text), vocab)
        numbered = [(f"P{n}", n, p) for n, p in enumerate(checked.policies, start=1)]
        return compile_policies(numbered, {}, vocab.filters)

    compiled_json = json.dumps([r for rules in compile_all().rules.values() for r in rules])
    stages = {
        "json.loads of the compiled rules (baseline)": lambda: json.loads(compiled_json),
        "lex": lambda: tokenize(text),
        "parse": lambda: parse(text),
        "parse + check": lambda: check(parse(text), vocab),
        "parse + check + compile": compile_all,
    }
    samples: dict[str, list[float]] = {name: [] for name in stages}
    samples["submit to Redis (atomic, all)"] = []
    for rep in range(args.repeat):
        for name, fn in stages.items():
            samples[name].append(timed(fn)[0])
        for pid in list(client.hkeys(keys.policies)):
            store.delete(pid)
        samples["submit to Redis (atomic, all)"].append(timed(lambda: store.submit(text))[0])
        print(f"repetition {rep + 1}/{args.repeat} done", file=sys.stderr)
    base = statistics.median(samples["json.loads of the compiled rules (baseline)"])
    print(f"\n{args.policies} policies, medians of {args.repeat} runs\n")
    print_table(["stage", "total s", "µs/policy", "x baseline"],
                [[name, f"{statistics.median(s):.3f}",
                  f"{statistics.median(s) / args.policies * 1e6:.1f}",
                  f"{statistics.median(s) / base:.1f}"] for name, s in samples.items()])

    reader = PolicyReader(redis_url, prefix=keys.prefix)
    reader.refresh()
    requests = [RequestInfo.from_path("PUT", f"/v1/AUTH_t{i % TENANTS}/c{i}/o{i}.csv", size=1 << 21)
                for i in range(0, args.policies, 7)]
    rng = random.Random(3)
    rows = {"Redis PING round trip (baseline)": [], "explain (version check + resolve)": [],
            "reader, reading the whole state (each change)": [],
            "reader, lookup + resolve (local copy)": []}
    for _ in range(args.repeat):
        rows["Redis PING round trip (baseline)"].append(latency(client.ping, args.explains))
        rows["explain (version check + resolve)"].append(
            latency(lambda: store.explain(rng.choice(requests)), args.explains))
        rows["reader, reading the whole state (each change)"].append(
            latency(reader.read_state, max(1, args.explains // 10)))
        rows["reader, lookup + resolve (local copy)"].append(
            latency(lambda: reader.resolve(rng.choice(requests)), args.explains))
    reader.close()
    ping = statistics.median(rows["Redis PING round trip (baseline)"])
    print(f"\nexplain latency with {args.policies} policies stored, medians of {args.repeat} "
          f"x {args.explains} calls\n")
    print_table(["call", "median µs", "x PING"],
                [[name, f"{statistics.median(s) * 1e6:.0f}", f"{statistics.median(s) / ping:.1f}"]
                 for name, s in rows.items()])


if __name__ == "__main__":
    sys.exit(main())
