"""engine/flow.py: a session's QoS 1/2 state without sockets: packet ids, both Receive
Maximum windows, and the PUBACK / PUBREC / PUBREL / PUBCOMP transitions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from edge_broker.engine.flow import PubrecOutcome, QosFlow


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


def test_the_outgoing_window_closes_at_the_send_quota_and_reopens_on_puback() -> None:
    flow: QosFlow[Msg] = QosFlow()
    for _ in range(2):
        assert flow.window_open(2)
        flow.sent(flow.allocate_packet_id(), Msg(1))
    assert not flow.window_open(2)
    assert flow.puback(1)
    assert flow.window_open(2)
    assert list(flow.inflight) == [2]


def test_puback_completes_only_qos1_in_flight() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(1, Msg(1))
    flow.sent(2, Msg(2))
    assert not flow.puback(9)  # unknown: ignored
    assert not flow.puback(2)  # a QoS 2 message is not completed by PUBACK
    assert flow.puback(1)
    assert not flow.puback(1)  # twice: the second is unknown
    assert list(flow.inflight) == [2]


def test_qos2_outgoing_pubrec_releases_then_pubcomp_completes() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(7, Msg(2))
    assert not flow.pubcomp(7)  # not released yet: PUBCOMP before PUBREC is ignored
    assert flow.pubrec(7, 0x00) is PubrecOutcome.RELEASED
    assert flow.inflight[7].released
    assert flow.pubrec(7, 0x00) is PubrecOutcome.RELEASED  # PUBREL lost: released again
    assert flow.pubcomp(7)
    assert not flow.inflight
    assert not flow.pubcomp(7)


def test_pubrec_for_an_unknown_or_qos1_id_and_a_refusal() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(1, Msg(1))
    flow.sent(2, Msg(2))
    assert flow.pubrec(1, 0x00) is PubrecOutcome.UNKNOWN  # QoS 1: PUBREL 0x92
    assert flow.pubrec(3, 0x00) is PubrecOutcome.UNKNOWN
    assert flow.pubrec(2, 0x87) is PubrecOutcome.REFUSED  # the flow ends (MQTT 5 §4.3.3)
    assert list(flow.inflight) == [1]


def test_unsent_takes_a_message_out_of_flight() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(1, Msg(1))
    flow.unsent(1)
    flow.unsent(1)  # already gone: nothing happens
    assert not flow.inflight


def test_incoming_qos2_held_until_pubrel_within_the_receive_maximum() -> None:
    flow: QosFlow[Msg] = QosFlow()
    assert not flow.incoming_window_full(2)
    flow.hold(10)
    assert flow.duplicate(10)  # a DUP resend: acknowledged, not routed again
    assert not flow.duplicate(11)
    flow.hold(11)
    assert flow.incoming_window_full(2)  # a third is 0x93
    assert flow.pubrel(10)
    assert not flow.pubrel(10)  # released already: PUBCOMP 0x92
    assert not flow.duplicate(10)  # the id may be reused for a new message
    assert not flow.incoming_window_full(2)


class Encoded:
    """A PUBLISH template as mqtt/publish_template.py gives it: head, packet id, tail."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def for_packet_id(self, packet_id: int, dup: bool = False) -> bytes:
        return bytes((0x3A if dup else 0x32,)) + packet_id.to_bytes(2, "big") + self.body


def test_publish_allocates_the_packet_id_records_it_in_flight_and_returns_its_bytes() -> None:
    flow: QosFlow[Msg] = QosFlow()
    flow.sent(1, Msg(1))  # restored: 1 is taken
    pid, data = flow.publish(Msg(1), Encoded(b"a"))
    assert (pid, data) == (2, b"\x32\x00\x02a")
    assert list(flow.inflight) == [1, 2]
    assert flow.puback(2) and list(flow.inflight) == [1]


def test_resend_writes_dup_publishes_and_pubrels_in_the_order_first_sent() -> None:
    flow: QosFlow[Msg] = QosFlow()
    for qos in (1, 2, 2, 1):
        flow.publish(Msg(qos), Encoded(b"x"))
    assert flow.pubrec(2, 0) is PubrecOutcome.RELEASED  # awaits PUBCOMP: PUBREL again
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
