"""Limits and capabilities from the configuration; slow consumers; garbage never kills a broker."""

from __future__ import annotations

import os
import random
import socket
import time

from broker_raw import RawClient, rss_kib

from edge_broker.mqtt.packets import (
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Publish,
    Suback,
    Subscribe,
    Subscription,
    Will,
)


def test_max_connections(broker_factory):
    # the broker-wide limit alone (the principal's share: test_broker_quotas.py)
    b = broker_factory(
        {"limits": {"max_connections": 2, "principal_share": 1.0, "tenant_share": 1.0}}
    )
    a, c = RawClient(b.host, b.port), RawClient(b.host, b.port)
    assert a.connect("a").reason_code == 0
    assert c.connect("c").reason_code == 0
    with RawClient(b.host, b.port) as third:
        assert third.connect("d").reason_code == 0x97
        third.closed()
    with RawClient(b.host, b.port, level=4) as third:
        assert third.connect("e").reason_code == 0x03
    a.close()
    c.close()


def test_connect_rate(broker_factory):
    # the global bucket alone: one address may take all of it (each address's own share is
    # tests/auth/test_login_fairness.py)
    limits = {"connect_rate": 0.5, "connect_burst": 2, "source_connect_share": 1.0}
    b = broker_factory({"limits": limits})
    codes = []
    for i in range(3):
        with RawClient(b.host, b.port) as c:
            codes.append(c.connect(f"r{i}").reason_code)
    assert codes == [0, 0, 0x9F]


def test_max_subscriptions_per_client(broker_factory):
    b = broker_factory({"limits": {"max_subscriptions_per_client": 2}})
    with RawClient(b.host, b.port) as c:
        c.connect("s")
        c.send(Subscribe(1, (Subscription("a", 0), Subscription("b", 0), Subscription("c", 0))))
        assert c.expect(Suback).reason_codes == (0, 0, 0x97)
        c.send(Subscribe(2, (Subscription("a", 1),)))  # replacing an existing one is fine
        assert c.expect(Suback).reason_codes == (1,)


def test_maximum_qos_and_retain_unavailable(broker_factory):
    b = broker_factory({"broker": {"maximum_qos": 1, "retain_available": False}})
    with RawClient(b.host, b.port) as c:
        ack = c.connect("q")
        assert ack.properties.maximum_qos == 1 and ack.properties.retain_available == 0
        c.send(Subscribe(1, (Subscription("x", 2),)))
        assert c.expect(Suback).reason_codes == (1,)
        c.send(Publish("x", b"r", 0, retain=True))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x9A
    with RawClient(b.host, b.port) as c:
        c.connect("q2")
        c.send(Publish("x", b"2", 2, packet_id=1))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x9B


def test_capabilities_off(broker_factory):
    b = broker_factory(
        {
            "broker": {
                "wildcard_subscriptions": False,
                "shared_subscriptions": False,
                "topic_alias_maximum": 0,
            }
        }
    )
    with RawClient(b.host, b.port) as c:
        p = c.connect("w").properties
        assert p.wildcard_subscription_available == 0 and p.shared_subscription_available == 0
        assert p.topic_alias_maximum is None
        c.send(
            Subscribe(
                1, (Subscription("a/+", 0), Subscription("$share/g/a", 0), Subscription("a/b", 0))
            )
        )
        assert c.expect(Suback).reason_codes == (0xA2, 0x9E, 0)


def _sys_value(b, name: str) -> int:
    with RawClient(b.host, b.port) as c:
        c.connect("")
        c.subscribe(f"$SYS/broker/{name}")
        return int(c.expect(Publish, timeout=5).payload)


def test_slow_subscriber_loses_its_qos0_not_broker_memory(broker_factory):
    b = broker_factory(
        {"limits": {"write_buffer_high": 65536, "write_buffer_low": 16384}, "sys": {"interval": 1}}
    )
    slow = socket.create_connection((b.host, b.port))
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow_client = RawClient.__new__(RawClient)
    slow_client.sock, slow_client.level = slow, 5
    from edge_broker.mqtt.codec import PacketReader

    slow_client.reader = PacketReader(side="client", protocol_level=5)
    slow_client.pending, slow_client.eof = [], False
    slow_client.connect("slow")
    slow_client.subscribe("flood")
    before = rss_kib(b.pid)
    payload = os.urandom(60_000)
    with RawClient(b.host, b.port) as pub:
        pub.connect("fast")
        for _ in range(1500):  # 90 MB towards a client that never reads
            pub.send(Publish("flood", payload, 0))
        pub.send(Pingreq())
        pub.expect(Pingresp, timeout=30)
    after = rss_kib(b.pid)
    assert after - before < 40_000, (before, after)
    # the count shows at the next $SYS interval: wait for it (the deadline only bounds a hang)
    dropped, deadline = 0, time.monotonic() + 30
    with RawClient(b.host, b.port) as c:
        c.connect("")
        c.subscribe("$SYS/broker/publish/messages/dropped")
        while dropped <= 1000:
            assert time.monotonic() < deadline, f"only {dropped} QoS 0 messages counted dropped"
            dropped = max([dropped, *(int(p.payload) for p in c.publishes(0.5))])
    assert dropped > 1000
    slow.close()


def test_garbage_never_kills_the_broker(broker_factory):
    b = broker_factory()
    rng = random.Random(1234)
    start = rss_kib(b.pid)
    for i in range(300):
        s = socket.create_connection((b.host, b.port))
        if i % 2:
            s.sendall(b"\x10" + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))))
        else:
            body = b"\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x01x"
            s.sendall(bytes([0x10, len(body)]) + body)
            s.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
        s.close()
    with RawClient(b.host, b.port) as c:
        assert c.connect("after-garbage").reason_code == 0
        c.send(Pingreq())
        c.expect(Pingresp)
    assert b.alive()
    assert rss_kib(b.pid) - start < 20_000
    assert "Traceback" not in b.log()


def test_will_beyond_capabilities_refused(broker_factory):
    b = broker_factory(
        {
            "broker": {
                "maximum_qos": 1,
                "retain_available": False,
                "subscription_identifiers": False,
                "topic_alias_maximum": 0,
            }
        }
    )
    with RawClient(b.host, b.port) as c:
        assert c.connect("w2", will=Will("w", b"x", qos=2)).reason_code == 0x9B
    with RawClient(b.host, b.port) as c:
        assert c.connect("w3", will=Will("w", b"x", retain=True)).reason_code == 0x9A
    with RawClient(b.host, b.port, level=4) as c:
        assert c.connect("w4", will=Will("w", b"x", qos=2)).reason_code == 0x05
    with RawClient(b.host, b.port) as c:
        c.connect("sid")
        c.send(Subscribe(1, (Subscription("a", 0),), Properties(subscription_identifiers=(3,))))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0xA1
    with RawClient(b.host, b.port) as c:
        c.connect("alias0")
        c.send(Publish("a", b"x", 0, properties=Properties(topic_alias=1)))
        got = c.closed()
        assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x94
