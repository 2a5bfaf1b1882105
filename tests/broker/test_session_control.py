"""Operator session control (broker/session_control.py; docs/sessions.md): list and drop, on
the in-memory broker with a fake clock (the CLI over the control channel:
tests/cli/test_session_cli.py)."""

from __future__ import annotations

from edge_broker.broker.session_control import drop_session, list_sessions
from edge_broker.mqtt.packets import Disconnect, Properties, Publish
from tests.broker.broker_raw import unique_id
from tests.broker.engine_harness import MemoryBroker


def drop(mb: MemoryBroker, client_id: str) -> bool:
    """``drop_session`` inside the broker's loop (as the control channel calls it)."""
    done: list[bool] = []
    mb.call(lambda: done.append(drop_session(mb.broker, client_id)))
    return done[0]


def test_list_shows_owner_state_expiry_and_queue(mb: MemoryBroker) -> None:
    online, offline, topic = unique_id("on-"), unique_id("off-"), unique_id("t/")
    a = mb.client()
    assert a.connect(online).reason_code == 0
    b = mb.client()
    props = Properties(session_expiry_interval=600)
    assert b.connect(offline, clean=False, properties=props).reason_code == 0
    assert b.subscribe(topic, 1).reason_codes == (1,)
    b.send(Disconnect(0))
    mb.settle()
    pub = mb.client()
    assert pub.connect(unique_id("pub-")).reason_code == 0
    pub.send(Publish(topic, b"x", 1, packet_id=1))
    mb.settle()
    infos = {i.client_id: i for i in list_sessions(mb.broker)}
    assert infos[online].connected and infos[online].expires_at is None
    assert infos[online].owner.startswith("anonymous 'listener ")
    off = infos[offline]
    assert not off.connected and off.queued == 1 and off.queued_bytes > 0
    assert off.expires_at is not None and off.expires_at > 0
    assert [i.client_id for i in list_sessions(mb.broker, client_id=offline)] == [offline]
    mb.advance(601)  # expired: no longer listed
    assert offline not in {i.client_id for i in list_sessions(mb.broker)}


def test_drop_ends_a_connected_v5_client_with_0x98_and_forgets_the_session(
    mb: MemoryBroker,
) -> None:
    cid, topic = unique_id("drop-"), unique_id("t/")
    c = mb.client()
    props = Properties(session_expiry_interval=600)
    assert c.connect(cid, clean=False, properties=props).reason_code == 0
    assert c.subscribe(topic, 1).reason_codes == (1,)
    assert drop(mb, cid)
    mb.settle()
    closed = [p for p in c.closed() if isinstance(p, Disconnect)]
    assert [p.reason_code for p in closed] == [0x98]
    assert "dropped by the operator" in (closed[0].properties.reason_string or "")
    assert list_sessions(mb.broker, client_id=cid) == []
    again = mb.client()
    ack = again.connect(cid, clean=False, properties=props)
    assert ack.reason_code == 0 and not ack.session_present  # nothing of it was kept
    assert not drop(mb, unique_id("none-"))


def test_drop_closes_a_v311_client_and_removes_its_queue(mb: MemoryBroker) -> None:
    cid, topic = unique_id("drop4-"), unique_id("t/")
    c = mb.client(4)
    assert c.connect(cid, clean=False).reason_code == 0
    assert c.subscribe(topic, 1).reason_codes == (1,)
    c.close()
    mb.settle()
    pub = mb.client()
    assert pub.connect(unique_id("pub-")).reason_code == 0
    pub.send(Publish(topic, b"x", 1, packet_id=1))
    mb.settle()
    assert list_sessions(mb.broker, client_id=cid)[0].queued == 1
    assert mb.broker.delivery.queued_total > 0
    assert drop(mb, cid)
    assert list_sessions(mb.broker, client_id=cid) == []
    assert mb.broker.delivery.queued_total == 0
    live = mb.client(4)
    live_id = unique_id("drop4b-")
    assert live.connect(live_id, clean=False).reason_code == 0
    assert drop(mb, live_id)
    mb.settle()
    assert live.closed() == []  # 3.1.1 has no DISCONNECT from the server: the socket closes
