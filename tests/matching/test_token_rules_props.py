"""Property tests of token rules against slow, obviously correct oracles (PATTERNS.md §2, §3).

Oracles written here from the spec text alone: a regex translation of each rule's channel set
and of each runtime pattern, the §3 acceptance table on plain strings, and enumeration of every
channel over a tiny alphabet for the soundness property.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching.subscription_patterns import parse_pattern
from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet
from edge_broker.matching.token_rules import PubRule, SubRule
from tests.seed001_tables import ROUTING

SEPARATORS = [".", "/"]
LITERALS = ["a", "b", "ab", "ba"]
VARIANTS = ["a", "b", "ab", "ba", "bb", "a*", "b*", "ab*", "ba*"]
CHANNEL_TOKENS = ["a", "b", "ab", "ba", "bb", ""]


# -- oracles -------------------------------------------------------------------------------------


def rule_regex(segments: list[str], sep: str) -> re.Pattern[str]:
    """Channels in a rule's set: literal, (alternatives), ?/* = one token, # 0+, > 1+."""
    one = f"[^{re.escape(sep)}]*"
    tail = None
    if segments and segments[-1] in ("#", ">"):
        tail, segments = segments[-1], segments[:-1]
    parts = []
    for seg in segments:
        if seg in ("?", "*"):
            parts.append(one)
        elif seg.startswith("("):
            alts = []
            for v in seg[1:-1].split("|"):
                alts.append(re.escape(v[:-1]) + one if v.endswith("*") else re.escape(v))
            parts.append("(?:" + "|".join(alts) + ")")
        else:
            parts.append(re.escape(seg))
    if not parts:  # '#' or '>' alone: every channel (a channel has at least one token)
        return re.compile(f"{one}(?:{re.escape(sep)}{one})*")
    body = re.escape(sep).join(parts)
    if tail == "#":
        body += f"(?:{re.escape(sep)}{one})*"
    elif tail == ">":
        body += f"(?:{re.escape(sep)}{one})+"
    return re.compile(body)


def pattern_regex(tokens: list[str], sep: str) -> re.Pattern[str]:
    """Channels matched by a runtime pattern (seed 001): * p* and as last # > p# p>."""
    one = f"[^{re.escape(sep)}]*"
    more = f"(?:{re.escape(sep)}{one})"
    parts: list[str] = []
    suffix = ""
    for i, tok in enumerate(tokens):
        last = i == len(tokens) - 1
        if tok == "*":
            parts.append(one)
        elif last and tok in ("#", ">"):
            if not parts:
                return re.compile(f"{one}{more}*")
            suffix = more + ("*" if tok == "#" else "+")
        elif last and tok[-1] in "#>":
            parts.append(re.escape(tok[:-1]) + one)
            suffix = more + ("*" if tok[-1] == "#" else "+")
        elif tok.endswith("*"):
            parts.append(re.escape(tok[:-1]) + one)
        else:
            parts.append(re.escape(tok))
    return re.compile(re.escape(sep).join(parts) + suffix)


def oracle_accepts(rule: list[str], pattern: list[str]) -> bool:
    """The §3 table (D1–D5) on strings."""
    tail = rule[-1] if rule[-1] in ("#", ">") else None
    body = rule[:-1] if tail else rule
    if len(pattern) < len(body):
        return False

    def is_lit(t: str) -> bool:
        return not any(c in t for c in "*#>")

    def seg_ok(seg: str, tok: str) -> bool:
        if seg == "?":
            return is_lit(tok)
        if seg == "*":
            return is_lit(tok) or tok == "*" or (tok.endswith("*") and is_lit(tok[:-1]))
        if seg.startswith("("):
            variants = seg[1:-1].split("|")
            if is_lit(tok):
                return any(
                    tok == v or (v.endswith("*") and tok.startswith(v[:-1])) for v in variants
                )
            if tok.endswith("*") and is_lit(tok[:-1]):
                return any(v.endswith("*") and tok[:-1].startswith(v[:-1]) for v in variants)
            return False
        return tok == seg

    if not all(seg_ok(r, t) for r, t in zip(body, pattern, strict=False)):
        return False
    rest = pattern[len(body) :]
    if tail is None:
        return not rest
    if tail == "#":
        return True
    return bool(rest) and rest != ["#"]


@lru_cache(maxsize=4)
def universe(sep: str, depth: int = 4) -> tuple[str, ...]:
    out = []
    for n in range(1, depth + 1):
        out.extend(sep.join(p) for p in itertools.product(CHANNEL_TOKENS, repeat=n))
    return tuple(out)


