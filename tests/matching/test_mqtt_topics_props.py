"""Property tests: MQTT filter matching, containment and overlap against slow oracles."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from mqtt_oracle import (
    FILTER_LITERALS,
    TOPIC_LEVELS,
    all_topics,
    depth_bound,
    matched_set,
    oracle_matches,
)

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

SEPS = st.sampled_from(["/", "."])


@st.composite
def filters(draw: st.DrawFn, max_levels: int = 3) -> list[str]:
    body = draw(st.lists(st.sampled_from([*FILTER_LITERALS, "+"]), min_size=0, max_size=max_levels))
    if body in ([], [""]) or draw(st.booleans()):
        body = [*body, "#"]
    return body


# A topic name has at least one character, so the single empty level is not a topic.
topics = st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=5).filter(lambda t: t != [""])


@settings(max_examples=500, deadline=None)
@given(filters(max_levels=4), topics, SEPS)
def test_topic_matches_agrees_with_regex(flt: list[str], topic: list[str], sep: str) -> None:
    f = sep.join(flt)
    t = sep.join(topic)
    validate_topic_filter(f, sep)
    assert topic_matches(f, t, sep) == oracle_matches(f, t, sep)


@settings(max_examples=300, deadline=None)
@given(filters(), filters(), SEPS)
def test_contains_and_overlap_agree_with_enumeration(a: list[str], b: list[str], sep: str) -> None:
    fa = sep.join(a)
    fb = sep.join(b)
    universe = all_topics(depth_bound(fa, fb, sep=sep), sep)
    ma = matched_set(fa, universe, sep)
    mb = matched_set(fb, universe, sep)
    assert filter_contains(fa, fb, sep) == (mb <= ma), (fa, fb)
    assert filter_contains(fb, fa, sep) == (ma <= mb), (fb, fa)
    assert filters_overlap(fa, fb, sep) == bool(ma & mb), (fa, fb)
    assert filters_overlap(fb, fa, sep) == bool(ma & mb)


@settings(max_examples=300, deadline=None)
@given(filters(), filters(), topics)
def test_containment_is_consistent_with_matching(
    a: list[str], b: list[str], topic: list[str]
) -> None:
    fa, fb, t = "/".join(a), "/".join(b), "/".join(topic)
    if filter_contains(fa, fb) and topic_matches(fb, t):
        assert topic_matches(fa, t)
    if topic_matches(fa, t) and topic_matches(fb, t):
        assert filters_overlap(fa, fb)


def oracle_valid_filter(text: str, sep: str) -> bool:
    """MQTT §4.7.1 spelled out: non-empty; '+' and '#' only as whole levels; '#' only last."""
    if not text or "\x00" in text:
        return False
    levels = text.split(sep)
    for i, level in enumerate(levels):
        if level in ("+", "#"):
            if level == "#" and i != len(levels) - 1:
                return False
        elif "+" in level or "#" in level:
            return False
    return True


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="a/.+#$\x00", max_size=10), SEPS)
def test_filter_validation_agrees_with_the_rules(text: str, sep: str) -> None:
    ok = oracle_valid_filter(text, sep)
    try:
        validate_topic_filter(text, sep)
    except RuleError as exc:
        assert not ok, text
        assert exc.rule == text
    else:
        assert ok, text
    name_ok = bool(text) and "\x00" not in text and "+" not in text and "#" not in text
    try:
        validate_topic_name(text, sep)
    except RuleError:
        assert not name_ok, text
    else:
        assert name_ok, text


@settings(max_examples=300, deadline=None)
@given(
    st.text(alphabet="abc$-_", min_size=1, max_size=5),
    filters(),
    SEPS,
)
def test_parse_shared_round_trips(group: str, flt: list[str], sep: str) -> None:
    inner = sep.join(flt)
    assert parse_shared(f"$share{sep}{group}{sep}{inner}", sep) == SharedFilter(group, inner)
    assert parse_shared(inner, sep) is None
