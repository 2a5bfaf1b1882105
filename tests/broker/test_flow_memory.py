"""Flow control both ways (MQTT 5 §4.9: Receive Maximum) on the in-memory broker
(engine_harness.py), where "the window is full, nothing more comes" is exact instead of a
wait. Moved from test_broker_protocol_v5.py, assertions unchanged."""

from __future__ import annotations

from broker_raw import unique_id
from engine_harness import MemoryBroker

from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish, Pubrec


def cid(prefix: str = "c") -> str:
    return unique_id(prefix)


def test_client_receive_maximum_respected(mb: MemoryBroker) -> None:
    sub, pub = mb.client(), mb.client()
    sub.connect(cid(), properties=Properties(receive_maximum=2))
    pub.connect(cid())
    t = cid("fc/")
    sub.subscribe(t, 1)
    for i in range(5):
        pub.send(Publish(t, b"%d" % i, 1, packet_id=i + 1))
    first = [sub.expect(Publish), sub.expect(Publish)]
    sub.nothing()  # window full
    sub.send(Puback(first[0].packet_id))
    third = sub.expect(Publish)
    assert third.payload == b"2"
    sub.nothing()
    sub.send(Puback(first[1].packet_id))
    sub.send(Puback(third.packet_id))
    assert [sub.expect(Publish).payload for _ in range(2)] == [b"3", b"4"]
    sub.nothing()


def test_receive_maximum_exceeded_disconnects_0x93(mb: MemoryBroker) -> None:
    c = mb.client()
    c.connect(cid())
    for pid in range(1, 34):  # our Receive Maximum is 32; never release with PUBREL
        c.send(Publish(cid("rm/"), b"x", 2, packet_id=pid))
    got = c.closed()
    assert sum(isinstance(p, Pubrec) for p in got) == 32
    assert isinstance(got[-1], Disconnect) and got[-1].reason_code == 0x93