# -- strategies ----------------------------------------------------------------------------------

alternatives = st.lists(st.sampled_from(VARIANTS), min_size=1, max_size=4).map(
    lambda vs: "(" + "|".join(vs) + ")"
)
pub_segment = st.one_of(st.sampled_from(LITERALS), alternatives)
sub_segment = st.one_of(st.sampled_from(LITERALS + ["?", "*"]), alternatives)
tail = st.sampled_from([None, "#", ">"])


@st.composite
def rule_segments(draw: st.DrawFn, segment: st.SearchStrategy[str]) -> list[str]:
    segs = draw(st.lists(segment, min_size=0, max_size=4))
    end = draw(tail)
    if end is not None:
        segs.append(end)
    if not segs:
        segs = [draw(segment)]
    return segs


mid_token = st.sampled_from(["a", "b", "ab", "ba", "bb", "*", "a*", "b*", "ab*"])
last_token = st.sampled_from(
    ["a", "b", "ab", "*", "a*", "b*", "#", ">", "a#", "b#", "a>", "b>", "ab#"]
)


@st.composite
def patterns(draw: st.DrawFn) -> list[str]:
    return draw(st.lists(mid_token, max_size=4)) + [draw(last_token)]


@st.composite
def related_patterns(draw: st.DrawFn, rule: list[str]) -> list[str]:
    """A pattern built along ``rule`` (so acceptance is likely), with random deviations."""
    out: list[str] = []
    body = rule[:-1] if rule[-1] in ("#", ">") else rule
    for seg in body:
        if seg.startswith("("):
            choices = [v for v in seg[1:-1].split("|")]
            choices += [v[:-1] + "b" for v in choices if v.endswith("*")]
            choices += [v[:-1] + "a*" for v in choices if v.endswith("*")]
        elif seg in ("?", "*"):
            choices = ["a", "ba", "*", "b*"]
        else:
            choices = [seg]
        out.append(draw(st.one_of(st.sampled_from(choices), mid_token)))
    rest = draw(st.sampled_from([[], ["#"], [">"], ["a"], ["*", "#"], ["a#"], ["b>"], ["a", ">"]]))
    out += rest
    if not out:
        out = [draw(last_token)]
    if draw(st.booleans()) and len(out) > 1:
        out = out[: draw(st.integers(1, len(out)))]
        if any(t[-1] in "#>" for t in out[:-1]):
            out = [t for t in out if t[-1] not in "#>"] or ["a"]
    return out


channel = st.lists(st.sampled_from(CHANNEL_TOKENS), min_size=1, max_size=6)


def first_publish_rule(texts: list[str], rules: list[list[str]], chan: str, sep: str) -> str | None:
    """The oracle's first-match decision: the text of the first rule whose regex matches."""
    return next(
        (t for t, r in zip(texts, rules, strict=True) if rule_regex(r, sep).fullmatch(chan)), None
    )


def first_subscribe_rule(
    texts: list[str], rules: list[list[str]], pattern: list[str]
) -> str | None:
    """The oracle's first-match decision: the text of the first rule the table accepts."""
    return next((t for t, r in zip(texts, rules, strict=True) if oracle_accepts(r, pattern)), None)


# -- properties ----------------------------------------------------------------------------------


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(rules=st.lists(rule_segments(pub_segment), min_size=1, max_size=8), tokens=channel)
def test_pub_set_equals_first_matching_rule_by_regex(
    sep: str, rules: list[list[str]], tokens: list[str]
) -> None:
    texts = [sep.join(r) for r in rules]
    chan = sep.join(tokens)
    expected = first_publish_rule(texts, rules, chan, sep)
    assert PubRuleSet(texts, sep).allowed(chan) == expected
    for text, segs in zip(texts, rules, strict=True):
        assert PubRule.parse(text, sep).matches(chan) == bool(rule_regex(segs, sep).fullmatch(chan))


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(rules=st.lists(rule_segments(sub_segment), min_size=1, max_size=8), pattern=patterns())
def test_sub_set_equals_first_accepting_rule_by_table(
    sep: str, rules: list[list[str]], pattern: list[str]
) -> None:
    texts = [sep.join(r) for r in rules]
    expected = first_subscribe_rule(texts, rules, pattern)
    text = sep.join(pattern)
    assert SubRuleSet(texts, sep).allowed(text) == expected
    for rule_text, segs in zip(texts, rules, strict=True):
        assert SubRule.parse(rule_text, sep).accepts(text) == oracle_accepts(segs, pattern)


