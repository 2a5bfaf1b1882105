"""Decisions D1–D17 of PATTERNS.md as they bear on token rules, names and pattern tokens."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching.errors import RuleError
from edge_broker.matching.pattern_tokens import TokenKind, pattern_tokens, render
from edge_broker.matching.subscription_patterns import parse_pattern
from edge_broker.matching.token_rule_sets import PubRuleSet, SubRuleSet
from edge_broker.matching.token_rules import Alternatives, PubRule, SubRule

SEPARATORS = [".", "/"]


def s(text: str, sep: str) -> str:
    return text.replace(".", sep)


def accepts(rule: str, pattern: str, sep: str) -> bool:
    single = SubRule.parse(s(rule, sep), sep).accepts(s(pattern, sep))
    in_set = SubRuleSet([s(rule, sep)], sep).allowed(s(pattern, sep)) is not None
    assert single == in_set, (rule, pattern)
    return single


def pub_allows(rule: str, channel: str, sep: str) -> bool:
    single = PubRule.parse(s(rule, sep), sep).matches(s(channel, sep))
    in_set = PubRuleSet([s(rule, sep)], sep).allowed(s(channel, sep)) is not None
    assert single == in_set, (rule, channel)
    return single


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d1_any_literal_accepts_only_literals(sep: str) -> None:
    assert accepts("a.?.c", "a.x.c", sep)
    assert accepts("a.?.c", "a.x-y_z~@.c", sep)
    for token in ["*", "p*"]:
        assert not accepts("a.?.c", f"a.{token}.c", sep)
    for token in ["#", ">", "p#", "p>"]:
        assert not accepts("a.?", f"a.{token}", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d2_wildcard_accepts_literal_star_and_prefix(sep: str) -> None:
    for token in ["x", "*", "p*"]:
        assert accepts("a.*.c", f"a.{token}.c", sep)
    for token in ["#", ">", "p#", "p>"]:
        assert not accepts("a.*", f"a.{token}", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d2_plus_is_star_only_with_slash(sep: str) -> None:
    if sep == "/":
        assert accepts("a/*/c", "a/+/c", sep)
        assert not accepts("a/?/c", "a/+/c", sep)
    else:
        with pytest.raises(RuleError, match="only with the separator '/'; write '\\*'"):
            SubRule.parse("a.*.c", ".").accepts("a.+.c")


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d3_alternatives_accept_literals_and_narrower_prefixes(sep: str) -> None:
    rule = "a.(sell|b*).c"
    assert accepts(rule, "a.sell.c", sep)
    assert accepts(rule, "a.b.c", sep)  # D13: b* includes b
    assert accepts(rule, "a.bag.c", sep)
    assert accepts(rule, "a.b*.c", sep)  # p = q
    assert accepts(rule, "a.ba*.c", sep)  # p starts with q
    assert not accepts(rule, "a.s*.c", sep)  # no variant q* with "s" starting with q
    assert not accepts(rule, "a.sell*.c", sep)  # literal variants never admit a prefix
    assert not accepts(rule, "a.*.c", sep)
    assert not accepts(rule, "a.pay.c", sep)
    assert not accepts("a.(b*)", "a.b#", sep)
    assert not accepts("a.(b*)", "a.b>", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d4_hash_tail_accepts_any_valid_rest(sep: str) -> None:
    for rest in ["", ".x", ".*", ".p*", ".#", ".>", ".p#", ".p>", ".x.*.y*.#", ".*.*.>"]:
        assert accepts("a.#", "a" + rest, sep), rest
    assert accepts("#", "#", sep)
    assert accepts("#", ">", sep)
    assert accepts("#", "x.y", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d4_gt_tail_needs_a_rest_that_requires_a_channel_token(sep: str) -> None:
    for rest in [".x", ".*", ".p*", ".>", ".p#", ".p>", ".x.#", ".*.#", ".x.y"]:
        assert accepts("a.>", "a" + rest, sep), rest
    assert not accepts("a.>", "a", sep)  # empty tail
    assert not accepts("a.>", "a.#", sep)  # exactly '#'
    assert accepts(">", ">", sep)
    assert not accepts(">", "#", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d5_length_rules(sep: str) -> None:
    assert not accepts("a.b", "a.b.c", sep)  # longer than a tail-less rule
    assert not accepts("a.b", "a", sep)  # shorter
    assert accepts("a.b.#", "a.b", sep)  # what is left is a '#' tail
    assert not accepts("a.b.c.#", "a.b", sep)  # what is left is more than '#'
    assert not accepts("a.b.>", "a.b", sep)  # '>' is not '#'
    assert not accepts("a.*.c", "a.#", sep)  # a tail token is no substitute for segments


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("kind", [PubRule, SubRule])
def test_d6_top_level_prefix_is_invalid(sep: str, kind: type[PubRule] | type[SubRule]) -> None:
    with pytest.raises(RuleError) as info:
        kind.parse(s("a.ab*.c", sep), sep)
    assert "write '(ab*)'" in str(info.value) and info.value.segment == "ab*"
    kind.parse(s("a.(ab*).c", sep), sep)


INVALID_ALTERNATIVES = [
    ("()", "empty alternative"),
    ("(a|)", "empty alternative"),
    ("(|a)", "empty alternative"),
    ("(a||b)", "empty alternative"),
    ("(*)", "'*' alone is not a variant"),
    ("(a|*)", "'*' alone is not a variant"),
    ("(a*b)", "'*' may only end a prefix"),
    ("(a**)", "'*' may only end a prefix"),
    ("((a|b))", "nested parentheses"),
    ("(a|(b))", "nested parentheses"),
    ("(?)", "'?', '#' and '>' are not allowed inside"),
    ("(a|#)", "'?', '#' and '>' are not allowed inside"),
    ("(a|>)", "'?', '#' and '>' are not allowed inside"),
    ("a(b)", "text around the parentheses"),
    ("(b)a", "text around the parentheses"),
    ("(a", "'(' without a matching ')'"),
    ("a)", "')' without a matching '('"),
    ("(a|$)", "'$' is not allowed"),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("kind", [PubRule, SubRule])
@pytest.mark.parametrize(("segment", "reason"), INVALID_ALTERNATIVES)
def test_d7_invalid_alternatives(
    sep: str, kind: type[PubRule] | type[SubRule], segment: str, reason: str
) -> None:
    with pytest.raises(RuleError) as info:
        kind.parse(s("x.", sep) + segment + s(".y", sep), sep)
    assert reason in str(info.value)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d7_separator_inside_alternatives(sep: str) -> None:
    with pytest.raises(RuleError, match="contain the separator"):
        PubRule.parse(f"x{sep}(a{sep}b|c)", sep)
    other = "/" if sep == "." else "."
    rule = PubRule.parse(f"x{sep}(a{other}b|c)", sep)  # the other character is a literal
    assert rule.matches(f"x{sep}a{other}b")


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d7_single_and_repeated_variants_are_valid(sep: str) -> None:
    assert pub_allows("x.(a)", "x.a", sep)
    assert pub_allows("x.(a|a)", "x.a", sep)
    assert not pub_allows("x.(a|a)", "x.b", sep)


def test_alternatives_canonical_form_shares_edges() -> None:
    assert Alternatives.of(["ab", "c"], ["a", "abc"]) == Alternatives(frozenset({"c"}), ("a",))
    assert Alternatives.of(["b", "a"], []) == Alternatives.of(["a", "b", "a"], [])


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d8_tail_counts_as_a_segment(sep: str) -> None:
    PubRule.parse(sep.join(["a"] * 31 + [">"]), sep)
    with pytest.raises(RuleError, match="a tail counts"):
        SubRule.parse(sep.join(["a"] * 32 + [">"]), sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d9_segment_bytes_count_parentheses(sep: str) -> None:
    ok = "(" + "|".join(["a" * 30] * 4) + ")"  # 2 + 120 + 3 = 125
    assert len(ok) == 125
    PubRule.parse(ok, sep)
    exact = "(" + "a" * 126 + ")"
    PubRule.parse(exact, sep)
    with pytest.raises(RuleError, match="129 bytes"):
        PubRule.parse("(" + "a" * 127 + ")", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d10_pattern_limits(sep: str) -> None:
    pattern_tokens(sep.join(["a"] * 32), sep)
    pattern_tokens("a" * 128, sep)
    pattern_tokens(sep.join(["a" * 127, "a" * 127]), sep)  # 255 bytes
    with pytest.raises(RuleError, match="33 tokens"):
        pattern_tokens(sep.join(["a"] * 33), sep)
    with pytest.raises(RuleError, match="longer than 128 bytes"):
        pattern_tokens("a" * 129, sep)
    with pytest.raises(RuleError, match="257 bytes; at most 256"):
        pattern_tokens(sep.join(["a" * 127, "a" * 127, "a"]), sep)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("kind", [PubRule, SubRule])
@pytest.mark.parametrize(
    ("segment", "fragment"),
    [
        ("a$b", "'$' is not allowed"),
        ("a b", "' ' is not allowed"),
        ("é", "'é' is not allowed"),
        ("a+", "'+' is not allowed"),
        ("a#", "'#' is allowed only as a whole last segment"),
        ("a>b", "'>' is allowed only as a whole last segment"),
    ],
)
def test_d12_literal_characters_only(
    sep: str, kind: type[PubRule] | type[SubRule], segment: str, fragment: str
) -> None:
    with pytest.raises(RuleError) as info:
        kind.parse(s("x.", sep) + segment, sep)
    assert fragment in str(info.value)
    assert info.value.segment == segment


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d12_other_separator_character_is_a_literal(sep: str) -> None:
    other = "/" if sep == "." else "."
    rule = PubRule.parse(f"a{other}b{sep}#", sep)
    assert rule.matches(f"a{other}b{sep}c")
    assert not rule.matches(f"a{sep}b{sep}c")
    assert PubRuleSet([rule], sep).allowed(f"a{other}b") == rule.text


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d13_prefix_includes_the_prefix_itself(sep: str) -> None:
    assert pub_allows("x.(b*)", "x.b", sep)
    assert pub_allows("x.(b*)", "x.bz", sep)
    assert not pub_allows("x.(b*)", "x.ab", sep)
    assert accepts("x.(b*)", "x.b", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    "pattern",
    [
        "a..b",
        ".a",
        "a.",
        "a.**",
        "a.*>",
        "a.*#",
        "a.#>",
        "a.a*b",
        "a.a#b",
        "a.*a",
        "a.?",
        "a.(a)",
        "a.a|b",
        "a.>.b",
        "a.#.b",
        "a.b.c>.x",
        "a.ab*c",
        "a.b#.c",
    ],
)
def test_d15_invalid_patterns(sep: str, pattern: str) -> None:
    with pytest.raises(RuleError):
        pattern_tokens(s(pattern, sep), sep)
    with pytest.raises(RuleError):
        SubRuleSet([s("a.#", sep)], sep).allowed(s(pattern, sep))


@pytest.mark.parametrize("sep", SEPARATORS)
def test_pattern_token_kinds(sep: str) -> None:
    tokens = pattern_tokens(s("x.*.p*.q#", sep), sep)
    assert [t.kind for t in tokens] == [
        TokenKind.LITERAL,
        TokenKind.STAR,
        TokenKind.PREFIX_STAR,
        TokenKind.PREFIX_HASH,
    ]
    assert [t.text for t in tokens] == ["x", "", "p", "q"]
    assert render(tokens, sep) == s("x.*.p*.q#", sep)
    assert pattern_tokens(s("a.q>", sep), sep)[-1].kind is TokenKind.PREFIX_GT


@pytest.mark.parametrize("sep", SEPARATORS)
def test_d16_hash_or_gt_alone_are_valid_patterns(sep: str) -> None:
    assert pattern_tokens("#", sep)[0].kind is TokenKind.HASH
    assert pattern_tokens(">", sep)[0].kind is TokenKind.GT
    assert accepts("#", "#", sep) and accepts("#", ">", sep)
    assert not accepts("a.#", "#", sep)  # would match every channel, not only a...


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("tail", ["#", ">"])
def test_d17_publish_tail_alone_matches_every_channel(sep: str, tail: str) -> None:
    rule = PubRule.parse(tail, sep)
    for channel in ["a", "a.b", "a.b.c.d.e", "..", "x-y"]:
        assert rule.matches(s(channel, sep))
        assert PubRuleSet([rule], sep).allowed(s(channel, sep)) == tail


@pytest.mark.parametrize("sep", SEPARATORS)
def test_rule_error_names_rule_segment_and_reason(sep: str) -> None:
    with pytest.raises(RuleError) as info:
        SubRule.parse(s("store.#.status", sep), sep)
    err = info.value
    assert (err.rule, err.segment) == (s("store.#.status", sep), "#")
    assert err.reason == "'#' must be the last segment"
    assert str(err) == s("store.#.status", sep) + ": '#' must be the last segment"


@pytest.mark.parametrize("kind", [PubRule, SubRule])
def test_empty_rule_is_refused(kind: type[PubRule] | type[SubRule]) -> None:
    with pytest.raises(RuleError, match="must not be empty"):
        kind.parse("", "/")


def test_set_rejects_rules_of_another_separator() -> None:
    with pytest.raises(ValueError, match="separator"):
        PubRuleSet([PubRule.parse("a.b", ".")], "/")
    with pytest.raises(ValueError, match="separator"):
        SubRuleSet([SubRule.parse("a/b", "/")], ".")


@pytest.mark.parametrize("sep", SEPARATORS)
def test_parsed_subscription_patterns_are_accepted_as_input(sep: str) -> None:
    rule = SubRule.parse(s("store.?.status.#", sep), sep)
    rules = SubRuleSet([rule], sep)
    for text, ok in [
        ("store.fi.status.#", True),
        ("store.*.status", False),
        ("store.x.status", True),
    ]:
        parsed = parse_pattern(s(text, sep), sep)
        assert rule.accepts(parsed) is ok
        assert (rules.allowed(parsed) is not None) is ok
        assert rules.allowed(pattern_tokens(s(text, sep), sep)) == rules.allowed(s(text, sep))
    other = "/" if sep == "." else "."
    with pytest.raises(ValueError, match="separator"):
        rules.allowed(parse_pattern("store", other))


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("pattern", "segment", "fragment"),
    [
        ("a.>.b", ">", "'>' is allowed only in the last token"),
        ("a.#.b", "#", "'#' is allowed only in the last token"),
        ("a.b.c>.x", "c>", "a prefix tail is allowed only in the last token"),
        ("a.ab*c", "ab*c", "wildcards are a whole token"),
        ("a.(a)", "(a)", "contains '('"),
        ("a..b", "", "empty token at position 2"),
    ],
)
def test_seed_001_invalid_pattern_messages(
    sep: str, pattern: str, segment: str, fragment: str
) -> None:
    with pytest.raises(RuleError) as info:
        pattern_tokens(s(pattern, sep), sep)
    assert info.value.segment == segment and fragment in str(info.value)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(
    ("kind", "segment", "fragment"),
    [
        (PubRule, "a?", "'?' is not allowed in publish rules"),
        (SubRule, "a?", "'?' is allowed only as a whole segment"),
        (PubRule, "a*b", "'*' is allowed only as a prefix variant inside alternatives"),
        (SubRule, "a*b", "'*' is allowed only as a whole segment"),
        (SubRule, "*a", "'*' is allowed only as a whole segment"),
        (SubRule, "**", "'*' is allowed only as a whole segment"),
        (PubRule, "?", "'?' is not allowed in publish rules"),
    ],
)
def test_misplaced_wildcards_in_rules(
    sep: str, kind: type[PubRule] | type[SubRule], segment: str, fragment: str
) -> None:
    with pytest.raises(RuleError) as info:
        kind.parse(s("x.", sep) + segment + s(".y", sep), sep)
    assert info.value.segment == segment and fragment in str(info.value)


@pytest.mark.parametrize("sep", SEPARATORS)
@settings(max_examples=300, deadline=None)
@given(
    mids=st.lists(st.sampled_from(["a", "b-1", "*", "+", "p*", "x~@"]), max_size=5),
    last=st.sampled_from(["a", "*", "+", "q*", "#", ">", "q#", "q>"]),
)
def test_pattern_tokens_render_back(sep: str, mids: list[str], last: str) -> None:
    text = sep.join([*mids, last])
    if "+" in text and sep == ".":
        with pytest.raises(RuleError):
            pattern_tokens(text, sep)
        return
    assert render(pattern_tokens(text, sep), sep) == text.replace("+", "*")
