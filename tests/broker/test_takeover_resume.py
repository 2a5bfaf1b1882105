"""Issue 15 item 11: a takeover that resumes keeps the session (MQTT 5 MQTT-3.1.2-23,
MQTT-4.4.0-1; 3.1.1 MQTT-3.1.2-4). The old connection's expiry (0, or CleanSession=1) must not
end a session the new CONNECT resumes: its subscriptions keep routing to it, and what it has in
flight is resent after the next reconnect.

On the in-memory broker (engine_harness.py): "nothing arrives" is exact, not a wait."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from edge_broker.engine.states import ConnState
from edge_broker.mqtt.packets import Disconnect, Properties, Publish
from tests.broker.broker_raw import unique_id
from tests.broker.engine_harness import MemoryBroker, MemoryClient


@pytest.fixture
def make(mb: MemoryBroker) -> Callable[..., MemoryClient]:
    return mb.client


def test_v5_expiry_0_taken_over_by_clean_start_0_keeps_the_session(make) -> None:
    cid, topic = unique_id("to5-"), unique_id("t5/")
    old = make()
    assert old.connect(cid, clean=True).reason_code == 0  # Session Expiry 0
    assert old.subscribe(topic, 1).reason_codes == (1,)
    new = make()
    ack = new.connect(cid, clean=False, properties=Properties(session_expiry_interval=99999))
    assert ack.reason_code == 0 and ack.session_present
    assert [p.reason_code for p in old.closed() if isinstance(p, Disconnect)] == [0x8E]
    pub = make()
    assert pub.connect(unique_id("pub-")).reason_code == 0
    pub.send(Publish(topic, b"one", 1, packet_id=1))
    got = new.recv()  # through the subscription made by the old connection
    assert isinstance(got, Publish) and got.payload == b"one"
    new.close()  # without PUBACK: the message stays in flight
    again = make()
    ack = again.connect(cid, clean=False, properties=Properties(session_expiry_interval=99999))
    assert ack.reason_code == 0 and ack.session_present  # the session was kept registered
    resent = again.recv()
    assert isinstance(resent, Publish) and resent.payload == b"one" and resent.dup
    again.send(Disconnect(0, Properties(session_expiry_interval=0)))


def test_v311_clean_session_1_taken_over_by_clean_session_0_keeps_the_session(make) -> None:
    cid, topic = unique_id("to4-"), unique_id("t4/")
    old = make(4)
    assert old.connect(cid, clean=True).reason_code == 0
    assert old.subscribe(topic, 1).reason_codes == (1,)
    new = make(4)
    ack = new.connect(cid, clean=False)
    assert ack.reason_code == 0 and ack.session_present
    old.closed()
    pub = make(4)
    assert pub.connect(unique_id("pub-")).reason_code == 0
    pub.send(Publish(topic, b"one", 1, packet_id=1))
    got = new.recv()
    assert isinstance(got, Publish) and got.payload == b"one"
    new.close()
    again = make(4)
    ack = again.connect(cid, clean=False)
    assert ack.reason_code == 0 and ack.session_present
    resent = again.recv()
    assert isinstance(resent, Publish) and resent.payload == b"one" and resent.dup
    make(4).connect(cid, clean=True)  # end it


def test_takeover_with_clean_start_1_still_ends_the_old_session(make) -> None:
    cid, topic = unique_id("tc-"), unique_id("tc/")
    old = make()
    assert (
        old.connect(
            cid, clean=False, properties=Properties(session_expiry_interval=300)
        ).reason_code
        == 0
    )
    assert old.subscribe(topic, 1).reason_codes == (1,)
    new = make()
    ack = new.connect(cid, clean=True)
    assert ack.reason_code == 0 and not ack.session_present
    pub = make()
    assert pub.connect(unique_id("pub-")).reason_code == 0
    pub.send(Publish(topic, b"x", 0))
    new.nothing()


def test_the_taken_over_connection_is_closed_and_counted_once(mb: MemoryBroker) -> None:
    cid = unique_id("tk-")
    old = mb.client()
    old.connect(cid)
    new = mb.client()
    assert new.connect(cid).reason_code == 0
    assert [p.reason_code for p in old.closed() if isinstance(p, Disconnect)] == [0x8E]
    assert old.connection.state is ConnState.CLOSED
    assert new.connection.state is ConnState.CONNECTED
    assert mb.broker.connections == {new.connection}
    assert mb.broker.stats.clients_connected == 1
    assert mb.broker.sessions.get(new.connection.session.key).connection is new.connection
    new.send(Disconnect())
    new.closed()
    assert mb.broker.stats.clients_connected == 0 and not mb.broker.connections
