"""engine/connection.py's events and its own bytes (engine/events.py), with bytes and times
only: every answer the engine writes is decoded as a client would and checked against the
spec's packet, reason code and Reason String, per protocol version."""

from __future__ import annotations

import pytest

from edge_broker.engine.connection import ConnectionEngine, Timeout
from edge_broker.engine.events import (
    ENGINE_EVENTS,
    ConnectionEnded,
    ConnectRefused,
    Event,
    PreAuthExceeded,
    ProtocolViolation,
    TimedOut,
)
from edge_broker.engine.states import ConnState, Trigger
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect, Disconnect, Packet, Properties, Publish
from edge_broker.mqtt.reason_codes import ConnackReturnCode, ReasonCode

# A PUBLISH with QoS 3 (MQTT 5 §3.3.1.2: malformed), well framed so it is the only error.
BAD_QOS_PUBLISH = b"\x36\x05\x00\x01t\x00\x01"


def engine_at(now: float = 0.0, connect_limit: int = 256) -> ConnectionEngine:
    return ConnectionEngine(now, max_connect_packet_size=connect_limit, max_packet_size=4096)


def connected(level: int = 5, properties: Properties | None = None) -> ConnectionEngine:
    engine = engine_at(100.0)
    connect = Connect(level, "eng", True, 10, properties=properties or Properties())
    [packet] = engine.receive(encode(connect, level), 100.0)
    assert isinstance(packet, Connect) and packet.protocol_level == level
    engine.trigger(Trigger.CONNECT)
    engine.keep_alive = 10
    engine.trigger(Trigger.CONNACK_SUCCESS)
    return engine


def sent(engine: ConnectionEngine, level: int) -> list[Packet]:
    """What the engine wants to send, decoded as the client reads it."""
    return PacketReader(side="client", protocol_level=level).feed(engine.data_to_send())


def kinds(events: list[Event]) -> list[type]:
    return [type(event) for event in events]


def test_packets_are_their_own_events_and_nothing_is_sent() -> None:
    engine = connected()
    publish = Publish("a/b", b"x", 0)
    events = engine.receive(encode(publish, 5) * 2, 101.0)
    assert events == [publish, publish]
    assert not ENGINE_EVENTS & set(kinds(events))
    assert engine.data_to_send() == b"" and not engine.ending


def test_malformed_packet_when_connected_v5_is_a_violation_answered_with_disconnect() -> None:
    engine = connected(5)
    events = engine.receive(BAD_QOS_PUBLISH, 101.0)
    assert kinds(events) == [ProtocolViolation, ConnectionEnded] and engine.ending
    violation = events[0]
    assert isinstance(violation, ProtocolViolation)
    assert violation.reason_code == ReasonCode.MALFORMED_PACKET
    [disconnect] = sent(engine, 5)
    assert disconnect == Disconnect(
        ReasonCode.MALFORMED_PACKET, Properties(reason_string=violation.reason)
    )
    assert engine.state is ConnState.CLOSED
    assert engine.data_to_send() == b""  # handed out once
    assert engine.receive(encode(Publish("t", b"", 0), 5), 102.0) == []  # ended: nothing more


def test_no_reason_string_when_the_client_asked_for_no_problem_information() -> None:
    engine = connected(5, Properties(request_problem_information=0))
    engine.receive(BAD_QOS_PUBLISH, 101.0)
    assert sent(engine, 5) == [Disconnect(ReasonCode.MALFORMED_PACKET)]


@pytest.mark.parametrize("level", [3, 4])
def test_malformed_packet_when_connected_v3_ends_without_disconnect(level: int) -> None:
    engine = connected(level)
    assert kinds(engine.receive(BAD_QOS_PUBLISH, 101.0)) == [ProtocolViolation, ConnectionEnded]
    assert engine.data_to_send() == b""  # MQTT 3.x has no server DISCONNECT


def test_packets_before_a_violation_come_first_and_the_answer_waits_for_the_broker() -> None:
    engine = connected(5)
    publish = Publish("a", b"1", 0)
    events = engine.receive(encode(publish, 5) + BAD_QOS_PUBLISH, 101.0)
    assert events[0] == publish and kinds(events) == [Publish, ProtocolViolation]
    assert engine.ending  # the broker's cue that the list holds more than packets
    assert engine.data_to_send() == b"" and engine.state is ConnState.CONNECTED
    violation = events[1]
    assert isinstance(violation, ProtocolViolation)
    assert kinds(engine.answer(violation)) == [ConnectionEnded]
    [disconnect] = sent(engine, 5)
    assert isinstance(disconnect, Disconnect)
    assert disconnect.reason_code == ReasonCode.MALFORMED_PACKET
    assert engine.answer(violation) == []  # answered once


