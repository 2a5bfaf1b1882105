"""The answers of the configured limits and capabilities (reason codes, Reason Strings naming the
``[limits]`` or ``[broker]`` key) on the in-memory broker (engine_harness.py): the real Broker and
Connection behind an in-memory transport. Moved from test_broker_limits.py,
test_broker_memory_limits.py and test_broker_sessions.py, which ran each against its own broker
process; assertions unchanged,
and the overload ones no longer wait out a window of wall-clock time: the broker is idle when
the harness answers, so what has not arrived by then never will. What stays there needs a
process: its RSS, a socket's receive buffer, a real timeout."""

from __future__ import annotations

import logging

import pytest
from broker_raw import raw_publish, unique_id
from engine_harness import MemoryBroker, MemoryClient

from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Will,
)

# -- test_broker_limits.py ------------------------------------------------------------------


def test_max_connections() -> None:
    # the broker-wide limit alone (the principal's share: test_broker_quotas.py)
    limits = {"max_connections": 2, "principal_share": 1.0, "tenant_share": 1.0}
    with MemoryBroker({"limits": limits}) as mb:
        a, c = mb.client(), mb.client()
        assert a.connect("a").reason_code == 0
        assert c.connect("c").reason_code == 0
        with mb.client() as third:
            assert third.connect("d").reason_code == 0x97
            third.closed()
        with mb.client(4) as third:
            assert third.connect("e").reason_code == 0x03


def test_connect_rate() -> None:
    # the global bucket alone: one address may take all of it (each address's own share is
    # tests/auth/test_login_fairness.py); no time passes between the three
    limits = {"connect_rate": 0.5, "connect_burst": 2, "source_connect_share": 1.0}
    with MemoryBroker({"limits": limits}) as mb:
        codes = []
        for i in range(3):
            with mb.client() as c:
                codes.append(c.connect(f"r{i}").reason_code)
        assert codes == [0, 0, 0x9F]


def test_max_subscriptions_per_client() -> None:
    with MemoryBroker({"limits": {"max_subscriptions_per_client": 2}}) as mb:
        c = mb.client()
        c.connect("s")
        c.send(Subscribe(1, (Subscription("a", 0), Subscription("b", 0), Subscription("c", 0))))
        assert c.expect(Suback).reason_codes == (0, 0, 0x97)
        c.send(Subscribe(2, (Subscription("a", 1),)))  # replacing an existing one is fine
        assert c.expect(Suback).reason_codes == (1,)


def test_maximum_qos_and_retain_unavailable() -> None:
    with MemoryBroker({"broker": {"maximum_qos": 1, "retain_available": False}}) as mb:
        c = mb.client()
        ack = c.connect("q")
        assert ack.properties.maximum_qos == 1 and ack.properties.retain_available == 0
        c.send(Subscribe(1, (Subscription("x", 2),)))
        assert c.expect(Suback).reason_codes == (1,)
        c.send(Publish("x", b"r", 0, retain=True))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x9A
        c = mb.client()
        c.connect("q2")
        c.send(Publish("x", b"2", 2, packet_id=1))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x9B


def test_capabilities_off() -> None:
    off = {"wildcard_subscriptions": False, "shared_subscriptions": False, "topic_alias_maximum": 0}
    with MemoryBroker({"broker": off}) as mb:
        c = mb.client()
        p = c.connect("w").properties
        assert p.wildcard_subscription_available == 0 and p.shared_subscription_available == 0
        assert p.topic_alias_maximum is None
        c.send(
            Subscribe(
                1, (Subscription("a/+", 0), Subscription("$share/g/a", 0), Subscription("a/b", 0))
            )
        )
        assert c.expect(Suback).reason_codes == (0xA2, 0x9E, 0)


def test_will_beyond_capabilities_refused() -> None:
    broker = {
        "maximum_qos": 1,
        "retain_available": False,
        "subscription_identifiers": False,
        "topic_alias_maximum": 0,
    }
    with MemoryBroker({"broker": broker}) as mb:
        assert mb.client().connect("w2", will=Will("w", b"x", qos=2)).reason_code == 0x9B
        assert mb.client().connect("w3", will=Will("w", b"x", retain=True)).reason_code == 0x9A
        assert mb.client(4).connect("w4", will=Will("w", b"x", qos=2)).reason_code == 0x05
        c = mb.client()
        c.connect("sid")
        c.send(Subscribe(1, (Subscription("a", 0),), Properties(subscription_identifiers=(3,))))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0xA1
        c = mb.client()
        c.connect("alias0")
        c.send(Publish("a", b"x", 0, properties=Properties(topic_alias=1)))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x94


# -- test_broker_memory_limits.py: topic and filter limits ----------------------------------


def test_will_topic_beyond_the_limits_refuses_the_connect() -> None:
    with MemoryBroker() as mb:
        c = mb.client()
        c.send(Connect(5, unique_id("w"), True, 60, will=Will("/" * 40, b"bye")))
        connack = c.expect(Connack)
        assert connack.reason_code == 0x90
        assert "limits.max_topic_levels" in connack.properties.reason_string
        c = mb.client()
        assert c.connect(unique_id("w"), will=Will("w/" + "x" * 2000, b"bye")).reason_code == 0x90