@st.composite
def nested_rules(draw: st.DrawFn, segment: st.SearchStrategy[str]) -> list[list[str]]:
    """Rules along one or two chains of segments: prefixes of each other, each with or without
    a tail, in random order. Their trie has nodes where rules end *and* edges go on, and
    single-edge runs between them (what the compressed trie must keep apart)."""
    chains = draw(st.lists(st.lists(segment, min_size=1, max_size=4), min_size=1, max_size=2))
    rules = []
    for chain in chains:
        for depth in range(1, len(chain) + 1):
            for end in draw(st.lists(tail, min_size=1, max_size=3, unique=True)):
                rules.append(chain[:depth] + ([end] if end else []))
    return draw(st.permutations(rules))


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(rules=nested_rules(pub_segment), tokens=channel)
def test_pub_set_on_nested_rules_equals_first_matching_rule(
    sep: str, rules: list[list[str]], tokens: list[str]
) -> None:
    texts = [sep.join(r) for r in rules]
    chan = sep.join(tokens)
    expected = first_publish_rule(texts, rules, chan, sep)
    assert PubRuleSet(texts, sep).allowed(chan) == expected


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(data=st.data(), rules=nested_rules(sub_segment))
def test_sub_set_on_nested_rules_equals_first_accepting_rule(
    sep: str, data: st.DataObject, rules: list[list[str]]
) -> None:
    pattern = data.draw(st.one_of(patterns(), related_patterns(data.draw(st.sampled_from(rules)))))
    texts = [sep.join(r) for r in rules]
    expected = first_subscribe_rule(texts, rules, pattern)
    assert SubRuleSet(texts, sep).allowed(sep.join(pattern)) == expected


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(data=st.data(), rules=st.lists(rule_segments(sub_segment), min_size=1, max_size=8))
def test_sub_set_on_patterns_built_along_a_rule(
    sep: str, data: st.DataObject, rules: list[list[str]]
) -> None:
    pattern = data.draw(related_patterns(data.draw(st.sampled_from(rules))))
    texts = [sep.join(r) for r in rules]
    expected = first_subscribe_rule(texts, rules, pattern)
    assert SubRuleSet(texts, sep).allowed(sep.join(pattern)) == expected


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(rule=rule_segments(sub_segment), pattern=patterns())
def test_soundness_accepted_pattern_never_reaches_outside_the_rule(
    sep: str, rule: list[str], pattern: list[str]
) -> None:
    """No subscription pattern accepted by a SubRule matches a channel outside the rule's set."""
    parsed = SubRule.parse(sep.join(rule), sep)
    if not parsed.accepts(sep.join(pattern)):
        return
    inside = rule_regex(rule, sep)
    matcher = pattern_regex(pattern, sep)
    runtime = parse_pattern(sep.join(pattern), sep)  # the broker's own runtime matcher
    for chan in universe(sep):
        reached = bool(matcher.fullmatch(chan))
        assert runtime.matches(chan) == reached, (sep.join(pattern), chan)
        if reached:
            assert inside.fullmatch(chan), (sep.join(rule), sep.join(pattern), chan)
            assert parsed.matches(chan)


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=400, deadline=None)
@given(data=st.data(), rule=rule_segments(sub_segment))
def test_soundness_for_patterns_built_along_the_rule(
    sep: str, data: st.DataObject, rule: list[str]
) -> None:
    pattern = data.draw(related_patterns(rule))
    assert SubRule.parse(sep.join(rule), sep).accepts(sep.join(pattern)) == oracle_accepts(
        rule, pattern
    )
    assert (SubRuleSet([sep.join(rule)], sep).allowed(sep.join(pattern)) is not None) == (
        oracle_accepts(rule, pattern)
    )
    test_soundness_accepted_pattern_never_reaches_outside_the_rule.hypothesis.inner_test(
        sep, rule, pattern
    )


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=200, deadline=None)
@given(rule=rule_segments(sub_segment), tokens=channel)
def test_sub_rule_channel_set_equals_regex(sep: str, rule: list[str], tokens: list[str]) -> None:
    chan = sep.join(tokens)
    assert SubRule.parse(sep.join(rule), sep).matches(chan) == bool(
        rule_regex(rule, sep).fullmatch(chan)
    )


# -- the oracles themselves follow seed 001 -----------------------------------------------------


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("pattern", "chan", "matches"),
    ROUTING,
)
def test_pattern_oracle_follows_seed_001(sep: str, pattern: str, chan: str, matches: bool) -> None:
    tokens = pattern.split(".")
    assert bool(pattern_regex(tokens, sep).fullmatch(chan.replace(".", sep))) is matches
