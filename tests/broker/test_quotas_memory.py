"""Quotas on the in-memory broker with a fake clock (engine_harness.py): the hits are counted in
``$SYS``, what every ledger holds is exactly what the broker holds after any sequence (sessions
that end, queues that drain, retained messages that expire), and a restart charges everything
restored again."""

from __future__ import annotations

from pathlib import Path

from engine_harness import MemoryBroker, memory_broker

from edge_broker.broker.limits.quotas import UNATTRIBUTED, Quotas
from edge_broker.broker.ownership import Principal
from edge_broker.broker.server import Broker
from edge_broker.mqtt.packets import Disconnect, Properties, Puback, Publish, Suback

ANONYMOUS = Principal("anonymous", "listener default")  # the harness's listener
KEEP = Properties(session_expiry_interval=600)


def expected(broker: Broker) -> dict[str, dict[Principal, int]]:
    """What each principal holds, counted from the broker's own state."""
    subs: dict[Principal, int] = {}
    queued: dict[Principal, int] = {}
    for session in broker.sessions:
        owner = session.owner or UNATTRIBUTED
        if session.subscriptions:
            subs[owner] = subs.get(owner, 0) + len(session.subscriptions)
        if session.queue:
            queued[owner] = queued.get(owner, 0) + session.queued_bytes + 120 * len(session.queue)
    connections: dict[Principal, int] = {}
    for conn in broker.connections:
        if conn.session is not None and conn.session.connection is conn:
            owner = conn.session.owner or UNATTRIBUTED
            connections[owner] = connections.get(owner, 0) + 1
    return {"subscriptions": subs, "queued": queued, "connections": connections}


def held(quotas: Quotas) -> dict[str, dict[Principal, int]]:
    return {
        "subscriptions": dict(quotas.subscriptions.principals),
        "queued": dict(quotas.queued_bytes.principals),
        "connections": dict(quotas.connections.principals),
    }


def test_hits_are_counted_in_sys() -> None:
    config = {"sys": {"interval": 1}, "limits": {"max_subscriptions_total": 8}}
    for mb in memory_broker(config):
        c = mb.client()
        c.connect("many-subs")
        codes = [c.subscribe(f"t/{i}", 0, packet_id=i + 1).reason_codes[0] for i in range(3)]
        assert codes == [0, 0, 0x97]  # a quarter of 8: two for the anonymous listener
        c.send(Disconnect())  # its subscriptions go back: the reader's fits
        mb.advance(1.0)
        reader = mb.client()
        reader.connect("sys-reader")
        reader.subscribe("$SYS/broker/limits/limits_principal_share/hits")
        assert reader.expect(Publish).payload == b"1"


def test_ledgers_match_the_broker_after_sessions_end_and_queues_drain() -> None:
    config = {"limits": {"max_inflight": 1}}
    for mb in memory_broker(config):
        subs = []
        for i in range(3):
            s = mb.client()
            s.connect(f"s{i}", clean=False, properties=KEEP)
            s.subscribe("q/#", 1)
            subs.append(s)
        subs[0].send(Disconnect())  # offline: its queue grows
        subs[1].close()  # network loss: offline too
        pub = mb.client()
        pub.connect("pub")
        for i in range(5):
            pub.send(Publish(f"q/{i}", b"x" * 100, 1, packet_id=i + 1))
            pub.expect(Puback)
        assert held(mb.broker.quotas) == expected(mb.broker)
        assert mb.broker.quotas.queued_bytes.principals[ANONYMOUS] > 0
        back = mb.client()
        back.connect("s0", clean=False, properties=KEEP)  # drains its queue
        back.publishes()
        gone = mb.client()
        gone.connect("s1", clean=True)  # ends the old session and its queue
        gone.send(Disconnect())
        subs[2].send(Disconnect())
        assert held(mb.broker.quotas) == expected(mb.broker)
        back.send(Disconnect())
        pub.send(Disconnect())
        mb.advance(601)  # every session expires
        mb.settle()
        q = mb.broker.quotas
        assert (q.subscriptions.total, q.queued_bytes.total, q.connections.total) == (0, 0, 0)
        assert not q.subscriptions.holders and not q.queued_bytes.holders


def test_retained_expiry_releases_and_a_restart_charges_again(tmp_path: Path) -> None:
    config = {
        "persistence": {"state_dir": str(tmp_path), "durability": "none"},
        "limits": {"max_inflight": 1},
    }
    mb = MemoryBroker(config)
    try:
        c = mb.client()
        c.connect("keeper", clean=False, properties=KEEP)
        assert c.subscribe("k/#", 1).reason_codes == (1,)
        c.send(Publish("r/keep", b"v" * 50, 1, True, packet_id=2))
        c.expect(Puback)
        brief = Properties(message_expiry_interval=5)
        c.send(Publish("r/brief", b"v", 1, True, properties=brief, packet_id=3))
        c.expect(Puback)
        c.send(Disconnect())
        pub = mb.client()
        pub.connect("pub")
        pub.send(Publish("k/1", b"queued", 1, packet_id=1))
        pub.expect(Puback)
        pub.send(Disconnect())
        quotas = mb.broker.quotas
        assert quotas.retained_messages.principals == {ANONYMOUS: 2}
        mb.advance(6)
        reader = mb.client()
        reader.connect("reader")
        reader.subscribe("r/#")  # the expired one is dropped when met
        assert [p.topic for p in reader.drain() if isinstance(p, Publish)] == ["r/keep"]
        reader.send(Disconnect())
        assert quotas.retained_messages.principals == {ANONYMOUS: 1}
        size = quotas.retained_bytes.total
        before = held(quotas)
    finally:
        mb.close()
    again = MemoryBroker(config)
    try:
        quotas = again.broker.quotas
        # the session's subscriptions and queue charged to its owner again; the retained
        # message to its tenant (the state does not record who published it)
        assert held(quotas) == {**before, "connections": {}}
        assert quotas.subscriptions.principals == {ANONYMOUS: 1}
        assert quotas.retained_messages.tenants == {"~": 1}
        assert quotas.retained_bytes.principals == {UNATTRIBUTED: size}
        back = again.client()
        back.connect("keeper", clean=False, properties=KEEP)
        assert [p.payload for p in back.publishes()] == [b"queued"]
        assert isinstance(back, object) and quotas.queued_bytes.total == 0
        back.send(Disconnect())
    finally:
        again.close()


def test_suback_reason_names_the_principal() -> None:
    for mb in memory_broker({"limits": {"max_subscriptions_total": 4}}):
        c = mb.client()
        c.connect("one")
        c.subscribe("a", 0, packet_id=1)
        suback = c.subscribe("b", 0, packet_id=2)
        assert isinstance(suback, Suback) and suback.reason_codes == (0x97,)
        reason = suback.properties.reason_string or ""
        assert "anonymous 'listener default' holds 1 subscriptions; its share is 1" in reason