def test_subscribe_filter_limits_get_suback_0x8f() -> None:
    with MemoryBroker({"limits": {"max_topic_levels": 4, "max_topic_length": 100}}) as mb:
        c = mb.client()
        c.connect(unique_id("sf"))
        c.send(
            Subscribe(
                1,
                (
                    Subscription("a/b/c/d", 0),
                    Subscription("a/b/c/d/e", 0),
                    Subscription("x" * 101, 0),
                    Subscription("a/+/#", 1),
                ),
            )
        )
        suback = c.expect(Suback)
        assert suback.reason_codes == (0, 0x8F, 0x8F, 1)
        reason = suback.properties.reason_string
        assert "limits.max_topic_levels" in reason and "limits.max_topic_length" in reason
        assert "x" * 100 not in reason  # the Reason String does not repeat long filters
        c = mb.client(4)
        c.connect(unique_id("sf3"))
        c.send(Subscribe(1, (Subscription("a/b/c/d/e", 0), Subscription("a", 0))))
        assert c.expect(Suback).reason_codes == (0x80, 0)


# -- per-client publish quotas --------------------------------------------------------------


def test_publish_byte_rate_quota() -> None:
    # the bucket refills on the broker's clock, which does not move here: the third is over
    limits = {"max_packet_size": 1024, "publish_byte_rate": 100, "publish_byte_burst": 2000}
    with MemoryBroker({"limits": limits}) as mb:
        c = mb.client()
        c.connect(unique_id("bytes"))
        codes = []
        for i in range(3):
            c.send(Publish("b/t", b"x" * 900, 1, packet_id=i + 1))
            codes.append(c.expect(Puback))
        assert [a.reason_code for a in codes] == [0x10, 0x10, 0x97]
        assert "limits.publish_byte_rate" in codes[-1].properties.reason_string


# -- overload of an online QoS 1 subscriber -------------------------------------------------

OVERLOAD = {"max_inflight": 5, "max_queued_messages": 10}  # as test_broker_memory_limits.py


def _acks(c: MemoryClient) -> int:
    """The PUBACKs the broker has sent ``c`` by now (it is idle: no more are on their way)."""
    return sum(isinstance(p, Puback) for p in c.drain())


def _burst(mb: MemoryBroker, sub_id: str, n: int = 30) -> tuple[MemoryClient, MemoryClient]:
    sub = mb.client()
    sub.connect(sub_id)
    sub.subscribe("burst/t", 1)
    pub = mb.client()
    pub.connect(unique_id("pub"))
    pub.send_raw(
        b"".join(raw_publish("burst/t", b"", i.to_bytes(2, "big"), 1, i + 1) for i in range(n))
    )
    return sub, pub


def test_overflow_drop_is_counted_and_logged_with_the_client_id(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO), MemoryBroker({"limits": OVERLOAD}) as mb:
        sub, pub = _burst(mb, "slow-sub-drop")
        assert _acks(pub) == 30  # every PUBLISH acknowledged at once
        got = sub.publishes()  # now the subscriber reads and acknowledges
        assert len(got) == 15  # 5 in flight + 10 queued: 15 dropped
        assert "limits.max_queued_messages" in caplog.text and "slow-sub-drop" in caplog.text


def test_overflow_backpressure_loses_nothing() -> None:
    limits = {**OVERLOAD, "queue_overflow": "backpressure", "backpressure_timeout": 30}
    with MemoryBroker({"limits": limits}) as mb:
        sub, pub = _burst(mb, "slow-sub-bp")
        assert _acks(pub) == 16  # 5 in flight, 10 queued, 1 beyond: then the publisher waits
        got = sub.publishes()
        assert sorted(int.from_bytes(p.payload, "big") for p in got) == list(range(30))
        assert _acks(pub) == 14


# -- broker-wide totals ---------------------------------------------------------------------


def test_subscriptions_total() -> None:
    limits = {"max_subscriptions_total": 5, "tenant_share": 1.0, "principal_share": 1.0}
    with MemoryBroker({"limits": limits, "sys": {"interval": 0}}) as mb:
        a, c = mb.client(), mb.client()
        a.connect(unique_id("sa"))
        a.send(Subscribe(1, tuple(Subscription(f"a/{i}", 0) for i in range(3))))
        assert a.expect(Suback).reason_codes == (0, 0, 0)
        c.connect(unique_id("sc"))
        c.send(Subscribe(1, tuple(Subscription(f"c/{i}", 0) for i in range(3))))
        suback = c.expect(Suback)
        assert suback.reason_codes == (0, 0, 0x97)
        assert "limits.max_subscriptions_total" in suback.properties.reason_string
        c.send(Subscribe(2, (Subscription("c/0", 1),)))  # replacing one is no new one
        assert c.expect(Suback).reason_codes == (1,)


# -- test_broker_sessions.py ----------------------------------------------------------------


def test_offline_queue_bounded() -> None:
    with MemoryBroker({"limits": {"max_queued_messages": 3}}) as mb:
        name = unique_id("s")
        t = unique_id("bq/")
        with mb.client() as s:  # a parked session (park_session, test_broker_sessions.py)
            s.connect(name, clean=False, properties=Properties(session_expiry_interval=60))
            s.send(Subscribe(1, (Subscription(t, 1),)))
            s.expect(Suback)
            s.send(Disconnect())
            s.closed()
        with mb.client() as p:
            p.connect(unique_id("s"))
            for i in range(10):
                p.send(Publish(t, b"%d" % i, 1, packet_id=i + 1))
                p.expect(Puback)
        with mb.client() as s:
            s.connect(name, clean=False, properties=Properties(session_expiry_interval=60))
            got = [s.expect(Publish).payload for _ in range(3)]
            assert got == [b"0", b"1", b"2"]
            s.nothing()
