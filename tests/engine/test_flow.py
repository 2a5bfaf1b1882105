"""engine/flow.py: a session's QoS 1/2 tables without sockets: packet ids and the outgoing
Receive Maximum window. The PUBACK / PUBREC / PUBREL / PUBCOMP transitions are the connection
engine's (tests/engine/test_engine_flows.py)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from edge_broker.engine.flow import QosFlow


@dataclass(frozen=True)
class Msg:
    qos: int


def test_packet_ids_go_round_robin_and_skip_those_in_flight() -> None:
    flow: QosFlow[Msg] = QosFlow()
    assert [flow.allocate_packet_id() for _ in range(3)] == [1, 2, 3]
    flow.sent(4, Msg(1))  # e.g. restored from the store
    assert flow.allocate_packet_id() == 5  # 4 is still in flight
    flow.next_packet_id = 65535
    assert flow.allocate_packet_id() == 65535
    assert flow.allocate_packet_id() == 1  # wraps, never 0


def test_no_free_packet_id_is_an_error_not_a_loop() -> None:
    flow: QosFlow[Msg] = QosFlow()
    for pid in range(1, 65536):
        flow.sent(pid, Msg(1))
    with pytest.raises(RuntimeError, match="no free packet identifier"):
        flow.allocate_packet_id()


def test_the_outgoing_window_closes_at_the_send_quota() -> None:
    flow: QosFlow[Msg] = QosFlow()
    for _ in range(2):
        assert flow.window_open(2)
        flow.sent(flow.allocate_packet_id(), Msg(1))
    assert not flow.window_open(2)
    flow.unsent(1)
    assert flow.window_open(2)
    assert list(flow.inflight) == [2]


def test_unsent_takes_a_message_out_of_flight() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(1, Msg(1))
    flow.unsent(1)
    flow.unsent(1)  # already gone: nothing happens
    assert not flow.inflight


class Encoded:
    """A PUBLISH template as mqtt/publish_template.py gives it: head, packet id, tail."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def for_packet_id(self, packet_id: int, dup: bool = False) -> bytes:
        return bytes((0x3A if dup else 0x32,)) + packet_id.to_bytes(2, "big") + self.body


def test_resend_writes_dup_publishes_and_pubrels_in_the_order_first_sent() -> None:
    flow: QosFlow[Msg] = QosFlow()
    for qos in (1, 2, 2, 1):
        flow.sent(flow.allocate_packet_id(), Msg(qos))
    flow.inflight[2].released = True  # PUBREC came: it awaits PUBCOMP, PUBREL again
    expired = flow.inflight[4].outgoing
    resend = flow.resend(lambda msg: None if msg is expired else Encoded(b"y"))
    assert resend.data == (
        b"\x3a\x00\x01y"  # PUBLISH 1, DUP set (MQTT 5 §3.3.1.1)
        + b"\x62\x02\x00\x02"  # PUBREL 2
        + b"\x3a\x00\x03y"  # PUBLISH 3, not yet PUBREC'd
    )
    assert resend.publishes == 2 and resend.dropped == (4,)
    assert list(flow.inflight) == [1, 2, 3]  # the one that could not be sent left the flow
    assert flow.resend(lambda msg: None).dropped == (1, 3)
    assert list(flow.inflight) == [2]
