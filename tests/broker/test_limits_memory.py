"""Issue 16 limits that work over time, on the in-memory broker with a fake clock
(engine_harness.py): the publish-rate quota refills on the broker's clock and empty tenant
spaces are swept by its tick, so neither test waits for the wall clock. Moved from
test_broker_memory_limits.py, assertions unchanged."""

from __future__ import annotations

from engine_harness import MemoryBroker, memory_broker

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish

FAST_SYS = {"interval": 1}
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