def test_a_broker_refused_packet_is_answered_in_the_clients_format() -> None:
    engine = connected(5)
    events = engine.answer(ProtocolViolation(ReasonCode.TOPIC_ALIAS_INVALID, "alias 9 > 4"))
    assert kinds(events) == [ConnectionEnded]
    assert sent(engine, 5) == [
        Disconnect(ReasonCode.TOPIC_ALIAS_INVALID, Properties(reason_string="alias 9 > 4"))
    ]


def test_malformed_v5_connect_is_refused_with_connack_and_reason_string() -> None:
    engine = engine_at()
    # CONNECT, MQTT 5, with reserved flag bit 0 set (MQTT 5 §3.1.2.3: malformed)
    data = bytearray(encode(Connect(5, "c", True, 10), 5))
    data[9] |= 0x01
    events = engine.receive(bytes(data), 1.0)
    assert kinds(events) == [ProtocolViolation, ConnectRefused, ConnectionEnded]
    violation = events[0]
    assert isinstance(violation, ProtocolViolation)
    [connack] = sent(engine, 5)
    assert isinstance(connack, Connack) and not connack.session_present
    assert connack.reason_code == violation.reason_code == ReasonCode.MALFORMED_PACKET
    assert connack.properties.reason_string == violation.reason


def test_unknown_protocol_version_is_refused_in_a_format_every_client_reads() -> None:
    engine = engine_at()
    data = bytearray(encode(Connect(4, "c", True, 10), 4))
    data[8] = 6  # protocol level byte: 6 does not exist
    events = engine.receive(bytes(data), 1.0)
    assert kinds(events) == [ProtocolViolation, ConnectRefused, ConnectionEnded]
    violation = events[0]
    assert isinstance(violation, ProtocolViolation)
    assert violation.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION
    # 3.1.1 §3.1.2.2: answered with return code 0x01 in the 3.1.1 format
    assert sent(engine, 4) == [Connack(False, ConnackReturnCode.UNACCEPTABLE_PROTOCOL_VERSION)]


def test_first_packet_not_connect_is_closed_silently() -> None:
    engine = engine_at()
    events = engine.receive(encode(Publish("t", b"", 0), 4), 1.0)
    assert kinds(events) == [ProtocolViolation, ConnectionEnded]
    assert engine.data_to_send() == b""  # no protocol level known: nothing to answer in
    assert engine.state is ConnState.CLOSED


def test_packet_too_large_while_authenticating_gets_connack_0x95_naming_the_limit() -> None:
    engine = engine_at(connect_limit=256)
    engine.receive(encode(Connect(5, "c", True, 10), 5), 0.0)
    engine.trigger(Trigger.CONNECT)
    events = engine.receive(encode(Publish("t", b"x" * 400, 0), 5), 1.0)
    assert kinds(events) == [ProtocolViolation, ConnectRefused, ConnectionEnded]
    [connack] = sent(engine, 5)
    assert isinstance(connack, Connack)
    assert connack.reason_code == ReasonCode.PACKET_TOO_LARGE
    reason = connack.properties.reason_string
    assert reason is not None
    assert "limits.max_connect_packet_size is 256 bytes before authentication" in reason


@pytest.mark.parametrize(
    ("level", "code"), [(5, ReasonCode.QUOTA_EXCEEDED), (4, ConnackReturnCode.SERVER_UNAVAILABLE)]
)
def test_pre_auth_overflow_with_a_connect_is_refused_in_its_format(level: int, code: int) -> None:
    connect = encode(Connect(level, "greedy", True, 10), level)
    engine = engine_at(connect_limit=len(connect))
    # one CONNECT and twice its size more, pipelined in one read: over the budget
    events = engine.receive(connect + encode(Publish("t", b"y" * 10, 0), level) * 5, 1.0)
    assert kinds(events) == [PreAuthExceeded, ConnectRefused, ConnectionEnded]
    over = events[0]
    assert isinstance(over, PreAuthExceeded) and over.client_id == "greedy"
    assert f"limits.max_connect_packet_size = {len(connect)}" in over.reason
    [connack] = sent(engine, level)
    assert isinstance(connack, Connack) and connack.reason_code == code
    if level == 5:
        assert connack.properties.reason_string == over.reason
    assert engine.state is ConnState.CLOSED


