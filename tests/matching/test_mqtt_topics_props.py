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
    filter_contains,
    filters_overlap,
    topic_matches,
    validate_topic_filter,
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
def test_contains_and_overlap_agree_with_enumeration(
    a: list[str], b: list[str], sep: str
) -> None:
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
def test_containment_is_consistent_with_matching(a: list[str], b: list[str], topic: list[str]) -> None:
    fa, fb, t = "/".join(a), "/".join(b), "/".join(topic)
    if filter_contains(fa, fb) and topic_matches(fb, t):
        assert topic_matches(fa, t)
    if topic_matches(fa, t) and topic_matches(fb, t):
        assert filters_overlap(fa, fb)
