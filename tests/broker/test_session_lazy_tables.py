"""An idle session owns no queue, in-flight table or QoS 2 id set of its own (issue 32: about
1.1 KB per idle client): all share one always-empty instance each until the first message
waits, goes in flight or is held. Those shared instances refuse writes, so a place that
forgets to make its own table fails loudly instead of leaking into every other session; the
queue quota, the delivery order and the store see exactly what they saw before."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import memory_broker
from test_quotas_memory import expected, held

from edge_broker.broker.server import Broker
from edge_broker.broker.session import NO_QUEUE, Session
from edge_broker.engine.flow import NO_IDS, NO_INFLIGHT, Inflight
from edge_broker.mqtt.packets import Properties, Puback, Publish, Pubrec, Pubrel


def session_of(broker: Broker, client_id: str) -> Session:
    return next(s for s in broker.sessions if s.client_id == client_id)


def test_an_idle_session_holds_only_the_shared_empty_tables() -> None:
    for mb in memory_broker():
        for i in range(3):
            c = mb.client(4)
            c.connect(f"idle-{i}", keep_alive=300)
            c.subscribe(f"idle/{i}/cmd", 1)
        for i in range(3):
            session = session_of(mb.broker, f"idle-{i}")
            assert session.queue is NO_QUEUE
            assert session.inflight is NO_INFLIGHT
            assert session.qos2_incoming is NO_IDS


def test_the_shared_tables_refuse_writes_and_stay_empty() -> None:
    with pytest.raises(TypeError):
        NO_QUEUE.append(object())
    with pytest.raises(TypeError):
        NO_QUEUE.extend([object()])
    with pytest.raises(TypeError):
        NO_QUEUE.appendleft(object())
    with pytest.raises(TypeError):
        NO_INFLIGHT[1] = Inflight(object())  # type: ignore[type-var]
    with pytest.raises(TypeError):
        NO_IDS.add(1)
    assert not NO_QUEUE and not NO_INFLIGHT and not NO_IDS


def test_queued_messages_get_a_queue_of_their_own_and_the_ledger_stays_exact() -> None:
    for mb in memory_broker({"limits": {"max_inflight": 1}}):
        sub, other, pub = mb.client(), mb.client(), mb.client()
        sub.connect("sub")
        sub.subscribe("q/#", 1)
        other.connect("other")
        other.subscribe("elsewhere/#", 1)
        pub.connect("pub")
        for i in range(4):
            pub.send(Publish(f"q/{i}", b"x" * 100, 1, packet_id=i + 1))
            pub.expect(Puback)
        session = session_of(mb.broker, "sub")
        assert session.queue is not NO_QUEUE and len(session.queue) == 3
        assert session.inflight is not NO_INFLIGHT and len(session.inflight) == 1
        assert session_of(mb.broker, "other").queue is NO_QUEUE  # nothing leaked into another
        assert not NO_QUEUE and not NO_INFLIGHT
        assert held(mb.broker.quotas) == expected(mb.broker)
        assert mb.broker.delivery.queued_total == session.queued_bytes + 3 * 120
        got = []
        for _ in range(4):
            publish = sub.expect(Publish)
            got.append(publish.topic)
            sub.send(Puback(publish.packet_id))
            mb.settle()
        assert got == ["q/0", "q/1", "q/2", "q/3"]  # in order, as before
        assert not session.queue and not session.inflight
        assert held(mb.broker.quotas) == expected(mb.broker)
        assert mb.broker.delivery.queued_total == 0


def test_an_offline_session_queues_and_delivers_on_resume() -> None:
    for mb in memory_broker():
        sub = mb.client()
        sub.connect("parked", clean=False, properties=Properties(session_expiry_interval=600))
        sub.subscribe("p/#", 1)
        sub.close()
        mb.settle()
        session = session_of(mb.broker, "parked")
        assert session.queue is NO_QUEUE
        pub = mb.client()
        pub.connect("pub")
        pub.send(Publish("p/1", b"m", 1, packet_id=1))
        pub.expect(Puback)
        assert len(session.queue) == 1 and not NO_QUEUE
        assert held(mb.broker.quotas) == expected(mb.broker)
        again = mb.client()
        again.connect("parked", clean=False, properties=Properties(session_expiry_interval=600))
        assert again.expect(Publish).payload == b"m"


def test_incoming_qos2_ids_are_held_in_a_set_of_the_sessions_own() -> None:
    for mb in memory_broker():
        c = mb.client()
        c.connect("q2")
        c.send(Publish("t/q2", b"x", 2, packet_id=7))
        c.expect(Pubrec)
        session = session_of(mb.broker, "q2")
        assert session.qos2_incoming == {7} and session.qos2_incoming is not NO_IDS
        assert not NO_IDS
        c.send(Pubrel(7))
        mb.settle()
        assert not session.qos2_incoming


def test_a_restored_session_gets_its_queue_and_flight_back(tmp_path: Path) -> None:
    config = {
        "persistence": {"enabled": True, "state_dir": str(tmp_path), "durability": "none"},
        "limits": {"max_inflight": 1},
    }
    props = Properties(session_expiry_interval=600)
    for mb in memory_broker(config):
        sub = mb.client()
        sub.connect("kept", clean=False, properties=props)
        sub.subscribe("k/#", 1)
        pub = mb.client()
        pub.connect("pub")
        for i in range(3):
            pub.send(Publish(f"k/{i}", b"%d" % i, 1, packet_id=i + 1))
            pub.expect(Puback)
        assert sub.expect(Publish).topic == "k/0"  # in flight, never acknowledged
        sub.close()
    for mb in memory_broker(config):
        session = session_of(mb.broker, "kept")
        assert len(session.inflight) == 1 and len(session.queue) == 2
        assert not NO_QUEUE and not NO_INFLIGHT
        again = mb.client()
        again.connect("kept", clean=False, properties=props)
        first = again.expect(Publish)
        assert (first.topic, first.dup) == ("k/0", True)
        again.send(Puback(first.packet_id))
        mb.settle()
        for topic in ("k/1", "k/2"):
            publish = again.expect(Publish)
            assert publish.topic == topic
            again.send(Puback(publish.packet_id))
            mb.settle()
        assert held(mb.broker.quotas) == expected(mb.broker)
