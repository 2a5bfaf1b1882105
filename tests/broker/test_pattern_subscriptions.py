"""Which SUBSCRIBE filters are runtime patterns on a seed001 listener, their MQTT cover, and the
pattern index of a topic space (``broker/pattern_subscriptions.py``, ``topic_space.py``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.policy import covering_mqtt_filter
from edge_broker.broker.session import Session, SubscriptionEntry
from edge_broker.broker.topic_space import TopicSpace
from edge_broker.identity import Identity
from edge_broker.matching.errors import RuleError
from edge_broker.matching.mqtt_topics import topic_matches
from edge_broker.matching.subscription_patterns import (
    parse_pattern,
    runtime_pattern,
    split_shared,
    subscription_pattern,
)
from edge_broker.mqtt.packets import Publish, Unsuback, Unsubscribe
from tests.broker.broker_raw import RawClient
from tests.conftest import start_broker


@pytest.mark.parametrize("sep", ["/", "."])
@pytest.mark.parametrize(
    ("text", "is_pattern"),
    [
        ("a.b.c", False),
        ("a.+.c", False),
        ("a.b.#", False),
        ("#", False),
        ("a.*.c", True),
        ("a.b*", True),
        ("a.b.>", True),
        (">", True),
        ("a.b#", True),
        ("a.b>", True),
        ("*", True),
    ],
)
def test_which_filters_go_to_the_pattern_index(sep, text, is_pattern):
    text = text.replace(".", sep)
    if "+" in text and sep == ".":
        assert runtime_pattern(text, sep) is None  # an MQTT filter with the '.' separator
        return
    assert (runtime_pattern(text, sep) is not None) is is_pattern


@pytest.mark.parametrize("text", ["a/>/b", "a/#/b*", "a/b>/x", "a/ab*c", "a/**", "a//b*"])
def test_invalid_patterns_raise(text):
    with pytest.raises(RuleError):
        runtime_pattern(text, "/")


def test_shared_patterns_split_only_where_patterns_are_allowed():
    shared = split_shared("$share/g/a/b>", "/", True)
    assert shared is not None and (shared.group, shared.filter) == ("g", "a/b>")
    assert split_shared("$share/g/a/b>", "/", False).filter == "a/b>"  # type: ignore[union-attr]
    with pytest.raises(RuleError):
        split_shared("$share/g/a/b#", "/", False)  # MQTT rules: '#' must be a whole level
    assert split_shared("$share/g/a/b#", "/", True).filter == "a/b#"  # type: ignore[union-attr]
    with pytest.raises(RuleError):
        split_shared("$share/g+/a/*", "/", True)
    assert subscription_pattern("a/*", "/", False) == (None, "a/*", None)
    shared_, inner, pattern = subscription_pattern("$share/g/a/*", "/", True)
    assert inner == "a/*" and pattern is not None and pattern.text == "a/*"


token = st.sampled_from(["a", "b", "ab", "b1", "c9"])
pattern_token = st.sampled_from(["a", "b", "*", "a*", "b*"])
tail = st.sampled_from(["", "#", ">", "a#", "b>", "a>", "b#"])


@settings(max_examples=300, deadline=None)
@given(st.lists(pattern_token, max_size=4), tail, st.lists(token, min_size=1, max_size=6))
def test_the_policy_cover_contains_every_channel_the_pattern_matches(body, last, channel_tokens):
    tokens = [*body, last] if last else body
    if not tokens:
        return
    pattern = parse_pattern("/".join(tokens), "/")
    channel = "/".join(channel_tokens)
    if pattern.matches(channel):
        cover = covering_mqtt_filter(pattern.text, "/")
        assert topic_matches(cover, channel, "/"), (pattern.text, cover, channel)


def test_cover_examples():
    assert covering_mqtt_filter("a.b*.>", ".") == "a.+.+.#"
    assert covering_mqtt_filter("a/b>", "/") == "a/+/+/#"
    assert covering_mqtt_filter("a/b#", "/") == "a/+/#"
    assert covering_mqtt_filter("a/#", "/") == "a/#"


def test_the_topic_space_routes_and_removes_both_kinds():
    space = TopicSpace("t")
    session = Session("c1", "t", Identity("c1", "anonymous", "t"), 5)
    mqtt_entry = SubscriptionEntry(session, "a/+", 0)
    pattern_entry = SubscriptionEntry(session, "a/b>", 1)
    space.subscribe(mqtt_entry, "a/+")
    space.subscribe(pattern_entry, "a/b>", parse_pattern("a/b>", "/"))
    assert space.subscription_count() == 2
    assert [dict(h) for h in space.match("a/b1")] == [{"c1": mqtt_entry}]
    assert [dict(h) for h in space.match("a/b1/x")] == [{"c1": pattern_entry}]
    assert space.match("$SYS/b1/x") == ()
    space.unsubscribe(pattern_entry, "a/b>")
    space.unsubscribe(mqtt_entry, "a/+")
    assert space.subscription_count() == 0
    assert space.match("a/b1/x") == () and space.match("a/b1") == ()


@pytest.mark.parametrize("share", [None, "g"])
def test_two_texts_of_one_pattern_are_two_subscriptions(share):
    """With '/', '+' is '*' in a pattern: "*/*" and "*/+" are one pattern but two subscriptions
    of the session (found by the oracle test below). Unsubscribing one keeps the other routed."""
    space = TopicSpace("t")
    session = Session("c1", "t", Identity("c1", "token", "t"), 5)
    entries = {}
    for text, qos in (("*/*", 0), ("*/+", 1)):
        written = text if share is None else f"$share/{share}/{text}"
        shared, inner, pattern = subscription_pattern(written, "/", True)
        entries[text] = SubscriptionEntry(session, written, qos, share_group=share)
        space.subscribe(entries[text], inner, pattern)
    assert space.subscription_count() == 2
    key = "c1" if share is None else ("$share", share)
    assert [set(h) for h in space.match("a/a")] == [{key}]
    space.unsubscribe(entries["*/*"], "*/*")
    assert space.subscription_count() == 1
    hits = space.match("a/a")
    assert [set(h) for h in hits] == [{key}]
    routed = hits[0][key]
    assert (routed if share is None else routed.members["c1"]) is entries["*/+"]
    space.unsubscribe(entries["*/*"], "*/*")  # again: no effect
    assert space.match("a/a") != ()
    space.unsubscribe(entries["*/+"], "*/+")
    assert space.subscription_count() == 0
    assert space.match("a/a") == ()


def test_a_broker_keeps_routing_the_other_text_of_a_pattern(tmp_path):
    """The same, end to end on a seed001 listener: after UNSUBSCRIBE "*/*" the client's "*/+"
    subscription still receives "a/a"."""
    broker = start_broker(
        tmp_path,
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\n'
        'port = 0\nsubscription_patterns = "seed001"\n',
    )
    try:
        with RawClient(broker.host, broker.port) as sub, RawClient(broker.host, broker.port) as pub:
            sub.connect("alias-sub")
            pub.connect("alias-pub")
            assert sub.subscribe("*/*", 1, packet_id=1).reason_codes == (1,)
            assert sub.subscribe("*/+", 1, packet_id=2).reason_codes == (1,)
            sub.send(Unsubscribe(3, ("*/*",)))
            assert sub.expect(Unsuback).reason_codes == (0,)
            pub.send(Publish("a/a", b"still", qos=0))
            got = sub.expect(Publish)
            assert (got.topic, got.payload) == ("a/a", b"still")
            sub.nothing()  # once, not twice
    finally:
        broker.stop()


level = st.sampled_from(["a", "b", "ab", "b1"])
mqtt_level = st.sampled_from(["a", "b", "ab", "+"])
pattern_level = st.sampled_from(["a", "b", "*", "a*", "b*", "+"])
pattern_tail = st.sampled_from(["", "#", ">", "a#", "b>"])


@st.composite
def filters(draw: st.DrawFn) -> str:
    """An MQTT filter or a runtime pattern, as a seed001 listener would accept them."""
    if draw(st.booleans()):
        levels = draw(st.lists(mqtt_level, min_size=1, max_size=4))
        return "/".join(levels + (["#"] if draw(st.booleans()) else []))
    body = draw(st.lists(pattern_level, max_size=3))
    last = draw(pattern_tail)
    return "/".join([*body, last] if last else body or ["*"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["c1", "c2", "c3"]), filters()), max_size=8),
    st.lists(level, min_size=1, max_size=5),
    st.data(),
)
def test_the_topic_space_routes_like_the_oracles(subs, topic_levels, data):
    """Both indexes together route each topic to exactly the sessions whose filter matches it
    (MQTT rules for MQTT filters, PATTERNS.md §2 for patterns), across subscribe/unsubscribe."""
    space = TopicSpace("t")
    sessions = {c: Session(c, "t", Identity(c, "token", "t"), 5) for c in ("c1", "c2", "c3")}
    live: dict[tuple[str, str], object] = {}
    for client, text in subs:
        shared, inner, pattern = subscription_pattern(text, "/", True)
        entry = SubscriptionEntry(sessions[client], text, 0)
        space.subscribe(entry, inner, pattern)
        live[(client, text)] = (entry, pattern)
    for key in data.draw(st.lists(st.sampled_from(sorted(live)), unique=True)) if live else []:
        entry, _ = live.pop(key)  # type: ignore[misc]
        space.unsubscribe(entry, key[1])
    topic = "/".join(topic_levels)
    expected = set()
    for (client, text), (_, pattern) in live.items():  # type: ignore[misc]
        hit = pattern.matches(topic) if pattern is not None else topic_matches(text, topic, "/")
        if hit:
            expected.add(client)
    got = {key for hits in space.match(topic) for key in hits}
    assert got == expected
