"""The acknowledgement flows driven by ``ConnectionEngine`` (engine/connection.py): an
acknowledgement from the client moves the session's QoS flow (engine/flow.py), the engine
returns what happened (:class:`~edge_broker.engine.events.Flow`, with the packet's id) and
writes the reply into its one output buffer, decoded here as the client reads it. Bytes and a
fake ``now`` only: no broker, no socket, no clock."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from edge_broker.engine.connection import RECEIVE_MAXIMUM_EXCEEDED, ConnectionEngine
from edge_broker.engine.events import Flow
from edge_broker.engine.flow import QosFlow
from edge_broker.engine.negotiation import Agreement
from edge_broker.engine.states import Trigger
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Packet,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
)
from edge_broker.mqtt.reason_codes import ReasonCode


@dataclass(frozen=True)
class Msg:
    qos: int


class Encoded:
    """A PUBLISH as ``mqtt/publish_template.py`` writes it under any packet id."""

    def __init__(self, topic: str, qos: int, level: int = 5) -> None:
        self.topic, self.qos, self.level = topic, qos, level

    def for_packet_id(self, packet_id: int, dup: bool = False) -> bytes:
        packet = Publish(self.topic, b"m", self.qos, packet_id=packet_id, dup=dup)
        return encode(packet, self.level)


def connected(level: int = 5) -> tuple[ConnectionEngine, QosFlow[Msg], list[str]]:
    """An engine past CONNACK with a session's flow attached; the list records its wake-ups."""
    engine = ConnectionEngine(0.0, max_connect_packet_size=256, max_packet_size=4096)
    engine.receive(encode(Connect(level, "c", True, 10), level), 0.0)
    engine.trigger(Trigger.CONNECT)
    woken: list[str] = []
    engine.wake = lambda: woken.append("wake")
    engine.accept(Agreement(10, None, 0, 0, 2, 4096, 0), False, Properties())
    assert woken == ["wake"]  # the CONNACK landed in an empty buffer: a write is asked for
    assert isinstance(sent(engine, level)[0], Connack)
    woken.clear()
    flow: QosFlow[Msg] = QosFlow()
    engine.flow = flow
    return engine, flow, woken


def sent(engine: ConnectionEngine, level: int = 5) -> list[Packet]:
    return PacketReader(side="client", protocol_level=level).feed(engine.data_to_send())


# -- outgoing QoS 1 -------------------------------------------------------------------------


def test_qos1_publish_goes_out_under_a_fresh_id_and_puback_delivers_it() -> None:
    engine, flow, woken = connected()
    pid = engine.send_publish(Msg(1), Encoded("a", 1))
    assert woken == ["wake"]
    [publish] = sent(engine)
    assert isinstance(publish, Publish) and publish.packet_id == pid == 1
    assert list(flow.inflight) == [1]
    assert engine.puback_received(1) is Flow.DELIVERED
    assert not flow.inflight
    assert engine.data_to_send() == b""  # a PUBACK is answered by nothing


def test_a_publish_skips_a_packet_id_still_in_flight() -> None:
    engine, flow, _ = connected()
    flow.sent(1, Msg(1))  # restored from the store: 1 is taken
    assert engine.send_publish(Msg(1), Encoded("a", 1)) == 2
    assert list(flow.inflight) == [1, 2]
    assert engine.puback_received(2) is Flow.DELIVERED and list(flow.inflight) == [1]


def test_a_puback_for_nothing_in_flight_or_for_qos2_is_ignored() -> None:
    engine, flow, _ = connected()
    engine.send_publish(Msg(1), Encoded("a", 1))
    engine.send_publish(Msg(2), Encoded("b", 2))
    engine.data_to_send()
    assert engine.puback_received(9) is Flow.UNKNOWN
    assert engine.puback_received(2) is Flow.UNKNOWN  # QoS 2 ends with PUBCOMP, not PUBACK
    assert engine.puback_received(1) is Flow.DELIVERED
    assert engine.puback_received(1) is Flow.UNKNOWN  # a duplicate PUBACK
    assert list(flow.inflight) == [2]
    assert engine.data_to_send() == b""


def test_the_send_quota_window_closes_and_a_puback_reopens_it() -> None:
    """Receive Maximum of the client (send_quota 2 here): the broker asks the flow's window
    before each send; a delivered acknowledgement makes room for the next."""
    engine, flow, _ = connected()
    for _ in range(2):
        assert flow.window_open(engine.send_quota)
        engine.send_publish(Msg(1), Encoded("a", 1))
    assert not flow.window_open(engine.send_quota)
    assert engine.puback_received(1) is Flow.DELIVERED
    assert flow.window_open(engine.send_quota)


# -- outgoing QoS 2 -------------------------------------------------------------------------


