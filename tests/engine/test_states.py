"""The connection states written once (engine/states.py): the engine's reader acceptance, the
broker's handler rows and every state change derive from the one table."""

from __future__ import annotations

import pytest

from edge_broker.broker.dispatch import HANDLERS
from edge_broker.broker.handle_auth import refuse_before_auth
from edge_broker.engine.connection import ConnectionEngine
from edge_broker.engine.states import (
    ADMITTED,
    READER_ADMITS,
    TRANSITIONS,
    ConnState,
    Trigger,
    next_state,
)
from edge_broker.mqtt.codec import PacketReader
from edge_broker.mqtt.errors import ProtocolError
from edge_broker.mqtt.packets import CLIENT_SENDS, PACKET_TYPE_OF, PacketType

# The smallest well-formed client packet of each type after CONNECT (MQTT 5 framing).
SMALLEST = {
    PacketType.PUBLISH: b"\x30\x04\x00\x01a\x00",
    PacketType.PUBACK: b"\x40\x02\x00\x01",
    PacketType.PUBREC: b"\x50\x02\x00\x01",
    PacketType.PUBREL: b"\x62\x02\x00\x01",
    PacketType.PUBCOMP: b"\x70\x02\x00\x01",
    PacketType.SUBSCRIBE: b"\x82\x07\x00\x01\x00\x00\x01a\x00",
    PacketType.UNSUBSCRIBE: b"\xa2\x06\x00\x01\x00\x00\x01a",
    PacketType.PINGREQ: b"\xc0\x00",
    PacketType.DISCONNECT: b"\xe0\x00",
    PacketType.AUTH: b"\xf0\x02\x19\x00",
}


def test_every_state_reaches_closed_and_closed_only_closes() -> None:
    for state in ConnState:
        assert next_state(state, Trigger.CLOSE) is ConnState.CLOSED
    assert set(TRANSITIONS[ConnState.CLOSED]) == {Trigger.CLOSE}


def test_impossible_moves_are_named() -> None:
    with pytest.raises(ValueError, match="CONNECTED cannot take 'CONNECT received'"):
        next_state(ConnState.CONNECTED, Trigger.CONNECT)
    with pytest.raises(ValueError, match="AWAIT_CONNECT cannot take 'CONNACK 0x00 sent'"):
        next_state(ConnState.AWAIT_CONNECT, Trigger.CONNACK_SUCCESS)


def test_the_reader_admits_exactly_what_await_connect_admits_before_connect() -> None:
    for ptype, data in SMALLEST.items():
        assert ptype not in ADMITTED[ConnState.AWAIT_CONNECT]
        with pytest.raises(ProtocolError, match="first packet must be CONNECT"):
            _engine_reader().feed(data)


@pytest.mark.parametrize("level", [4, 5])
def test_the_reader_admits_exactly_what_connected_admits_after_connect(level: int) -> None:
    for ptype, data in SMALLEST.items():
        reader = _engine_reader(level)
        admitted = ptype in ADMITTED[ConnState.CONNECTED] and (level == 5 or ptype != 15)
        if admitted:
            [packet] = reader.feed(data if level == 5 else _v3(ptype, data))
            assert PACKET_TYPE_OF[type(packet)] == ptype
        else:
            with pytest.raises(ProtocolError):
                reader.feed(data)


def _engine_reader(level: int | None = None) -> PacketReader:
    """A reader as the engine builds it (its admitted rows), with the CONNECT already read when
    ``level`` is given."""
    reader = ConnectionEngine(0.0, 1024, 1024).reader
    reader.protocol_level = level
    return reader


def test_the_engine_reader_is_given_the_table_rows() -> None:
    reader = ConnectionEngine(0.0, 1024, 1024).reader
    assert reader._admits == READER_ADMITS
    assert READER_ADMITS == (ADMITTED[ConnState.AWAIT_CONNECT], ADMITTED[ConnState.CONNECTED])


def test_a_reader_admits_what_it_is_given() -> None:
    only_publish = (frozenset({PacketType.CONNECT}), frozenset({PacketType.PUBLISH}))
    reader = PacketReader(side="server", protocol_level=5, admitted=only_publish)
    assert len(reader.feed(SMALLEST[PacketType.PUBLISH])) == 1
    with pytest.raises(ProtocolError):
        reader.feed(SMALLEST[PacketType.PINGREQ])


def _v3(ptype: PacketType, data: bytes) -> bytes:
    """The same packet without MQTT 5 properties (3.1.1 framing)."""
    v3 = {
        PacketType.PUBLISH: b"\x30\x03\x00\x01a",
        PacketType.SUBSCRIBE: b"\x82\x06\x00\x01\x00\x01a\x00",
        PacketType.UNSUBSCRIBE: b"\xa2\x05\x00\x01\x00\x01a",
    }
    return v3.get(ptype, data)


def test_a_second_connect_is_refused_by_the_reader() -> None:
    connect = b"\x10\x0d\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x00"
    reader = _engine_reader()
    assert len(reader.feed(connect)) == 1
    with pytest.raises(ProtocolError, match="second CONNECT"):
        reader.feed(connect)


def test_handler_rows_follow_the_admitted_packets() -> None:
    for state in ConnState:
        row = HANDLERS[state]
        handled = {
            PACKET_TYPE_OF[cls] for cls, handler in row.items() if handler is not refuse_before_auth
        }
        if state is ConnState.AUTHENTICATING:
            handled.add(PacketType.DISCONNECT)  # DISCONNECT there means "gave up": no CONNACK
        assert handled == ADMITTED[state], state.name
        if state in (ConnState.CONNECTING, ConnState.AUTHENTICATING):
            # the codec lets these through after CONNECT; refused until CONNACK 0x00
            assert {PACKET_TYPE_OF[cls] for cls in row} == CLIENT_SENDS
