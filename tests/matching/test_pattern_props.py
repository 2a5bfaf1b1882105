"""Property tests: runtime subscription patterns and PatternTrie against a regex oracle."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pattern_oracle import oracle_pattern_matches

from edge_broker.matching import PatternTrie, parse_pattern, pattern_matches

# Six prefixes, so a trie node can hold more than the handful the prefix map scans linearly.
BODY = ["a", "ab", "b", "*", "a*", "ab*", "abc*", "b*", "ba*", "c*"]
TAILS = ["#", ">", "a#", "a>", "ab#", "b>", "abc#", "ba>", "c#", "b#", "ab>"]
CHANNEL_TOKENS = ["a", "ab", "abc", "b", "ba", "", "c"]


@st.composite
def patterns(draw: st.DrawFn, sep: str) -> str:
    body = draw(st.lists(st.sampled_from(BODY + (["+"] if sep == "/" else [])), max_size=4))
    if not body or draw(st.booleans()):
        body = [*body, draw(st.sampled_from(TAILS))]
    return sep.join(body)


def channels(sep: str) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(CHANNEL_TOKENS), min_size=1, max_size=6).map(sep.join)


@st.composite
def case(draw: st.DrawFn) -> tuple[str, str, str]:
    sep = draw(st.sampled_from([".", "/"]))
    return sep, draw(patterns(sep)), draw(channels(sep))


@settings(max_examples=500, deadline=None)
@given(case())
def test_pattern_matches_agrees_with_regex(c: tuple[str, str, str]) -> None:
    sep, pattern, channel = c
    expected = oracle_pattern_matches(pattern, channel, sep)
    assert pattern_matches(pattern, channel, sep) == expected
    assert parse_pattern(pattern, sep).matches(channel) == expected


@st.composite
def programs(draw: st.DrawFn) -> tuple[str, list[tuple[str, str, int, int]], list[str]]:
    sep = draw(st.sampled_from([".", "/"]))
    op = st.one_of(
        st.tuples(st.just("add"), patterns(sep), st.integers(0, 3), st.integers(0, 3)),
        st.tuples(st.just("remove"), patterns(sep), st.integers(0, 3), st.just(0)),
        st.tuples(st.just("match"), channels(sep), st.just(0), st.just(0)),
    )
    return (
        sep,
        draw(st.lists(op, max_size=60)),
        draw(st.lists(channels(sep), min_size=1, max_size=8)),
    )


@settings(max_examples=300, deadline=None)
@given(programs(), st.sampled_from([0, 2, 4096]))
def test_pattern_trie_equals_linear_scan(
    program: tuple[str, list[tuple[str, str, int, int]], list[str]], cache_size: int
) -> None:
    sep, ops, probes = program
    trie: PatternTrie[int, int] = PatternTrie(separator=sep, cache_size=cache_size)
    model: dict[str, dict[int, int]] = {}

    def canonical(p: str) -> str:
        # '+' is '*' with '/': both spellings are the same pattern in the trie.
        return sep.join("*" if t == "+" else t for t in p.split(sep))

    def check(channel: str) -> None:
        expected = sorted(
            sorted(subs.items())
            for p, subs in model.items()
            if subs and oracle_pattern_matches(p, channel, sep)
        )
        assert sorted(sorted(m.items()) for m in trie.match(channel)) == expected, channel

    for kind, arg, key, value in ops:
        if kind == "add":
            trie.add(arg, key, value)
            model.setdefault(canonical(arg), {})[key] = value
        elif kind == "remove":
            existed = key in model.get(canonical(arg), {})
            assert trie.remove(arg, key) == existed
            if existed:
                del model[canonical(arg)][key]
        else:
            check(arg)
        assert len(trie) == sum(map(len, model.values()))
    for channel in probes:
        check(channel)
        check(channel)
    for p, subs in list(model.items()):
        for key in list(subs):
            assert trie.remove(p, key)
    assert len(trie) == 0 and trie.is_empty_structure()