@pytest.mark.parametrize("level", [4, 5])
def test_qos2_publish_pubrec_pubrel_pubcomp(level: int) -> None:
    engine, flow, woken = connected(level)
    pid = engine.send_publish(Msg(2), Encoded("a", 2, level))
    engine.data_to_send()
    woken.clear()
    assert engine.pubcomp_received(pid) is Flow.UNKNOWN  # PUBCOMP before PUBREC: ignored
    assert engine.pubrec_received(pid, 0x00) is Flow.RELEASED
    assert woken == ["wake"]
    assert sent(engine, level) == [Pubrel(pid)]
    assert flow.inflight[pid].released
    # the PUBREL was lost and the client sends PUBREC again: released again, PUBREL again
    assert engine.pubrec_received(pid, 0x00) is Flow.RELEASED
    assert sent(engine, level) == [Pubrel(pid)]
    assert engine.pubcomp_received(pid) is Flow.DELIVERED
    assert not flow.inflight and engine.data_to_send() == b""
    assert engine.pubcomp_received(pid) is Flow.UNKNOWN


def test_pubrec_with_an_error_code_ends_the_flow_without_pubrel() -> None:
    engine, flow, _ = connected()
    pid = engine.send_publish(Msg(2), Encoded("a", 2))
    engine.data_to_send()
    assert engine.pubrec_received(pid, ReasonCode.NOT_AUTHORIZED) is Flow.REFUSED
    assert not flow.inflight and engine.data_to_send() == b""


@pytest.mark.parametrize(("level", "reason_code"), [(5, 0x92), (4, 0x00)])
def test_pubrec_for_no_qos2_message_is_answered_pubrel_0x92(level: int, reason_code: int) -> None:
    """MQTT 5 §3.6.2.1: Packet Identifier not found; 3.1.1 has no reason codes: a plain
    PUBREL, which the client's unknown-id handling ignores."""
    engine, _, _ = connected(level)
    engine.send_publish(Msg(1), Encoded("a", 1, level))
    engine.data_to_send()
    assert engine.pubrec_received(1, 0x00) is Flow.UNKNOWN  # a QoS 1 message: no PUBREC
    [pubrel] = sent(engine, level)
    assert isinstance(pubrel, Pubrel) and pubrel.packet_id == 1
    assert pubrel.reason_code == reason_code


def test_a_release_stored_first_is_written_only_when_the_broker_says() -> None:
    """A persistent session stores "released" before PUBREL goes out (a restart resends
    PUBREL, never the PUBLISH): ``reply_now=False`` leaves the bytes to ``send_pubrel``."""
    engine, _, woken = connected()
    pid = engine.send_publish(Msg(2), Encoded("a", 2))
    engine.data_to_send()
    woken.clear()
    assert engine.pubrec_received(pid, 0x00, reply_now=False) is Flow.RELEASED
    assert engine.data_to_send() == b"" and woken == []
    engine.send_pubrel(pid)
    assert sent(engine) == [Pubrel(pid)] and woken == ["wake"]


def test_resend_writes_dup_publishes_and_pubrels_in_the_order_first_sent() -> None:
    engine, flow, _ = connected()
    first = engine.send_publish(Msg(2), Encoded("a", 2))
    second = engine.send_publish(Msg(1), Encoded("b", 1))
    engine.pubrec_received(first, 0x00)
    engine.data_to_send()
    resend = engine.resend(lambda msg: Encoded("a" if msg.qos == 2 else "b", msg.qos))
    assert resend.publishes == 1 and resend.dropped == ()
    pubrel, publish = sent(engine)
    assert pubrel == Pubrel(first)
    assert isinstance(publish, Publish) and publish.packet_id == second and publish.dup
    # a message that can no longer be sent (expired) leaves the flow without acknowledgement
    resend = engine.resend(lambda msg: None)
    assert resend.dropped == (second,) and list(flow.inflight) == [first]


# -- incoming QoS 2 -------------------------------------------------------------------------


@pytest.mark.parametrize("level", [4, 5])
def test_incoming_qos2_is_held_until_pubrel_and_a_duplicate_is_not_routed(level: int) -> None:
    engine, flow, _ = connected(level)
    assert engine.qos2_publish_received(7, receive_maximum=10) is Flow.NEW
    engine.hold(7)
    engine.send_publish_ack(2, 7, routed=1)
    assert sent(engine, level) == [Pubrec(7)]
    # the client did not see the PUBREC and resends (DUP): acknowledged again, not routed
    assert engine.qos2_publish_received(7, receive_maximum=10) is Flow.DUPLICATE
    assert sent(engine, level) == [Pubrec(7)]
    assert engine.pubrel_received(7) is Flow.RELEASE
    assert sent(engine, level) == [Pubcomp(7)]
    assert not flow.qos2_incoming
    # released: the same id is a new message now
    assert engine.qos2_publish_received(7, receive_maximum=10) is Flow.NEW


