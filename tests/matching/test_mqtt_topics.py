"""Examples of PATTERNS.md §4 and MQTT §4.7, each with '/' and again with '.'."""

from __future__ import annotations

import pytest

from edge_broker.matching import (
    RuleError,
    SharedFilter,
    filter_contains,
    filters_overlap,
    parse_shared,
    topic_matches,
    validate_topic_filter,
    validate_topic_name,
)

SEPARATORS = ["/", "."]


def s(text: str, sep: str) -> str:
    """Write an example given with '/' in the separator ``sep``."""
    return text.replace("/", sep)


MATCHES = [
    ("a/#", "a", True),  # '#' also matches the parent (§4.7.1.2)
    ("a/#", "a/b", True),
    ("a/#", "a/b/c", True),
    ("a/#", "ab", False),
    ("#", "a", True),
    ("#", "a/b/c", True),
    ("#", "/", True),
    ("+", "a", True),
    ("+", "a/b", False),
    ("+", "/a", False),
    ("+/+", "/a", True),  # empty levels are levels
    ("/+", "/a", True),
    ("a/+", "a/", True),
    ("a/+", "a", False),
    ("a/+/c", "a/b/c", True),
    ("a/+/c", "a//c", True),
    ("a//c", "a//c", True),
    ("a//c", "a/c", False),
    ("a/b", "a/b", True),
    ("a/b", "a/b/c", False),
    ("a/b/c", "a/b", False),
    ("sport/tennis/player1/#", "sport/tennis/player1", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
    ("sport/#", "sport", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player1/ranking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    # The $ rule (§4.7.2)
    ("#", "$SYS/monitor/Clients", False),
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("$SYS/#", "$SYS", True),
    ("+", "$SYS", False),
    ("a/+", "a/$x", True),  # only the first level is special
    ("a/#", "a/$x/y", True),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("flt", "topic", "expected"), MATCHES)
def test_topic_matches(flt: str, topic: str, expected: bool, sep: str) -> None:
    assert topic_matches(s(flt, sep), s(topic, sep), sep) is expected


CONTAINS = [
    ("a/+", "a/x", True),
    ("a/+", "a/+", True),
    ("a/+", "a/#", False),  # PATTERNS.md §4: the leak several brokers have
    ("a/#", "a/#", True),
    ("a/#", "a/+", True),
    ("a/#", "a", True),
    ("a/#", "a/b/+/#", True),
    ("a", "a/#", False),
    ("#", "a/b", True),
    ("#", "+", True),
    ("#", "#", True),
    ("+", "#", False),
    ("+/#", "#", True),  # a topic has at least one level, so both match every non-$ topic
    ("+/+/#", "#", False),
    ("/+/#", "/#", True),  # '/#' also matches '', which is not a topic name
    ("/#", "/+/#", True),
    ("+", "a", True),
    ("+/+", "a/+", True),
    ("a/+", "+/+", False),
    ("a/b", "a/b", True),
    ("a/b", "a/c", False),
    ("a/+/c", "a/b/c", True),
    ("a/+/c", "a/+/d", False),
    ("#", "$SYS/x", False),  # the $ rule
    ("+/x", "$SYS/x", False),
    ("$SYS/#", "$SYS/x", True),
    ("$SYS/+", "$SYS/x", True),
    ("$SYS/#", "#", False),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("outer", "inner", "expected"), CONTAINS)
def test_filter_contains(outer: str, inner: str, expected: bool, sep: str) -> None:
    assert filter_contains(s(outer, sep), s(inner, sep), sep) is expected


OVERLAP = [
    ("a/+", "a/#", True),
    ("a/+", "+/b", True),
    ("a/+", "b/+", False),
    ("a", "a/#", True),
    ("a/b", "a/#", True),
    ("#", "admin/#", True),  # AUTHZ.md gate 4: '#' against 'DENY admin/#'
    ("#", "$SYS/#", False),
    ("+/x", "$SYS/x", False),
    ("$SYS/#", "$SYS/+/x", True),
    ("a/+/c", "a/b/+", True),
    ("a/b", "a/b/c", False),
    ("a/+", "a", False),
    ("+", "+/+", False),
    ("+/#", "+", True),
    ("+", "/#", False),  # the only common string is '', which is not a topic name
    ("+", "#", True),
    ("/#", "#", True),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("a", "b", "expected"), OVERLAP)
def test_filters_overlap(a: str, b: str, expected: bool, sep: str) -> None:
    assert filters_overlap(s(a, sep), s(b, sep), sep) is expected
    assert filters_overlap(s(b, sep), s(a, sep), sep) is expected


VALID_FILTERS = [
    "#",
    "+",
    "a",
    "a/b",
    "a/+",
    "a/#",
    "+/+/#",
    "/",
    "//",
    "a//b",
    "$SYS/#",
    "/#",
    " ",
]
INVALID_FILTERS = [
    ("", ""),
    ("a/#/b", "#"),
    ("#/a", "#"),
    ("a#", "a#"),
    ("a/b#", "b#"),
    ("a/+b", "+b"),
    ("a+/b", "a+"),
    ("++", "++"),
    ("##", "##"),
    ("a\x00b", ""),
]


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("flt", VALID_FILTERS)
def test_valid_filters(flt: str, sep: str) -> None:
    validate_topic_filter(s(flt, sep), sep)


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize(("flt", "segment"), INVALID_FILTERS)
def test_invalid_filters_name_the_segment(flt: str, segment: str, sep: str) -> None:
    with pytest.raises(RuleError) as info:
        validate_topic_filter(s(flt, sep), sep)
    assert info.value.segment == s(segment, sep)
    assert info.value.rule == s(flt, sep)
    assert str(info.value).startswith(s(flt, sep) or "(empty)")


def test_hash_not_last_message_reads_like_the_spec() -> None:
    with pytest.raises(RuleError) as info:
        validate_topic_filter("store.#.status", ".")
    assert str(info.value) == "store.#.status: '#' must be the last segment"


@pytest.mark.parametrize("sep", SEPARATORS)
@pytest.mark.parametrize("topic", ["a", "a/b", "/", "$SYS/x", "a//b", "é/ü"])
def test_valid_topic_names(topic: str, sep: str) -> None:
    validate_topic_name(s(topic, sep), sep)


@pytest.mark.parametrize("topic", ["", "a/+", "#", "a/b#", "a\x00"])
def test_invalid_topic_names(topic: str) -> None:
    with pytest.raises(RuleError):
        validate_topic_name(topic)


def test_length_limit_is_in_utf8_bytes() -> None:
    validate_topic_name("a" * 65535)
    with pytest.raises(RuleError, match="65536 bytes"):
        validate_topic_name("a" * 65536)
    with pytest.raises(RuleError, match="bytes"):
        validate_topic_name("é" * 32768)  # 65,536 bytes in 32,768 characters
    with pytest.raises(RuleError, match="UTF-8"):
        validate_topic_filter("\ud800" * 20000)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_parse_shared(sep: str) -> None:
    assert parse_shared(s("$share/g1/a/+/#", sep), sep) == SharedFilter("g1", s("a/+/#", sep))
    assert parse_shared(s("$share/g/#", sep), sep) == SharedFilter("g", "#")
    assert parse_shared(s("a/b", sep), sep) is None
    assert parse_shared(s("$SYS/x", sep), sep) is None
    assert parse_shared("$share", sep) is None  # just a topic filter with a '$' first level
    assert parse_shared(s("$shared/x/y", sep), sep) is None


@pytest.mark.parametrize(
    "flt",
    [
        "$share/",
        "$share/g",
        "$share//a",
        "$share/g/",
        "$share/g+/a",
        "$share/#/a",
        "$share/g/a/#/b",
    ],
)
def test_malformed_shared_subscriptions(flt: str) -> None:
    with pytest.raises(RuleError) as info:
        parse_shared(flt)
    assert info.value.rule == flt
