"""Limits and capabilities from the configuration; slow consumers; garbage never kills a broker."""

from __future__ import annotations

import os
import random
import socket
import time

from broker_raw import RawClient, rss_kib

from edge_broker.mqtt.packets import (
    Pingreq,
    Pingresp,
    Publish,
)

# On the in-memory broker (test_limits_answers_memory.py): test_max_connections,
# test_connect_rate, test_max_subscriptions_per_client, test_maximum_qos_and_retain_unavailable,
# test_capabilities_off, test_will_beyond_capabilities_refused.


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
