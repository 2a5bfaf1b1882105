"""The broker writes what its connection engine answers (engine/connection.py,
engine/events.py), on the in-memory broker (engine_harness.py): refusals and DISCONNECTs reach
the client in its protocol version, after the answers to the packets that came before."""

from __future__ import annotations

from engine_harness import memory_broker

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Pingreq,
    Properties,
    Puback,
    Publish,
)
from edge_broker.mqtt.reason_codes import ReasonCode

LIMIT = 64  # limits.max_connect_packet_size: the pre-authentication budget is twice this


def test_pre_auth_refusal_sends_no_reason_string_when_the_client_asked_for_none() -> None:
    """MQTT 5 §3.1.2.11.7: with Request Problem Information 0 the server sends no Reason String
    on a CONNACK; the pre-authentication refusal used to send it anyway."""
    for mb in memory_broker({"limits": {"max_connect_packet_size": LIMIT}}):
        c = mb.client(5)
        quiet = Properties(request_problem_information=0)
        connect = encode(Connect(5, "quiet", True, 10, properties=quiet), 5)
        c.send_raw(connect + encode(Pingreq(), 5) * LIMIT)  # past 2 x LIMIT before CONNACK
        [connack] = c.closed()
        assert connack == Connack(False, ReasonCode.QUOTA_EXCEEDED)
        c2 = mb.client(5)
        c2.send_raw(encode(Connect(5, "loud", True, 10), 5) + encode(Pingreq(), 5) * LIMIT)
        [connack] = c2.closed()
        assert isinstance(connack, Connack)
        assert connack.reason_code == ReasonCode.QUOTA_EXCEEDED
        assert f"limits.max_connect_packet_size = {LIMIT}" in (
            connack.properties.reason_string or ""
        )


def test_packets_before_a_malformed_one_are_answered_before_the_disconnect() -> None:
    for mb in memory_broker():
        c = mb.client(5)
        c.connect("pipelined")
        bad_qos = b"\x36\x05\x00\x01t\x00\x01"  # QoS 3: malformed (MQTT 5 §3.3.1.2)
        c.send_raw(encode(Publish("p/t", b"1", 1, packet_id=5), 5) + bad_qos)
        puback, disconnect = c.closed()
        assert isinstance(puback, Puback) and puback.packet_id == 5
        assert isinstance(disconnect, Disconnect)
        assert disconnect.reason_code == ReasonCode.MALFORMED_PACKET
        assert disconnect.properties.reason_string


def test_keep_alive_timeout_disconnect_comes_from_the_engine() -> None:
    for mb in memory_broker():
        c = mb.client(5)
        c.connect("sleepy", keep_alive=2)
        mb.advance(3.5)  # past 1.5 x Keep Alive
        [disconnect] = c.closed()
        assert disconnect == Disconnect(
            ReasonCode.KEEP_ALIVE_TIMEOUT, Properties(reason_string="keep alive timeout")
        )
