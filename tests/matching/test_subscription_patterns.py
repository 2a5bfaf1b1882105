"""Seed 001 runtime subscription patterns (PATTERNS.md §2): every example, with '.' and '/'."""

from __future__ import annotations

import pytest

from edge_broker.matching import RuleError, parse_pattern, pattern_matches

SEPARATORS = [".", "/"]


def s(text: str, sep: str) -> str:
    """Seed examples are written with '.'; rewrite them for ``sep``."""
    return text.replace(".", sep)


# (pattern, channel, matches) straight from seed 001 and PATTERNS.md §2 (D13, D16).
EXAMPLES = [
    # Exact
    ("abc", "abc", True),
    ("abc", "abd", False),
    ("a.b.c", "a.b.c", True),
    ("a.b.c", "a.b", False),
    ("a.b.c", "a.b.c.d", False),
    # Any one token
    ("a.*.c", "a.b.c", True),
    ("a.*.c", "a.b.x.c", False),
    ("*", "a", True),
    ("*", "a.b", False),
    # Prefix one token: b* matches b or b1, but consumes only one token (D13)
    ("a.b*", "a.b", True),
    ("a.b*", "a.b1", True),
    ("a.b*", "a.c", False),
    ("a.b*", "a.b1.x", False),
    ("a.b*.c", "a.b1.c", True),
    # '>' one or more tokens: a.b.> matches a.b.x, a.b.x.y, not a.b
    ("a.b.>", "a.b.x", True),
    ("a.b.>", "a.b.x.y", True),
    ("a.b.>", "a.b", False),
    # '#' zero or more: a.b.# matches a.b, a.b.x, a.b.x.y
    ("a.b.#", "a.b", True),
    ("a.b.#", "a.b.x", True),
    ("a.b.#", "a.b.x.y", True),
    ("a.b.#", "a.c", False),
    # prefix>: a.b.c> matches a.b.c1.x, a.b.c99.x.y, not a.b.c1
    ("a.b.c>", "a.b.c1.x", True),
    ("a.b.c>", "a.b.c99.x.y", True),
    ("a.b.c>", "a.b.c1", False),
    ("a.b.c>", "a.b.d1.x", False),
    # prefix#: a.b.c# matches a.b.c1, a.b.c1.x, a.b.c99.x.y
    ("a.b.c#", "a.b.c1", True),
    ("a.b.c#", "a.b.c1.x", True),
    ("a.b.c#", "a.b.c99.x.y", True),
    ("a.b.c#", "a.b.c", True),  # D13: the prefix itself
    ("a.b.c#", "a.b.d", False),
    ("a.b.c#", "a.b", False),
    # D16: '#' or '>' alone match every channel
    ("#", "a", True),
    ("#", "a.b.c", True),
    (">", "a", True),
    (">", "a.b.c", True),
    ("c#", "c", True),
    ("c>", "c", False),
    ("c>", "c1.x", True),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("pattern", "channel", "expected"), EXAMPLES)
def test_seed_examples(pattern: str, channel: str, expected: bool, sep: str) -> None:
    compiled = parse_pattern(s(pattern, sep), sep)
    assert compiled.matches(s(channel, sep)) is expected
    assert pattern_matches(s(pattern, sep), s(channel, sep), sep) is expected


def test_plus_is_an_alias_of_star_only_with_slash() -> None:
    assert pattern_matches("a/+/c", "a/b/c", "/")
    assert not pattern_matches("a/+/c", "a/b/x/c", "/")
    with pytest.raises(RuleError):
        parse_pattern("a.+.c", ".")


def test_other_separator_is_a_literal_character() -> None:
    assert pattern_matches("a/b.*", "a/b.c", "/")  # 'b.' is a prefix literal with '/'
    assert not pattern_matches("a/b.*", "a/b/c", "/")
    assert pattern_matches("a.b/c", "a.b/c", ".")


# D15 and the seed's "Invalid patterns"; each with the segment the error must name.
INVALID = [
    ("a.>.b", ">"),
    ("a.#.b", "#"),
    ("a.b.c>.x", "c>"),
    ("a.b.c#.x", "c#"),
    ("a.ab*c", "ab*c"),
    ("**", "**"),
    ("*>", "*>"),
    ("*#", "*#"),
    ("#>", "#>"),
    ("a*b", "a*b"),
    ("a#b", "a#b"),
    ("*a", "*a"),
    ("?", "?"),
    ("(a)", "(a)"),
    ("a|b", "a|b"),
    ("a..b", ""),
    (".a", ""),
    ("a.", ""),
    ("", ""),
    ("a b", "a b"),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("pattern", "segment"), INVALID)
def test_invalid_patterns(pattern: str, segment: str, sep: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_pattern(s(pattern, sep), sep)
    assert info.value.rule == s(pattern, sep)
    assert info.value.segment == s(segment, sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_limits(sep: str) -> None:
    parse_pattern(sep.join(["a"] * 32), sep)  # D10: 32 tokens
    with pytest.raises(RuleError, match="33 tokens"):
        parse_pattern(sep.join(["a"] * 33), sep)
    parse_pattern("a" * 128, sep)  # D10: 128 bytes a token
    with pytest.raises(RuleError, match="128"):
        parse_pattern("a" * 129, sep)
    parse_pattern(sep.join(["a" * 127, "b" * 128]), sep)  # D9: 256 bytes in all
    with pytest.raises(RuleError, match="257 bytes"):
        parse_pattern(sep.join(["a" * 128, "b" * 128]), sep)


def test_compiled_pattern_is_immutable_and_keeps_its_separator() -> None:
    p = parse_pattern("a.b*.>", ".")
    with pytest.raises(AttributeError):
        p.text = "x"  # type: ignore[misc]
    assert p.min_tokens == 3
    with pytest.raises(ValueError, match="separator"):
        pattern_matches(p, "a/b/c", "/")
    assert pattern_matches(p, "a.b.c")
