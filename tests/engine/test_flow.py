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
