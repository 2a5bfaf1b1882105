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


# -- byte-bounded caches and codec state ----------------------------------------------------


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def raw_publish(topic: str, properties: bytes, payload: bytes = b"", qos: int = 0,
                packet_id: int = 0) -> bytes:
    """An MQTT 5 PUBLISH with a raw property block (fast to build for megabyte blocks)."""
    t = topic.encode()
    body = len(t).to_bytes(2, "big") + t
    if qos:
        body += packet_id.to_bytes(2, "big")
    body += varint(len(properties)) + properties + payload
    return bytes((0x30 | qos << 1,)) + varint(len(body)) + body


def test_megabyte_property_blocks_are_not_kept_per_connection(broker_factory):
    """Issue 16: 16 PUBLISH packets with 1 MB of empty user properties each held +247 MB
    (the per-connection property cache kept every block and its 200,000 decoded pairs)."""
    b = broker_factory()
    block = b"\x26\x00\x00\x00\x00" * 200_000  # 1 MB: 200,000 empty user properties
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("props"))
        c.send(Pingreq())
        c.expect(Pingresp)
        before = rss_kib(b.pid)
        for i in range(16):
            distinct = b"\x26\x00\x01" + bytes((65 + i,)) + b"\x00\x00"  # no two alike
            c.send_raw(raw_publish(f"props/{i}", distinct + block, b"x"))
        c.send(Pingreq())
        c.expect(Pingresp, timeout=60)
        after = rss_kib(b.pid)
    assert after - before < 60_000, (before, after)  # KiB: one block's decoding at a time
    roundtrip(b)


DENY_SECRET = """
[sys]
interval = 1

[limits]
max_topic_length = 65535
max_topic_levels = 65535

[[listeners]]
name = "tcp"
port = 0

[permissions.sets.main]
rules = [
  { id = "no-secret", topic = "secret/#", type = "DENY" },
  { id = "everything", topic = "#" },
]

[[permissions.assign]]
sets = ["main"]
"""


def test_denied_long_topics_do_not_fill_the_decision_caches(broker_factory):
    """Issue 16: 4,000 denied publishes to distinct 60 KB topics held +472 MB after the client
    left (the decision cache was bounded in entries only and each Reason String repeated the
    topic). Here with the topic limits raised to the protocol's maximum, so that only the
    caches' byte bounds stand in the way."""
    b = broker_factory(DENY_SECRET)
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("deny"))
        c.send(Pingreq())
        c.expect(Pingresp)
        before = rss_kib(b.pid)
        filler = "x" * 60_000
        for i in range(1500):
            c.send(Publish(f"secret/{i}/{filler}", b"p", 1, packet_id=i % 60000 + 1))
            if i % 100 == 99:
                for _ in range(100):
                    ack = c.expect(Puback, timeout=30)
                    assert ack.reason_code == 0x87
                    assert len(ack.properties.reason_string) < 400  # not the 60 KB topic
    time.sleep(0.5)
    after = rss_kib(b.pid)
    assert after - before < 40_000, (before, after)  # KiB, after the client left
    roundtrip(b)