def test_pre_auth_overflow_before_any_connect_closes_silently() -> None:
    engine = engine_at(connect_limit=100)
    assert not engine.pre_auth_exceeded(190)  # a WebSocket upgrade request counts too
    events = engine.receive(encode(Connect(5, "c", True, 10), 5)[:11], 2.0)  # part of one
    assert kinds(events) == [PreAuthExceeded, ConnectionEnded]
    assert engine.data_to_send() == b"" and engine.ending


def test_refuse_connect_and_disconnect_are_written_by_the_engine() -> None:
    engine = engine_at()
    engine.receive(encode(Connect(5, "c", True, 10), 5), 0.0)
    engine.trigger(Trigger.CONNECT)
    events = engine.refuse_connect(ReasonCode.NOT_AUTHORIZED, "no grant for c")
    assert events == [
        ConnectRefused(ReasonCode.NOT_AUTHORIZED, "no grant for c"),
        ConnectionEnded("no grant for c"),
    ]
    assert sent(engine, 5) == [
        Connack(False, ReasonCode.NOT_AUTHORIZED, Properties(reason_string="no grant for c"))
    ]
    assert engine.refuse_connect(ReasonCode.NOT_AUTHORIZED, "again") == []  # ended already
    quiet = connected(5)
    assert quiet.disconnect(None, "client sent DISCONNECT") == [
        ConnectionEnded("client sent DISCONNECT")
    ]
    assert quiet.data_to_send() == b""


def test_keep_alive_timeout_through_handle_timer_sends_disconnect_0x8d() -> None:
    engine = connected(5)  # Keep Alive 10 s, last bytes at 100
    assert engine.handle_timer(115.0, connect_timeout=5) == []
    events = engine.handle_timer(115.5, connect_timeout=5)
    assert events == [TimedOut(Timeout.KEEP_ALIVE), ConnectionEnded("keep alive timeout")]
    assert sent(engine, 5) == [
        Disconnect(ReasonCode.KEEP_ALIVE_TIMEOUT, Properties(reason_string="keep alive timeout"))
    ]
    assert engine.handle_timer(1e9, connect_timeout=5) == []  # ended: no more timers


def test_connect_timeout_and_token_expiry_are_reported_for_the_broker_to_answer() -> None:
    engine = engine_at(50.0)
    assert engine.handle_timer(56.0, connect_timeout=5) == [TimedOut(Timeout.CONNECT)]
    assert engine.data_to_send() == b"" and engine.state is ConnState.AWAIT_CONNECT
    engine = connected(5)
    engine.keep_alive = 0
    engine.token_deadline = 200.0
    assert engine.handle_timer(200.0, connect_timeout=5) == [TimedOut(Timeout.TOKEN)]
    assert engine.state is ConnState.CONNECTED


def test_pre_auth_refusal_honours_the_connects_request_problem_information() -> None:
    no_info = Properties(request_problem_information=0)
    connect = encode(Connect(5, "quiet", True, 10, properties=no_info), 5)
    engine = engine_at(connect_limit=len(connect))
    events = engine.receive(connect + b"\xc0\x00" * len(connect), 1.0)  # PINGREQs pipelined
    assert kinds(events) == [PreAuthExceeded, ConnectRefused, ConnectionEnded]
    assert sent(engine, 5) == [Connack(False, ReasonCode.QUOTA_EXCEEDED)]  # no Reason String


def test_packet_too_large_once_connected_is_disconnect_0x95_without_the_pre_auth_note() -> None:
    engine = connected(5)  # max_packet_size 4096 after CONNACK
    events = engine.receive(encode(Publish("t", b"x" * 5000, 0), 5), 101.0)
    assert kinds(events) == [ProtocolViolation, ConnectionEnded]
    [disconnect] = sent(engine, 5)
    assert isinstance(disconnect, Disconnect)
    assert disconnect.reason_code == ReasonCode.PACKET_TOO_LARGE
    assert "before authentication" not in (disconnect.properties.reason_string or "")
