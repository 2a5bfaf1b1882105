"""PatternTrie examples: seed 001 routing, many prefixes at one node, pruning."""

from __future__ import annotations

import pytest

from edge_broker.matching import PatternTrie, RuleError, parse_pattern
from tests.matching.trie_keys import match_keys


@pytest.mark.parametrize("sep", [".", "/"])
def test_routes_seed_examples(sep: str) -> None:
    trie: PatternTrie[str, int] = PatternTrie(separator=sep)
    j = sep.join
    subs = {
        "exact": j(["a", "b", "c"]),
        "star": j(["a", "*", "c"]),
        "pstar": j(["a", "b*", "c"]),
        "gt": j(["a", "b", ">"]),
        "hash": j(["a", "b", "#"]),
        "pgt": j(["a", "b", "c>"]),
        "phash": j(["a", "b", "c#"]),
        "all": "#",
        "all1": ">",
    }
    for key, pattern in subs.items():
        trie.add(pattern, key, 0)
    assert match_keys(trie, j(["a", "b", "c"])) == {
        "exact",
        "star",
        "pstar",
        "gt",
        "hash",
        "phash",
        "all",
        "all1",
    }
    assert match_keys(trie, j(["a", "b"])) == {"hash", "all", "all1"}
    assert match_keys(trie, j(["a", "b", "c1", "x"])) == {
        "gt",
        "hash",
        "pgt",
        "phash",
        "all",
        "all1",
    }
    assert match_keys(trie, j(["a", "b1", "c"])) == {"star", "pstar", "all", "all1"}
    assert match_keys(trie, "z") == {"all", "all1"}


def test_many_prefixes_at_one_node() -> None:
    trie: PatternTrie[str, int] = PatternTrie(separator=".")
    prefixes = ["d", "de", "dev", "devi", "device", "x", "xy", "s", "sensor", "sensor1"]
    for p in prefixes:
        trie.add(f"site.{p}*.temp", f"star:{p}", 0)
        trie.add(f"site.{p}#", f"hash:{p}", 0)
        trie.add(f"site.{p}>", f"gt:{p}", 0)
    assert match_keys(trie, "site.device7.temp") == {
        f"{kind}:{p}"
        for p in ["d", "de", "dev", "devi", "device"]
        for kind in ("star", "hash", "gt")
    }
    assert match_keys(trie, "site.sensor1") == {"hash:s", "hash:sensor", "hash:sensor1"}
    assert match_keys(trie, "site.q.temp") == set()
    for p in prefixes:
        assert trie.remove(f"site.{p}*.temp", f"star:{p}")
        assert trie.remove(f"site.{p}#", f"hash:{p}")
        assert trie.remove(f"site.{p}>", f"gt:{p}")
    assert trie.is_empty_structure() and len(trie) == 0


def test_plus_and_star_are_one_subscription() -> None:
    trie: PatternTrie[str, int] = PatternTrie()
    trie.add("a/+/c", "k", 1)
    trie.add("a/*/c", "k", 2)
    assert len(trie) == 1 and trie.pattern_count == 1
    assert [dict(m) for m in trie.match("a/b/c")] == [{"k": 2}]
    assert trie.remove("a/+/c", "k")
    assert trie.is_empty_structure()


def test_rejects_invalid_and_foreign_patterns() -> None:
    trie: PatternTrie[str, int] = PatternTrie(separator=".")
    with pytest.raises(RuleError, match="last"):
        trie.add("a.#.b", "k", 0)
    with pytest.raises(ValueError, match="separator"):
        trie.add(parse_pattern("a/b", "/"), "k", 0)
    with pytest.raises(ValueError):
        PatternTrie(separator="-")
    assert not trie.remove("a.b", "k")
    assert not trie.remove("a.b*.c#", "k")


def test_cache_follows_changes() -> None:
    trie: PatternTrie[str, int] = PatternTrie(separator=".", cache_size=1)
    assert match_keys(trie, "a.b") == set()
    trie.add("a.>", "k", 0)
    assert match_keys(trie, "a.b") == {"k"}
    trie.add("a.>", "k2", 0)
    assert match_keys(trie, "a.b") == {"k", "k2"}
    trie.remove("a.>", "k")
    trie.remove("a.>", "k2")
    assert match_keys(trie, "a.b") == set()
    assert match_keys(trie, "x.y") == set()
