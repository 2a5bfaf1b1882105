"""Issue 16: what one connected client can make the broker hold, over real sockets.

Each test states the attack of the issue, the MQTT answer the client gets (reason code and a
Reason String naming the ``[limits]`` key), the counter (``$SYS/broker/limits/limits_<key>/hits``)
and, where the attack was about memory, the broker's RSS growth against the figure measured
before the limit existed."""

from __future__ import annotations

import time

from broker_raw import RawClient, raw_publish, rss_kib, unique_id

from edge_broker.mqtt.packets import (
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)

# On the in-memory broker (test_limits_answers_memory.py): the will and filter limits' answers,
# test_publish_byte_rate_quota, the drop and backpressure overload tests and
# test_subscriptions_total.


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


# test_publish_topic_levels_and_length_are_refused_with_0x90: on the in-memory broker
# (test_limits_memory.py)


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


# -- retained limits ------------------------------------------------------------------------


# test_retained_limits_answer_0x97_and_count: on the in-memory broker (test_limits_memory.py)


def test_retained_flood_is_bounded_in_memory_and_log(broker_factory):
    """Issue 16: 200 retained messages of 1 MB held +387 MB; 20,000 retained 1 KB messages
    +67 MB and a 21 MB log."""
    b = broker_factory({"limits": {"max_retained_bytes": 8 * 1024 * 1024}})
    before = rss_kib(b.pid)
    payload = b"m" * 1_000_000
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("flood"))
        for i in range(200):
            c.send(Publish(f"big/{i}", payload, 0, True))
        small = b"s" * 1000
        for i in range(20_000):
            c.send(Publish(f"small/{i}", small, 0, True))
        c.send(Pingreq())
        c.expect(Pingresp, timeout=60)
    after = rss_kib(b.pid)
    assert after - before < 40_000, (before, after)  # KiB
    assert len(b.log()) < 20_000  # rate-limited: a few lines, not one per message
    roundtrip(b)


# -- per-client publish quotas --------------------------------------------------------------


# test_publish_rate_quota: on the in-memory broker (test_limits_memory.py)


# -- empty tenant spaces --------------------------------------------------------------------


# test_empty_tenant_spaces_are_freed: on the in-memory broker (test_limits_memory.py)


# -- overload of an online QoS 1 subscriber -------------------------------------------------

OVERLOAD = {"max_inflight": 5, "max_queued_messages": 10}


def _acks(c: RawClient, want: int, timeout: float) -> int:
    """The PUBACKs ``c`` gets until ``want`` have come or ``timeout`` seconds have passed."""
    n = 0
    deadline = time.monotonic() + timeout
    while n < want and time.monotonic() < deadline:
        try:
            if isinstance(c.recv(0.1), Puback):
                n += 1
        except TimeoutError:
            pass
    return n


def _burst(b, sub_id: str, n: int = 30) -> tuple[RawClient, RawClient]:
    sub = RawClient(b.host, b.port)
    sub.connect(sub_id)
    sub.subscribe("burst/t", 1)
    pub = RawClient(b.host, b.port)
    pub.connect(unique_id("pub"))
    pub.send_raw(
        b"".join(raw_publish("burst/t", b"", i.to_bytes(2, "big"), 1, i + 1) for i in range(n))
    )
    return sub, pub


def test_overflow_backpressure_is_bounded_in_time(broker_factory):
    b = broker_factory(
        {"limits": {**OVERLOAD, "queue_overflow": "backpressure", "backpressure_timeout": 0.5}}
    )
    sub, pub = _burst(b, "stuck-sub")  # never acknowledges
    assert _acks(pub, 30, 3.0) == 30  # held for 0.5 s, then the stuck subscriber's queue drops
    assert "limits.backpressure_timeout" in b.log()
    roundtrip(b)
    sub.close()
    pub.close()


# -- broker-wide totals ---------------------------------------------------------------------


# test_queued_bytes_total_bounds_every_queue_together: on the in-memory broker
# (test_limits_memory.py)


def test_encoded_variants_of_large_retained_messages_are_not_kept(broker_factory):
    """Each retained message kept up to 17 encoded copies (one per subscription identifier,
    expiry, alias ... variant): 17 SUBSCRIBEs of one client with distinct subscription
    identifiers made 15 MB of retained payload hold 17 × 15 MB."""
    # 15 MB of retained payload: more than the default max_retained_bytes (12 MiB)
    b = broker_factory(
        {
            "limits": {
                "tenant_share": 1.0,
                "principal_share": 1.0,
                "max_retained_bytes": 16 * 1024 * 1024,
            }
        }
    )
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("rp"))
        for i in range(60):
            c.send(Publish(f"rv/{i}", bytes([i]) * 250_000, 0, True))
        c.send(Pingreq())
        c.expect(Pingresp, timeout=30)
    before = rss_kib(b.pid)
    with RawClient(b.host, b.port) as s:
        s.connect(unique_id("rs"))
        for sub_id in range(1, 18):
            s.send(
                Subscribe(
                    sub_id,
                    (Subscription("rv/#", 0),),
                    Properties(subscription_identifiers=(sub_id,)),
                )
            )
            got = 0
            while got < 60:
                if isinstance(s.recv(30), Publish):
                    got += 1
    after = rss_kib(b.pid)
    assert after - before < 60_000, (before, after)  # KiB (before: about +250 MB)
