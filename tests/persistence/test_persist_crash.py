"""kill -9 under QoS 1 / QoS 2 load into persistent sessions, then restart (issue 8): every
message the broker acknowledged reaches its subscriber (QoS 1 at least once, QoS 2 exactly
once) and every retained message is there."""

from __future__ import annotations

import signal
from collections import Counter

import pytest
from persist_support import EXPIRY, RawClient, drain, persistent_config, subscribe

from edge_broker.mqtt.packets import Puback, Pubcomp, Publish, Pubrec, Pubrel


def _kill_after_acks(
    b, pub: RawClient, packets: list[Publish], kill_after: int, ack_type: type
) -> set[int]:
    """Send every packet pipelined, kill -9 once ``kill_after`` acks came back; the packet
    ids the broker acknowledged (before and in the bytes already on their way)."""
    for packet in packets:
        pub.send(packet)
    acked: set[int] = set()
    killed = False
    while True:
        try:
            packet = pub.recv(5.0)
        except (EOFError, TimeoutError):
            break
        if isinstance(packet, ack_type) and packet.reason_code < 0x80:
            acked.add(packet.packet_id)
        if not killed and len(acked) >= kill_after:
            b.process.send_signal(signal.SIGKILL)
            killed = True
        if len(acked) == len(packets) and not killed:
            b.process.send_signal(signal.SIGKILL)
            killed = True
    b.process.wait(10)
    return acked


