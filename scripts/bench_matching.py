#!/usr/bin/env python3
"""Benchmark of the matching layer (PATTERNS.md "Matching structures").

Decisions/s: the first matching rule of an ordered MQTT-filter rule list (seed 003 first-match)
for a concrete topic, with :class:`FirstMatchIndex`, against a linear scan with
``topic_matches`` and paho's ``MQTTMatcher`` (which finds every matching filter; we take the
smallest index). Subscription matches/s: every subscription matching a topic, with
:class:`SubscriptionTrie` (result cache off, and on), a linear scan and ``MQTTMatcher``; and
runtime subscription patterns (seed 001, ``.`` separator) with :class:`PatternTrie`.

Workload: per-device rules of four shapes (``+`` in the middle, ``#`` tail, ``+`` first below
the tenant) in blocks of four per tenant over two tenants, so every size has the same trie
shape near the root and differs only in how many devices hang below; plus ``$SYS/#`` and a
broad ``tenant0/#`` at the end. Probe topics are made from randomly chosen rules: half match
their rule, half have the device level renamed and miss it (the broad rule may still match).
Each cell is the best of ``--rounds`` runs of ``--seconds`` of process CPU time, interleaved across
sizes, to damp the noise of a shared machine. Prints a markdown table and the 100k-vs-10 cost ratios
(target: < 2x). Exit status 1 if a target is missed. Then retained-message lookups (a wildcard
SUBSCRIBE against N retained topics) with :class:`TopicTree` against a scan, SUBSCRIBE
permission checks (first containing rule and earlier overlapping ones), and the memory each
structure takes per entry at the largest size.

    .venv/bin/python scripts/bench_matching.py [--seconds 0.3] [--rounds 3] [--sizes 10,1000,100000]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence

from paho.mqtt.matcher import MQTTMatcher

from edge_broker.matching import (
    FirstMatchIndex,
    PatternTrie,
    SubscriptionTrie,
    TopicTree,
    topic_matches,
)

TENANTS = 2
PROBES = 2048
FILTER_SHAPES = (
    "tenant{t}/device{i}/+/status",
    "tenant{t}/device{i}/#",
    "tenant{t}/device{i}/cmd/+",
    "tenant{t}/+/device{i}/telemetry",
)
PATTERN_SHAPES = (
    "tenant{t}.device{i}.*.status",
    "tenant{t}.device{i}.>",
    "tenant{t}.dev{i}-*.#",  # '-' ends the prefix: 'dev1-*' is not a prefix of 'dev12-…'
    "tenant{t}.device{i}.cmd.c#",
)

Probe = Callable[[str], object]


def rules(n: int, shapes: Sequence[str], broad: Sequence[str]) -> list[str]:
    """``n`` rules: per-device ones in blocks of four per tenant, then the broad ones."""
    body = max(n - len(broad), 1)
    out = [shapes[i % len(shapes)].format(t=(i // len(shapes)) % TENANTS, i=i) for i in range(body)]
    return (out + list(broad))[:n]


def instantiate(pattern: str, sep: str, k: int) -> str:
    """A concrete topic/channel matched by ``pattern`` (MQTT filter or seed 001 pattern)."""
    out: list[str] = []
    for token in pattern.split(sep):
        if token in ("+", "*"):
            out.append(f"x{k % 7}")
        elif token in ("#", ">"):
            out.extend(["a", f"b{k % 3}"])
        elif token[-1:] in ("*", "#", ">"):
            out.append(f"{token[:-1]}{k % 10}")
            if token[-1] == ">":
                out.append("z")
        else:
            out.append(token)
    return sep.join(out)


def probe_topics(patterns: Sequence[str], rng: random.Random, sep: str = "/") -> list[str]:
    topics: list[str] = []
    for k in range(PROBES):
        topic = instantiate(rng.choice(patterns), sep, k)
        if k % 2 == 0:
            topic = topic.replace("dev", "unknown", 1)
        topics.append(topic)
    return topics


def rate(fn: Probe, topics: Sequence[str], seconds: float) -> float:
    """Calls per CPU second of ``fn`` cycling over ``topics`` for about ``seconds`` of CPU.

    CPU time of this process, not wall time: on a shared machine the time we are not
    scheduled would otherwise count against whichever cell was running.
    """
    clock = time.process_time
    done = 0
    start = clock()
    while True:
        for topic in topics:
            fn(topic)
            done += 1
            if done % 64 == 0 and clock() - start >= seconds:
                return done / (clock() - start)


def fmt(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M"
    if x >= 1e3:
        return f"{x / 1e3:.1f} k"
    return f"{x:.0f}"


COLUMNS = (
    ("dec_index", "decisions: FirstMatchIndex"),
    ("dec_linear", "decisions: linear scan"),
    ("dec_paho", "decisions: paho MQTTMatcher"),
    ("sub_trie", "sub matches: SubscriptionTrie"),
    ("sub_cache", "sub matches: trie + cache"),
    ("sub_linear", "sub matches: linear scan"),
    ("sub_paho", "sub matches: paho MQTTMatcher"),
    ("pat_trie", "pattern matches: PatternTrie"),
)


def build(
    n: int, rng: random.Random, hits: dict[int, tuple[float, float]]
) -> dict[str, tuple[Probe, list[str]]]:
    """Every structure for size ``n``, checked against the linear scan, with its probes.
    ``hits[n]`` receives the mean number of matching filters and patterns per probe."""
    filters = rules(n, FILTER_SHAPES, ["$SYS/#", "tenant0/#"])
    topics = probe_topics(filters, rng)
    index = FirstMatchIndex(filters)
    raw: SubscriptionTrie[int, int] = SubscriptionTrie(cache_size=0)
    cached: SubscriptionTrie[int, int] = SubscriptionTrie(cache_size=4096)
    paho = MQTTMatcher()  # type: ignore[no-untyped-call]
    for i, f in enumerate(filters):
        raw.add(f, i, 1)
        cached.add(f, i, 1)
        paho[f] = i

    def linear_first(topic: str) -> int | None:
        for i, f in enumerate(filters):
            if topic_matches(f, topic):
                return i
        return None

    def linear_all(topic: str) -> list[int]:
        return [i for i, f in enumerate(filters) if topic_matches(f, topic)]

    def paho_all(topic: str) -> list[int]:
        return list(paho.iter_match(topic))  # type: ignore[no-untyped-call]

    def paho_first(topic: str) -> int | None:
        return min(paho_all(topic), default=None)

    for topic in topics[:100]:  # all must agree before a number is printed
        want = linear_all(topic)
        assert index.first_match(topic) == linear_first(topic) == paho_first(topic), topic
        assert (
            sorted({k for subs in raw.match(topic) for k in subs})
            == want
            == sorted(paho_all(topic))
        ), topic

    patterns = rules(n, PATTERN_SHAPES, [])
    ptrie: PatternTrie[int, int] = PatternTrie(separator=".", cache_size=0)
    for i, p in enumerate(patterns):
        ptrie.add(p, i, 1)
    channels = probe_topics(patterns, rng, ".")
    hits[n] = (
        sum(len(linear_all(tp)) for tp in topics[:200]) / 200,
        sum(len(ptrie.match(c)) for c in channels) / len(channels),
    )
    return {
        "dec_index": (index.first_match, topics),
        "dec_linear": (linear_first, topics),
        "dec_paho": (paho_first, topics),
        "sub_trie": (raw.match, topics),
        "sub_cache": (cached.match, topics),
        "sub_linear": (linear_all, topics),
        "sub_paho": (paho_all, topics),
        "pat_trie": (ptrie.match, channels),
    }


def retained_rates(n: int, seconds: float, rounds: int, rng: random.Random) -> dict[str, float]:
    """Wildcard SUBSCRIBE against ``n`` retained topics, filters/s: TopicTree vs a scan, for
    filters whose wildcards come after the device level (``tenant0/device7/+/status``) and
    for filters with ``+`` right below the tenant (``tenant0/+/device7/telemetry``), which
    must visit every child of the tenant."""
    filters = rules(n, FILTER_SHAPES, [])
    topics = sorted({instantiate(f, "/", k) for k, f in enumerate(filters)})
    tree: TopicTree[int] = TopicTree()
    for i, topic in enumerate(topics):
        tree.set(topic, i)
    deep = [f for f in filters if "/+/device" not in f]
    shallow = [f for f in filters if "/+/device" in f] or deep

    def via_tree(q: str) -> int:
        return sum(1 for _ in tree.matching(q))

    def via_scan(q: str) -> int:
        return sum(1 for t in topics if topic_matches(q, t))

    out: dict[str, float] = {}
    for name, pool in (("deep", deep), ("shallow", shallow)):
        queries = [rng.choice(pool) for _ in range(256)]
        for q in queries[:20]:
            assert via_tree(q) == via_scan(q), q
        scan_time = seconds / 3 if n > 1000 else seconds
        out[f"tree_{name}"] = max(rate(via_tree, queries, seconds) for _ in range(rounds))
        out[f"scan_{name}"] = max(rate(via_scan, queries, scan_time) for _ in range(rounds))
    return out


def subscribe_check_rates(
    n: int, seconds: float, rounds: int, rng: random.Random
) -> tuple[float, float]:
    """AUTHZ.md gate 4 for a SUBSCRIBE: the first rule containing the filter, then the earlier
    rules overlapping it. Returns (checks/s, mean number of overlapping rules returned): the
    cost follows the size of that answer, which grows with the rules a '+' can reach."""
    filters = rules(n, FILTER_SHAPES, ["$SYS/#", "tenant0/#"])
    index = FirstMatchIndex(filters)
    queries = [rng.choice(filters) for _ in range(256)]

    def check(q: str) -> int:
        return len(index.overlapping(q, index.first_containing(q)))

    mean = sum(check(q) for q in queries) / len(queries)
    return max(rate(check, queries, seconds) for _ in range(rounds)), mean


def memory_per_entry(n: int) -> dict[str, float]:
    """Bytes allocated per rule/subscription/pattern when building each structure."""
    filters = rules(n, FILTER_SHAPES, ["$SYS/#", "tenant0/#"])
    patterns = rules(n, PATTERN_SHAPES, [])
    out: dict[str, float] = {}
    builders: dict[str, Callable[[], object]] = {
        "FirstMatchIndex": lambda: FirstMatchIndex(filters),
        "SubscriptionTrie": lambda: _filled_trie(filters),
        "PatternTrie": lambda: _filled_pattern_trie(patterns),
    }
    for name, make in builders.items():
        tracemalloc.start()
        keep = make()
        size, _peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del keep
        out[name] = size / n
    return out


def _filled_trie(filters: Sequence[str]) -> SubscriptionTrie[int, int]:
    trie: SubscriptionTrie[int, int] = SubscriptionTrie()
    for i, f in enumerate(filters):
        trie.add(f, i, 1)
    return trie


def _filled_pattern_trie(patterns: Sequence[str]) -> PatternTrie[int, int]:
    trie: PatternTrie[int, int] = PatternTrie(separator=".")
    for i, p in enumerate(patterns):
        trie.add(p, i, 1)
    return trie


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark of edge_broker.matching")
    parser.add_argument("--seconds", type=float, default=0.3, help="time per measurement")
    parser.add_argument("--rounds", type=int, default=5, help="best of this many runs a cell")
    parser.add_argument("--sizes", default="10,1000,100000", help="comma-separated rule counts")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    rng = random.Random(20261121)
    hits: dict[int, tuple[float, float]] = {}
    cases = {n: build(n, rng, hits) for n in sizes}
    best: dict[tuple[int, str], float] = {}
    for _ in range(args.rounds):
        for n in sizes:
            for key, _label in COLUMNS:
                fn, topics = cases[n][key]
                slow = key.endswith("linear") and n > 1000
                r = rate(fn, topics, args.seconds / 3 if slow else args.seconds)
                best[n, key] = max(best.get((n, key), 0.0), r)

    load = os.getloadavg()[0]
    print(
        f"Python {platform.python_version()} on {platform.machine()} ({os.cpu_count()} CPUs, "
        f"load {load:.1f}); calls per CPU second, best of {args.rounds} x {args.seconds}s; "
        "higher is better\n"
    )
    print("| rules / subs | " + " | ".join(label for _, label in COLUMNS) + " |")
    print("|---:|" + "---:|" * len(COLUMNS))
    for n in sizes:
        print(f"| {n:,} | " + " | ".join(fmt(best[n, key]) for key, _ in COLUMNS) + " |")
    print()
    print(
        "Matching filters / patterns per probe (the work a match must return): "
        + ", ".join(f"{n:,}: {hits[n][0]:.2f} / {hits[n][1]:.2f}" for n in sizes)
    )
    print()
    ok = True
    lo, hi = sizes[0], sizes[-1]
    for key, label in (
        ("dec_index", "decision (FirstMatchIndex)"),
        ("sub_trie", "subscription match (SubscriptionTrie, no cache)"),
        ("pat_trie", "pattern match (PatternTrie, no cache)"),
    ):
        ratio = best[lo, key] / best[hi, key]
        ok &= ratio < 2.0
        print(
            f"- cost of a {label} at {hi:,} vs {lo:,}: {ratio:.2f}x "
            f"({'meets' if ratio < 2.0 else 'MISSES'} the < 2x target)"
        )
    print()
    print(
        "| retained topics | TopicTree: t/device7/+/status | scan: same | "
        "TopicTree: t/+/device7/telemetry | scan: same |"
    )
    print("|---:|---:|---:|---:|---:|")
    for n in sizes:
        rr = retained_rates(n, args.seconds, args.rounds, rng)
        print(
            f"| {n:,} | {fmt(rr['tree_deep'])} | {fmt(rr['scan_deep'])} | "
            f"{fmt(rr['tree_shallow'])} | {fmt(rr['scan_shallow'])} |"
        )
    print()
    print(
        "| rules | SUBSCRIBE checks/s (first containing + earlier overlapping) | "
        "mean overlapping rules returned |"
    )
    print("|---:|---:|---:|")
    for n in sizes:
        checks, mean = subscribe_check_rates(n, args.seconds, args.rounds, rng)
        print(f"| {n:,} | {fmt(checks)} | {mean:.1f} |")
    print()
    mem = memory_per_entry(sizes[-1])
    print(
        f"Memory at {sizes[-1]:,} entries (tracemalloc, bytes per entry incl. the filter "
        "strings): " + ", ".join(f"{k} {v:.0f}" for k, v in mem.items())
    )
    sys.stdout.flush()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
