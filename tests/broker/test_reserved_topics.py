"""Reserved topics (AUTHZ.md §2 gate 2) hold with either separator (issue 15 item 9).

With ``[topics] separator = "."`` the gate used to know only the ``.`` spelling, so a client that
is not SMOKER-authenticated published ``access/claim`` (SMOKER.md's own spelling, which the
claim service answers) with PUBACK 0x00; it was routed and retained, and ``$SYS/...`` publishes
were accepted and retained too. The real broker in memory (engine_harness.py; a broker
process before, assertions unchanged), raw packets, both separators.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from broker_raw import unique_id
from engine_harness import MemoryBroker, MemoryClient, memory_broker

from edge_broker.matching.reserved_topics import ReservedTopics
from edge_broker.mqtt.packets import Properties, Puback, Publish, Suback, Subscribe, Subscription


def _topics(sep: str, me: str) -> list[str]:
    slash = [
        "access/claim",
        "access/unclaim",
        f"access/claims/{me}/request",
        "$SYS/broker/fake",
        "$SYS",
    ]
    if sep == "/":
        return slash
    return slash + [
        "access.claim",
        "access.unclaim",
        f"access.claims.{me}.request",
        "$SYS.broker.fake",
    ]


@pytest.fixture(params=["/", "."], ids=["slash", "dot"])
def sep_broker(request) -> Iterator[tuple[str, MemoryBroker]]:
    sep = request.param
    for mb in memory_broker({"topics": {"separator": sep}}):
        yield sep, mb


def _client(b: MemoryBroker, cid: str) -> MemoryClient:
    c = b.client()
    assert c.connect(cid).reason_code == 0
    return c


def test_non_smoker_client_cannot_publish_retain_or_route_reserved_topics(sep_broker):
    sep, b = sep_broker
    me = unique_id("r")
    sub = _client(b, unique_id("s"))
    topics = _topics(sep, me)
    wanted = [Subscription("#", 1)] + [Subscription(t, 1) for t in topics if t.startswith("$SYS")]
    sub.send(Subscribe(1, tuple(wanted)))
    assert all(code == 1 for code in sub.expect(Suback).reason_codes)
    pub = _client(b, unique_id("p"))
    for i, topic in enumerate(topics, start=1):
        pub.send(Publish(topic, b"forged", 1, retain=True, packet_id=i))
        ack = pub.expect(Puback)
        assert ack.reason_code == 0x87, (topic, ack)
        assert (
            ack.properties.reason_string
            and "reserved" in ack.properties.reason_string.lower()
            or "SYS" in (ack.properties.reason_string or "")
        ), (topic, ack)
    # the subscriber works (control) and got none of the forged messages
    ok = "ok" + sep + me
    pub.send(Publish(ok, b"fine", 1, packet_id=99))
    assert pub.expect(Puback).reason_code in (0x00, 0x10)
    got = [p for p in sub.publishes(1.0) if p.payload == b"forged" or p.topic == ok]
    assert [p.topic for p in got] == [ok]
    # nothing was retained: a new subscriber to each $SYS topic and to # sees no forged value
    late = _client(b, unique_id("l"))
    late.send(Subscribe(1, tuple(wanted)))
    late.expect(Suback)
    assert [p.topic for p in late.publishes(1.0) if p.payload == b"forged"] == []


def test_nobody_subscribes_to_smoker_system_topics_in_either_spelling(sep_broker):
    sep, b = sep_broker
    me = unique_id("r")
    c = _client(b, unique_id("c"))
    smoker = [t for t in _topics(sep, me) if t.startswith("access")]
    c.send(Subscribe(1, tuple(Subscription(t, 0) for t in smoker)))
    assert c.expect(Suback).reason_codes == tuple(0x87 for _ in smoker)


def test_smoker_system_topic_as_will_is_refused(sep_broker):
    sep, b = sep_broker
    from edge_broker.mqtt.packets import Will

    for topic in _topics(sep, unique_id("w")):
        c = b.client()
        ack = c.connect(unique_id("w"), will=Will(topic, b"x", 0, False, Properties()))
        assert ack.reason_code >= 0x80, (topic, ack)
        c.close()


@pytest.mark.parametrize("sep", ["/", "."])
def test_one_definition_covers_both_spellings(sep):
    reserved = ReservedTopics(sep)
    for topic in ("access/claim", "access/unclaim", "access/claims/X/request"):
        assert reserved.is_smoker_system(topic) and not reserved.routable(topic)
        assert reserved.claim_service(topic)
        spelled = topic.replace("/", sep)
        assert reserved.is_smoker_system(spelled) and not reserved.routable(spelled)
    assert reserved.is_sys("$SYS") and reserved.is_sys("$SYS/x") and reserved.is_sys(f"$SYS{sep}x")
    assert not reserved.is_sys("$SYSTEM") and reserved.routable("$SYS/broker/uptime")
    assert not reserved.is_smoker_system("accessory/claim")
    assert not reserved.is_smoker_system("access") and not reserved.is_smoker_system(
        "access/claimx"
    )
