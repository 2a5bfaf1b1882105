"""Issue 16 limits that work over time, on the in-memory broker with a fake clock
(engine_harness.py): the publish-rate quota refills on the broker's clock, empty tenant
spaces are swept by its tick and the ``$SYS`` counters are published at their interval, so
no test waits for the wall clock. Moved from test_broker_memory_limits.py, assertions
unchanged (a ``$SYS`` value is read right after the update that carries it)."""

from __future__ import annotations

import logging

import pytest
from engine_harness import MemoryBroker, memory_broker

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish

FAST_SYS = {"interval": 1}
# One anonymous principal against a broker-wide total: the tenant and principal shares
# (limits/quotas.py, tested in test_broker_quotas.py) off
WHOLE_TOTALS = {"tenant_share": 1.0, "principal_share": 1.0}
OPEN_LISTENER = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}


def sys_value(mb: MemoryBroker, name: str, tenant: str | None = None) -> str:
    """A retained ``$SYS/broker/<name>`` value, as a new client reads it."""
    c = mb.client()
    props = Properties(user_properties=(("tenant", tenant),)) if tenant else Properties()
    c.connect(f"sys-{len(mb.clients)}", properties=props)
    c.subscribe(f"$SYS/broker/{name}")
    value = c.expect(Publish).payload.decode()
    c.send(Disconnect())
    return value


def roundtrip(mb: MemoryBroker, level: int = 5) -> None:
    """A well-behaved client still gets its own QoS 1 message back."""
    c = mb.client(level)
    c.connect(f"ok-{len(mb.clients)}")
    c.subscribe("ok/t", 1)
    c.send(Publish("ok/t", b"hello", 1, packet_id=7))
    got = [p for p in (c.recv(), c.recv()) if isinstance(p, Publish)]
    assert got and got[0].payload == b"hello"


def test_publish_rate_quota() -> None:
    for mb in memory_broker({"sys": FAST_SYS, "limits": {"publish_rate": 2, "publish_burst": 5}}):
        c = mb.client()
        c.connect("rate")
        codes = []
        for i in range(8):
            c.send(Publish("rate/t", b"v", 1, packet_id=i + 1))
            codes.append(c.expect(Puback))
        assert [a.reason_code for a in codes] == [0x10] * 5 + [0x97] * 3
        assert "limits.publish_rate" in codes[-1].properties.reason_string
        mb.advance(1.0)  # two tokens back, exactly
        c.send(Publish("rate/t", b"v", 1, packet_id=20))
        assert c.expect(Puback).reason_code == 0x10
        c.send_raw(encode(Publish("rate/t", b"v", 0), c.level) * 5)
        (disconnect,) = [p for p in c.closed() if isinstance(p, Disconnect)]
        assert disconnect.reason_code == 0x96
        c3 = mb.client(level=4)
        c3.connect("rate3")
        c3.send_raw(encode(Publish("rate/t", b"v", 0), c3.level) * 6)
        c3.closed()
        mb.advance(1.0)  # the next $SYS update
        assert int(sys_value(mb, "limits/limits_publish_rate/hits")) == 5
        roundtrip(mb)


def test_empty_tenant_spaces_are_freed() -> None:
    """Issue 16: 3,000 connections each naming a new tenant kept +36 MB, never freed."""
    config = {
        "sys": FAST_SYS,
        "limits": {"connect_rate": 100_000, "connect_burst": 100_000},
        # anonymous clients naming their tenant: the listener allows the choice
        "listeners": [OPEN_LISTENER],
    }
    for mb in memory_broker(config):
        kept = Properties(user_properties=(("tenant", "kept"),))
        keeper = mb.client()  # a tenant with a retained message stays
        keeper.connect("keeper", properties=kept)
        keeper.send(Publish("k/t", b"v", 1, True, packet_id=1))
        keeper.expect(Puback)
        keeper.send(Disconnect())
        for i in range(500):
            c = mb.client()
            c.connect(f"ta{i}", properties=Properties(user_properties=(("tenant", f"ta{i}"),)))
            c.send(Disconnect())
        mb.advance(5.5)  # one sweep (every 5 s) and a $SYS update after it
        # "~" and "kept" only: the 500 spaces (and the $SYS copies in each) are gone
        assert sys_value(mb, "limits/topic_spaces") == "2"
        again = mb.client()
        again.connect("keeper2", properties=kept)
        again.subscribe("k/#")
        assert again.expect(Publish).payload == b"v"


def test_publish_topic_levels_and_length_are_refused_with_0x90() -> None:
    for mb in memory_broker({"sys": FAST_SYS}):
        deep = "/".join(["l"] * 33)
        c = mb.client()
        c.connect("tl")
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
        c3 = mb.client(level=4)  # 3.1.1 has no way to refuse: closed
        c3.connect("tl3")
        c3.send(Publish(deep, b"x", 1, packet_id=1))
        assert c3.closed() == []
        mb.advance(1.0)  # the next $SYS update
        assert int(sys_value(mb, "limits/limits_max_topic_levels/hits")) == 3
        assert int(sys_value(mb, "limits/limits_max_topic_length/hits")) == 1
        roundtrip(mb)