@pytest.mark.parametrize(("level", "reason_code"), [(5, 0x92), (4, 0x00)])
def test_pubrel_for_an_id_not_held_is_answered_pubcomp_0x92(level: int, reason_code: int) -> None:
    engine, _, _ = connected(level)
    assert engine.pubrel_received(3) is Flow.UNKNOWN
    [pubcomp] = sent(engine, level)
    assert isinstance(pubcomp, Pubcomp) and pubcomp.packet_id == 3
    assert pubcomp.reason_code == reason_code


def test_a_pubcomp_stored_first_and_a_duplicate_pubrec_wait_for_the_broker() -> None:
    engine, _, _ = connected()
    engine.hold(5)
    assert engine.qos2_publish_received(5, 10, reply_now=False) is Flow.DUPLICATE
    assert engine.pubrel_received(5, reply_now=False) is Flow.RELEASE
    assert engine.data_to_send() == b""
    engine.send_pubrec(5)
    engine.send_pubcomp(5)
    assert sent(engine) == [Pubrec(5), Pubcomp(5)]


def test_one_qos2_message_beyond_the_receive_maximum_is_a_violation() -> None:
    """MQTT 5 §3.3.4: more unacknowledged QoS 2 PUBLISH than the Receive Maximum we sent:
    DISCONNECT 0x93 (the broker ends the connection with the violation the engine names)."""
    engine, _, _ = connected()
    for pid in (1, 2):
        assert engine.qos2_publish_received(pid, receive_maximum=2) is Flow.NEW
        engine.hold(pid)
    assert engine.qos2_publish_received(3, receive_maximum=2) is RECEIVE_MAXIMUM_EXCEEDED
    assert RECEIVE_MAXIMUM_EXCEEDED.reason_code == ReasonCode.RECEIVE_MAXIMUM_EXCEEDED
    assert engine.qos2_publish_received(1, receive_maximum=2) is Flow.DUPLICATE  # not new
    engine.pubrel_received(1)
    assert engine.qos2_publish_received(3, receive_maximum=2) is Flow.NEW


def test_an_accepted_message_that_could_not_be_stored_is_let_go() -> None:
    engine, flow, _ = connected()
    engine.hold(4)
    engine.unhold(4)  # the client may send it again: it is a new message then
    assert not flow.qos2_incoming
    assert engine.qos2_publish_received(4, 10) is Flow.NEW


@pytest.mark.parametrize(("qos", "routed", "code"), [(1, 1, 0x00), (1, 0, 0x10), (2, 0, 0x10)])
def test_the_publish_acknowledgement_says_no_matching_subscribers(
    qos: int, routed: int, code: int
) -> None:
    engine, _, _ = connected()
    engine.send_publish_ack(qos, 9, routed)
    [ack] = sent(engine)
    assert isinstance(ack, Puback if qos == 1 else Pubrec)
    assert ack.packet_id == 9 and ack.reason_code == code


# -- the end of the connection ----------------------------------------------------------------


def test_an_ended_connection_writes_no_acknowledgement_but_the_flow_still_moves() -> None:
    """After the engine ended the connection nothing more is written (a reply stored first
    arrives too late), while the session's flow, which outlives the connection, still records
    what the client acknowledged."""
    engine, flow, woken = connected()
    pid = engine.send_publish(Msg(2), Encoded("a", 2))
    engine.data_to_send()
    engine.disconnect(None, "client disconnected")
    woken.clear()
    assert engine.pubrec_received(pid, 0x00) is Flow.RELEASED
    engine.send_pubrel(pid)
    engine.send_publish_ack(1, 3, 1)
    assert engine.data_to_send() == b"" and woken == []
    assert flow.inflight[pid].released


def test_without_a_session_every_acknowledgement_is_unknown() -> None:
    """Before a session is attached (or after it left the connection) nothing is in flight."""
    engine, _, _ = connected()
    engine.flow = None
    assert engine.puback_received(1) is Flow.UNKNOWN
    assert engine.pubcomp_received(1) is Flow.UNKNOWN
    assert engine.pubrec_received(1, 0) is Flow.UNKNOWN
    assert engine.pubrel_received(2) is Flow.UNKNOWN
    assert sent(engine) == [Pubrel(1, 0x92), Pubcomp(2, 0x92)]  # answered: not found


def test_one_chunk_is_handed_over_as_it_is() -> None:
    """data_to_send: a single chunk is not copied (one PUBACK per read is the common case)."""
    engine, _, _ = connected()
    chunk = encode(Puback(1), 5)
    engine.out.append(chunk)
    assert engine.data_to_send() is chunk
    engine.out.extend([chunk, chunk])
    assert engine.data_to_send() == chunk * 2 and engine.out == []