@pytest.mark.parametrize("online", [False, True])
def test_qos1_acknowledged_messages_survive_kill9(broker_factory, tmp_path, online):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    sub = RawClient(b.host, b.port)
    sub.connect("sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("t/#", 1))
    if not online:
        sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("pub", clean=True)
    n = 400
    packets = [Publish(f"t/{i}", f"m{i}".encode(), 1, packet_id=i + 1) for i in range(n)]
    acked = _kill_after_acks(b, pub, packets, n // 2, Puback)
    assert len(acked) >= n // 2
    before = drain(sub, 0.3, ack=False) if online else []  # received, never acknowledged
    b2 = broker_factory(persistent_config(state))
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("sub", clean=False, properties=EXPIRY).session_present
    got = {p.payload for p in drain(sub2, 3.0)} | {p.payload for p in before}
    missing = {f"m{pid - 1}".encode() for pid in acked} - got
    assert not missing, f"{len(missing)} acknowledged messages lost, e.g. {sorted(missing)[:5]}"
    assert "broker store" in b2.log()


def test_qos2_exactly_once_across_kill9(broker_factory, tmp_path):
    state = tmp_path / "state"
    config = {**persistent_config(state), "limits": {"receive_maximum": 1000}}
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("sub2", clean=False, properties=EXPIRY)
    subscribe(sub, ("q/#", 2))
    sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("pub2", clean=False, properties=EXPIRY)
    n = 300
    packets = [Publish(f"q/{i}", f"m{i}".encode(), 2, packet_id=i + 1) for i in range(n)]
    for packet in packets:
        pub.send(packet)
    recs: set[int] = set()
    comps: set[int] = set()
    killed = False
    while True:
        try:
            packet = pub.recv(5.0)
        except (EOFError, TimeoutError):
            break
        if isinstance(packet, Pubrec):
            recs.add(packet.packet_id)
            if packet.packet_id % 2 and not killed:  # release half of them before the crash
                try:
                    pub.send(Pubrel(packet.packet_id))
                except OSError:  # the kill raced the PUBREL: the crash is what we test
                    b.process.send_signal(signal.SIGKILL)
                    killed = True
        elif isinstance(packet, Pubcomp):
            comps.add(packet.packet_id)
        if not killed and len(recs) >= n // 2:
            b.process.send_signal(signal.SIGKILL)
            killed = True
    assert killed, f"only {len(recs)} PUBREC before the broker went quiet:\n{b.log()}"
    b.process.wait(10)
    b2 = broker_factory(config)
    pub2 = RawClient(b2.host, b2.port)
    assert pub2.connect("pub2", clean=False, properties=EXPIRY).session_present
    # A real client's resumption (MQTT 5 §4.4): PUBREL for what got PUBREC, PUBLISH DUP else.
    for packet in packets:
        pid = packet.packet_id
        assert pid is not None
        if pid in comps:
            continue
        if pid in recs:
            pub2.send(Pubrel(pid))
        else:
            pub2.send(Publish(packet.topic, packet.payload, 2, dup=True, packet_id=pid))
    done: set[int] = set(comps)
    while len(done) < n:
        packet = pub2.recv(10.0)
        if isinstance(packet, Pubrec):
            pub2.send(Pubrel(packet.packet_id))
        elif isinstance(packet, Pubcomp):
            done.add(packet.packet_id)
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("sub2", clean=False, properties=EXPIRY).session_present
    got = Counter(p.payload for p in drain(sub2, 3.0))
    twice = [m for m, c in got.items() if c > 1]
    assert not twice, f"delivered more than once: {twice[:5]}"
    assert len(got) == n, f"{n - len(got)} messages lost"


def test_retained_messages_survive_kill9(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state))
    pub = RawClient(b.host, b.port)
    pub.connect("rpub")
    n = 200
    packets = [
        Publish(f"r/{i}", f"v{i}".encode(), 1, retain=True, packet_id=i + 1) for i in range(n)
    ]
    packets.append(Publish("r/0", b"", 1, retain=True, packet_id=n + 1))  # clears r/0
    packets.append(Publish("r/qos0", b"zero", 0, retain=True))
    acked = _kill_after_acks(b, pub, packets, n + 1, Puback)
    assert len(acked) == n + 1
    b2 = broker_factory(persistent_config(state))
    sub = RawClient(b2.host, b2.port)
    sub.connect("rsub")
    subscribe(sub, ("r/#", 1))
    got = {p.topic: p.payload for p in drain(sub, 3.0) if p.retain}
    expected = {f"r/{i}": f"v{i}".encode() for i in range(1, n)}
    assert {t: v for t, v in got.items() if t != "r/qos0"} == expected


def test_qos2_online_subscriber_exactly_once_across_kill9(broker_factory, tmp_path):
    """The subscriber is mid-flow at the crash (PUBLISH received, PUBREC sent, PUBREL maybe
    received): after the restart the broker resends PUBLISH (DUP, same packet id) or PUBREL,
    and a method-B receiver delivers every message exactly once."""
    state = tmp_path / "state"
    config = {**persistent_config(state), "limits": {"receive_maximum": 1000}}
    b = broker_factory(config)
    sub = RawClient(b.host, b.port)
    sub.connect("osub", clean=False, properties=EXPIRY)
    subscribe(sub, ("o/#", 2))
    pub = RawClient(b.host, b.port)
    pub.connect("opub")
    n = 200
    for i in range(n):
        pub.send(Publish(f"o/{i}", f"m{i}".encode(), 2, packet_id=i + 1))
    recs: set[int] = set()
    while len(recs) < n:
        packet = pub.recv(10.0)
        if isinstance(packet, Pubrec):
            recs.add(packet.packet_id)
            pub.send(Pubrel(packet.packet_id))
    held: set[int] = set()
    first = drain(sub, 0.2, held=held, complete=False)  # PUBREC sent, PUBREL left unanswered
    first += drain(sub, 0.2, held=held)
    b.process.send_signal(signal.SIGKILL)
    b.process.wait(10)
    b2 = broker_factory(config)
    sub2 = RawClient(b2.host, b2.port)
    assert sub2.connect("osub", clean=False, properties=EXPIRY).session_present
    second = drain(sub2, 3.0, held=held)
    got = Counter(p.payload for p in first + second)
    twice = [m for m, c in got.items() if c > 1]
    assert not twice, f"delivered more than once: {twice[:5]}"
    assert len(got) == n, f"{n - len(got)} acknowledged messages lost"
