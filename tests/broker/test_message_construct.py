"""The hot-path constructors of the routed message and of a QoS 1/2 delivery
(``broker/message.py`` ``make_message``, ``broker/session.py`` ``new_outgoing``): they write the
slots directly instead of through the frozen dataclass ``__init__`` (scripts/bench_egress.py,
issue 21's measurement), so they must build exactly what ``__init__`` builds."""

from __future__ import annotations

from dataclasses import replace

from edge_broker.authz.request import DELETE, PUT, QUERY
from edge_broker.broker.message import Message, make_message
from edge_broker.broker.session import Outgoing, new_outgoing
from edge_broker.matching.reserved_topics import (
    NOT_RESERVED,
    SMOKER_SYSTEM,
    SYS,
    ReservedTopics,
)
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import NO_PROPERTIES, Properties, Publish


def test_make_message_is_the_message_init_builds() -> None:
    props = Properties(response_topic="r", user_properties=(("k", "v"),), message_expiry_interval=5)
    fast = make_message("a/b", b"p", 1, True, props, "pub", lambda: 7.5)
    slow = Message("a/b", b"p", 1, True, props, 12.5, "pub")
    assert fast == slow and repr(fast) == repr(slow)
    assert type(fast) is Message
    assert (fast.expires_at, fast.origin, fast.encoded) == (12.5, "pub", {})
    assert fast.size == slow.size


def test_each_message_gets_its_own_encoding_cache() -> None:
    first = make_message("a/b", b"p", 0, False, NO_PROPERTIES, "pub")
    second = make_message("a/b", b"p", 0, False, NO_PROPERTIES, "pub")
    assert first.encoded is not second.encoded
    first.template(False, 0, False, ())
    assert len(first.encoded) == 1 and second.encoded == {}


def test_a_new_message_computes_its_facts_when_asked() -> None:
    topics = ReservedTopics("/")
    for topic, reservation in (
        ("$SYS/x", SYS),
        ("access/claim", SMOKER_SYSTEM),
        ("restricted/a", NOT_RESERVED),
    ):
        message = make_message(topic, b"p", 0, False, NO_PROPERTIES, None)
        assert message.reservation(topics) == reservation
        assert message.reservation(topics) == reservation  # the kept fact
        assert message.restricted == topic.startswith("restricted/")
        assert message.kind == PUT
    assert make_message("t", b"", 0, True, NO_PROPERTIES, None).kind == DELETE
    query = make_message("t", b"x", 0, False, Properties(response_topic="r"), None)
    assert query.kind == QUERY


def test_make_message_reads_now_only_for_an_expiring_message() -> None:
    reads: list[float] = []

    def clock() -> float:
        reads.append(100.0)
        return 100.0

    assert make_message("t", b"", 0, False, NO_PROPERTIES, None, clock).expires_at is None
    assert reads == []  # no clock call for a message that cannot expire
    expiring = Properties(message_expiry_interval=5)
    assert make_message("t", b"", 0, False, expiring, None, clock).expires_at == 105.0
    assert reads == [100.0]


def test_new_outgoing_is_the_outgoing_init_builds() -> None:
    message = make_message("a/b", b"p", 1, False, NO_PROPERTIES, "pub")
    epoch = object()
    fast = new_outgoing(message, 1, True, (3, 4), epoch)
    slow = Outgoing(message, 1, True, (3, 4), epoch)
    assert fast == slow and hash(fast) == hash(slow) and repr(fast) == repr(slow)
    assert type(fast) is Outgoing and fast.exempt is epoch


def test_every_variant_of_a_message_is_encoded_as_its_own() -> None:
    """The template cache keys the common variants by a small int and the others by a tuple:
    asked in any order, each variant gets its own bytes (a shared key would send one
    subscriber's QoS, RETAIN flag or protocol to another)."""
    message = make_message("a/b", b"payload", 2, True, NO_PROPERTIES, "pub")
    variants = [
        (v5, qos, retain, sub_ids)
        for sub_ids in ((), (7,))
        for retain in (False, True)
        for qos in (0, 1, 2)
        for v5 in (False, True)
        if v5 or not sub_ids
    ]
    for order in (variants, variants[::-1]):
        for v5, qos, retain, sub_ids in order:
            level = 5 if v5 else 4
            props = Properties(subscription_identifiers=sub_ids) if sub_ids else NO_PROPERTIES
            want = Publish("a/b", b"payload", qos, retain, False, 9 if qos else None, props)
            tpl = message.template(v5, qos, retain, sub_ids, 0, True, level)
            got = tpl.for_packet_id(9) if qos else tpl.data
            assert got == encode(want, level), (v5, qos, retain, sub_ids)


def test_the_size_is_counted_once_as_the_limits_count_it() -> None:
    """``Message.size`` is computed when the message is built (by either constructor, and
    again by ``dataclasses.replace``): topic, payload, 32, and the properties' estimate."""
    plain = make_message("a/b", b"xyz", 1, False, NO_PROPERTIES, "pub")
    assert plain.size == Message("a/b", b"xyz", 1, False).size == 3 + 3 + 32
    props = Properties(user_properties=(("k", "v"),))
    with_props = make_message("a/b", b"xyz", 1, False, props, None)
    assert with_props.size == Message("a/b", b"xyz", 1, False, props).size > plain.size
    assert replace(plain, topic="a/bcd").size == plain.size + 2