def test_retained_limits_answer_0x97_and_count() -> None:
    config = {
        "sys": FAST_SYS,
        "limits": {
            "max_retained_messages": 5,
            "max_retained_per_client": 3,
            "max_retained_payload": 1000,
            "max_retained_bytes": 100_000,
            **WHOLE_TOTALS,
        },
    }
    for mb in memory_broker(config):
        c = mb.client()
        c.connect("ret-a")
        for i in range(3):
            c.send(Publish(f"r/a/{i}", b"v", 1, True, packet_id=i + 1))
            assert c.expect(Puback).reason_code == 0x10
        c.send(Publish("r/a/3", b"v", 1, True, packet_id=9))  # a fourth topic of this client
        ack = c.expect(Puback)
        assert ack.reason_code == 0x97
        assert "limits.max_retained_per_client" in ack.properties.reason_string
        c.send(Publish("r/a/0", b"new", 1, True, packet_id=10))  # replacing is no new topic
        assert c.expect(Puback).reason_code == 0x10
        c.send(Publish("r/a/big", b"x" * 1001, 1, True, packet_id=11))
        ack = c.expect(Puback)
        assert ack.reason_code == 0x97
        assert "limits.max_retained_payload" in ack.properties.reason_string
        c.send(Publish("r/a/2", b"", 1, True, packet_id=12))  # deleting frees a slot
        assert c.expect(Puback).reason_code == 0x10
        c.send(Publish("r/a/3", b"v", 1, True, packet_id=13))
        assert c.expect(Puback).reason_code == 0x10
        c.close()
        c = mb.client()
        c.connect("ret-b")
        for i in range(2):
            c.send(Publish(f"r/b/{i}", b"v", 1, True, packet_id=i + 1))
            assert c.expect(Puback).reason_code == 0x10
        c.send(Publish("r/b/2", b"v", 1, True, packet_id=3))  # the sixth in the broker
        ack = c.expect(Puback)
        assert ack.reason_code == 0x97
        assert "limits.max_retained_messages" in ack.properties.reason_string
        c.close()
        c = mb.client(level=4)  # 3.1.1: delivered, not retained
        c.connect("ret-c")
        c.subscribe("r/c/#", 1)
        c.send(Publish("r/c/0", b"live", 1, True, packet_id=1))
        got = [c.recv(), c.recv()]
        assert any(isinstance(p, Publish) and p.payload == b"live" for p in got)
        assert any(isinstance(p, Puback) for p in got)
        c.close()
        c = mb.client()
        c.connect("look")
        c.subscribe("r/#")
        kept = sorted(p.topic for p in c.publishes())
        c.close()
        assert kept == ["r/a/0", "r/a/1", "r/a/3", "r/b/0", "r/b/1"]
        mb.advance(1.0)  # the next $SYS update
        assert int(sys_value(mb, "limits/limits_max_retained_messages/hits")) == 2
        assert int(sys_value(mb, "limits/retained/count")) == 5


def test_queued_bytes_total_bounds_every_queue_together(caplog: pytest.LogCaptureFixture) -> None:
    limits = {"max_inflight": 1, "max_queued_bytes_total": 12_000, **WHOLE_TOTALS}
    for mb in memory_broker({"sys": FAST_SYS, "limits": limits}):
        subs = []
        for i in range(2):
            s = mb.client()
            s.connect(f"q{i}")
            s.subscribe("total/t", 1)
            subs.append(s)
        pub = mb.client()
        pub.connect("qp")
        with caplog.at_level(logging.WARNING, logger="edge_broker.limits"):
            for i in range(20):
                pub.send(Publish("total/t", b"z" * 1000, 1, packet_id=i + 1))
            assert sum(isinstance(p, Puback) for p in pub.drain()) == 20
        pub.close()
        got = sum(len(s.publishes()) for s in subs)
        # 2 in flight + what 12,000 bytes hold (about 1,150 bytes an entry): 10, not 40
        assert 8 <= got <= 14, got
        assert "limits.max_queued_bytes_total" in caplog.text
        mb.advance(1.0)  # the next $SYS update: every queue has been read by now
        assert sys_value(mb, "limits/queued/bytes") == "0"
        for s in subs:
            s.close()


def test_tenant_sys_values_are_shared_and_sent_only_when_changed() -> None:
    """Issue 34: 3,000 open tenants each got 25 ``$SYS`` messages rewritten every interval.
    The values are kept once for every tenant, and a tick routes only the changed ones, only
    into spaces that subscribe to ``$SYS``."""
    for mb in memory_broker({"sys": FAST_SYS, "listeners": [OPEN_LISTENER]}):
        for i in range(50):
            c = mb.client()
            c.connect(f"tk{i}", properties=Properties(user_properties=(("tenant", f"tk{i}"),)))
            c.send(Publish("k/t", b"v", 1, True, packet_id=1))
            c.expect(Puback)
        mb.advance(3.0)  # three $SYS updates
        spaces = mb.broker.topic_spaces
        assert all(len(spaces[f"tk{i}"].retained) == 1 for i in range(50))  # no $SYS copies
        assert sys_value(mb, "version", tenant="tk7").startswith("edge-broker version")
        watcher = mb.client()
        watcher.connect("watch", properties=Properties(user_properties=(("tenant", "tk3"),)))
        watcher.subscribe("$SYS/broker/#")
        first = {p.topic for p in watcher.publishes()}
        assert "$SYS/broker/uptime" in first and "$SYS/broker/version" in first
        assert not any("/authz/" in t for t in first)  # the operator's counters stay in "~"
        mb.advance(1.0)
        again = [p.topic for p in watcher.publishes()]
        assert "$SYS/broker/uptime" in again
        assert "$SYS/broker/version" not in again  # unchanged: not sent again
