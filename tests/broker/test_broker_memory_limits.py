"""Issue 16: what one connected client can make the broker hold, over real sockets.

Each test states the attack of the issue, the MQTT answer the client gets (reason code and a
Reason String naming the ``[limits]`` key), the counter (``$SYS/broker/limits/<key>/refused``)
and, where the attack was about memory, the broker's RSS growth against the figure measured
before the limit existed."""

from __future__ import annotations

import time

from broker_raw import RawClient, rss_kib, unique_id

from edge_broker.mqtt.packets import (
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)

FAST_SYS = {"interval": 1}


def sys_value(b, name: str, timeout: float = 5.0) -> str:
    """A ``$SYS/broker/<name>`` value, waiting for it to appear."""
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("sys"))
        c.subscribe(f"$SYS/broker/{name}")
        return c.expect(Publish, timeout=timeout).payload.decode()


def roundtrip(b, level: int = 5) -> None:
    """A well-behaved client still gets its own QoS 1 message back."""
    topic = f"ok/{unique_id()}"
    with RawClient(b.host, b.port, level=level) as c:
        c.connect(unique_id("ok"))
        c.subscribe(topic, 1)
        c.send(Publish(topic, b"hello", 1, packet_id=7))
        got = [p for p in (c.recv(5), c.recv(5)) if isinstance(p, Publish)]
        assert got and got[0].payload == b"hello"


# -- topic and filter limits ----------------------------------------------------------------


def test_publish_topic_levels_and_length_are_refused_with_0x90(broker_factory):
    b = broker_factory({"sys": FAST_SYS})
    deep = "/".join(["l"] * 33)
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("tl"))
        c.send(Publish("/".join(["l"] * 32), b"x", 1, packet_id=1))  # 32 levels: fine
        assert c.expect(Puback).reason_code == 0x10
        c.send(Publish(deep, b"x", 1, packet_id=2))
        ack = c.expect(Puback)
        assert ack.reason_code == 0x90
        assert "limits.max_topic_levels" in ack.properties.reason_string
        c.send(Publish("a" * 1025, b"x", 1, packet_id=3))
        ack = c.expect(Puback)
        assert ack.reason_code == 0x90
        assert "limits.max_topic_length" in ack.properties.reason_string
        c.send(Publish("é" * 512, b"x", 1, packet_id=4))  # 512 characters, 1,024 bytes: fine
        assert c.expect(Puback).reason_code == 0x10
        c.send(Publish(deep, b"x", 0))  # QoS 0: nothing else would tell the client
        (disconnect,) = [p for p in c.closed() if isinstance(p, Disconnect)]
        assert disconnect.reason_code == 0x90
        assert "limits.max_topic_levels" in disconnect.properties.reason_string
    with RawClient(b.host, b.port, level=4) as c:  # 3.1.1 has no way to refuse: closed
        c.connect(unique_id("tl3"))
        c.send(Publish(deep, b"x", 1, packet_id=1))
        assert c.closed() == []
    time.sleep(1.5)
    assert int(sys_value(b, "limits/max_topic_levels/refused")) == 3
    assert int(sys_value(b, "limits/max_topic_length/refused")) == 1
    roundtrip(b)


def test_subscribe_filter_limits_get_suback_0x8f(broker_factory):
    b = broker_factory({"limits": {"max_topic_levels": 4, "max_topic_length": 100}})
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("sf"))
        c.send(Subscribe(1, (Subscription("a/b/c/d", 0), Subscription("a/b/c/d/e", 0),
                             Subscription("x" * 101, 0), Subscription("a/+/#", 1))))
        suback = c.expect(Suback)
        assert suback.reason_codes == (0, 0x8F, 0x8F, 1)
        reason = suback.properties.reason_string
        assert "limits.max_topic_levels" in reason and "limits.max_topic_length" in reason
        assert "x" * 100 not in reason  # the Reason String does not repeat long filters
    with RawClient(b.host, b.port, level=4) as c:
        c.connect(unique_id("sf3"))
        c.send(Subscribe(1, (Subscription("a/b/c/d/e", 0), Subscription("a", 0))))
        assert c.expect(Suback).reason_codes == (0x80, 0)


def test_deep_empty_filters_cost_no_memory(broker_factory):
    """Issue 16: 10 subscriptions of 65,000 empty levels held +160 MB."""
    b = broker_factory()
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("deep"))
        c.send(Pingreq())
        c.expect(Pingresp)
        before = rss_kib(b.pid)
        for i in range(10):
            c.send(Subscribe(i + 1, (Subscription("/" * 65_000 + str(i), 0),)))
            assert c.expect(Suback, timeout=30).reason_codes == (0x8F,)
        after = rss_kib(b.pid)
    assert after - before < 20_000, (before, after)  # KiB
    log = b.log()
    assert log.count("limits.max_topic_levels") <= 2  # rate-limited: not one line per refusal
    assert "/" * 200 not in log
    roundtrip(b)
