"""engine/negotiation.py and engine/publish.py: CONNECT negotiation, the end of a connection,
PUBLISH validation and the acknowledgements, as pure functions (no broker, no clock)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_broker.engine.aliases import InboundAliases
from edge_broker.engine.connection import ConnectionEngine
from edge_broker.engine.events import ProtocolViolation
from edge_broker.engine.negotiation import (
    NEVER_EXPIRES,
    NO_PACKET_LIMIT,
    Offer,
    departure,
    expiry_at_disconnect,
    negotiate,
)
from edge_broker.engine.publish import (
    PublishRefused,
    capability_refusal,
    pubcomp_unknown,
    publish_ack,
    pubrel_unknown,
    refused_ack,
    resolve,
)
from edge_broker.engine.states import ConnState, Trigger
from edge_broker.mqtt.codec import PacketReader
from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Will,
)
from edge_broker.mqtt.reason_codes import ReasonCode

OFFER = Offer(server_keep_alive=0, max_keep_alive=65535, max_session_expiry=3600, max_inflight=20)


def v5(keep_alive: int = 60, **props: int) -> Connect:
    return Connect(5, "c", True, keep_alive, properties=Properties(**props))  # type: ignore[arg-type]


def test_mqtt5_asks_and_the_server_caps() -> None:
    got = negotiate(
        v5(session_expiry_interval=7200, receive_maximum=50, maximum_packet_size=999), OFFER
    )
    assert (got.session_expiry, got.asked) == (3600, 7200)
    assert got.send_quota == 20  # min(ours, the client's Receive Maximum)
    assert got.client_max_packet == 999
    assert (got.keep_alive, got.server_keep_alive) == (60, None)


def test_mqtt5_defaults() -> None:
    got = negotiate(v5(receive_maximum=5), OFFER)
    assert (got.session_expiry, got.send_quota, got.client_max_packet) == (0, 5, NO_PACKET_LIMIT)
    assert got.topic_alias_maximum == 0


@pytest.mark.parametrize(
    ("server", "maximum", "asked", "enforced", "announced"),
    [
        (30, 65535, 60, 30, 30),  # server_keep_alive imposes its value
        (0, 100, 600, 100, 100),  # above max_keep_alive: lowered
        (0, 100, 0, 100, 100),  # 0 (no keep alive) is not allowed under a maximum
        (0, 65535, 0, 0, None),  # ... unless the maximum is the protocol's
        (0, 100, 100, 100, None),  # as asked: nothing to announce
    ],
)
def test_keep_alive(server: int, maximum: int, asked: int, enforced: int, announced: int) -> None:
    offer = Offer(server, maximum, 0, 10)
    got = negotiate(v5(asked), offer)
    assert (got.keep_alive, got.server_keep_alive) == (enforced, announced)


def test_mqtt3_keeps_its_own_keep_alive_and_clean_session_decides_the_expiry() -> None:
    offer = Offer(30, 65535, NEVER_EXPIRES, 10)
    kept = negotiate(Connect(4, "c", False, 600), offer)
    assert (kept.keep_alive, kept.server_keep_alive) == (600, None)  # 3.1.1 cannot be told
    assert kept.session_expiry == NEVER_EXPIRES and kept.send_quota == 10
    assert negotiate(Connect(3, "c", True, 600), offer).session_expiry == 0


@given(
    asked=st.integers(0, NEVER_EXPIRES),
    cap=st.integers(0, NEVER_EXPIRES),
    receive_maximum=st.integers(1, 65535),
    inflight=st.integers(1, 65535),
)
def test_never_more_than_either_side_allows(
    asked: int, cap: int, receive_maximum: int, inflight: int
) -> None:
    got = negotiate(
        v5(session_expiry_interval=asked, receive_maximum=receive_maximum),
        Offer(0, 65535, cap, inflight),
    )
    assert got.session_expiry == min(asked, cap)
    assert got.send_quota == min(receive_maximum, inflight)


def test_the_engine_applies_the_agreement_at_connack() -> None:
    engine = ConnectionEngine(0.0, 64, 4096)
    engine.receive(_connect_bytes(), 0.0)
    engine.trigger(Trigger.CONNECT)
    agreement = negotiate(v5(30, receive_maximum=3, topic_alias_maximum=2), OFFER)
    engine.accept(agreement, True, Properties(receive_maximum=32))
    assert engine.state is ConnState.CONNECTED
    assert (engine.keep_alive, engine.send_quota) == (30, 3)
    assert engine.aliases_out is not None and engine.aliases_out.maximum == 2
    assert engine.reader.max_packet_size == 4096  # the pre-authentication bound lifted
    [connack] = PacketReader(side="client", protocol_level=5).feed(engine.data_to_send())
    assert connack == Connack(True, 0, Properties(receive_maximum=32))


def _connect_bytes() -> bytes:
    from edge_broker.mqtt.codec import encode

    return encode(v5(), 5)


WILL = Will("w", b"x", properties=Properties(will_delay_interval=10))


@pytest.mark.parametrize(
    ("will", "v5_", "expiry", "keep", "expected"),
    [
        (None, True, 0, False, (False, None, True, None)),  # clean: the session ends
        (None, True, 60, False, (False, None, False, 160.0)),
        (None, True, NEVER_EXPIRES, False, (False, None, False, None)),
        (WILL, True, 60, False, (False, 110.0, False, 160.0)),  # delayed will
        (WILL, True, 0, False, (True, None, True, None)),  # the session ends first: now
        (WILL, False, 60, False, (True, None, False, 160.0)),  # 3.x has no will delay
        (WILL, True, 60, True, (False, None, False, None)),  # taken over: resumed at once
        (Will("w", b"x"), True, 60, True, (True, None, False, None)),  # no delay: sent
    ],
)
def test_departure(
    will: Will | None,
    v5_: bool,
    expiry: int,
    keep: bool,
    expected: tuple[bool, float | None, bool, float | None],
) -> None:
    got = departure(will, v5_, expiry, keep, 100.0)
    assert (got.will_now, got.will_at, got.end_session, got.expires_at) == expected


def test_capabilities_refused_as_announced() -> None:
    qos2 = Publish("t", b"", 2, packet_id=1)
    refused = capability_refusal(qos2, 1, True)
    assert refused == PublishRefused(
        ReasonCode.QOS_NOT_SUPPORTED, "QoS 2 exceeds this broker's maximum QoS 1"
    )
    retained = Publish("t", b"", 0, retain=True)
    assert capability_refusal(retained, 2, False) == PublishRefused(
        ReasonCode.RETAIN_NOT_SUPPORTED, "retained messages are not supported"
    )
    assert capability_refusal(retained, 2, True) is None


def test_resolve_aliases_identifiers_and_payload_format() -> None:
    aliases = InboundAliases(2)
    first = Publish("a/b", b"", 0, properties=Properties(topic_alias=1, user_properties=()))
    assert resolve(first, aliases) == ("a/b", Properties(user_properties=()))
    again = Publish("", b"", 0, properties=Properties(topic_alias=1))
    assert resolve(again, aliases) == ("a/b", Properties())
    too_high = resolve(Publish("x", b"", 0, properties=Properties(topic_alias=3)), aliases)
    assert isinstance(too_high, PublishRefused) and too_high.violation
    assert too_high.reason_code == ReasonCode.TOPIC_ALIAS_INVALID
    bad = Properties(payload_format_indicator=1)
    qos0 = resolve(Publish("t", b"\xff", 0, properties=bad), aliases)
    qos1 = resolve(Publish("t", b"\xff", 1, packet_id=1, properties=bad), aliases)
    assert isinstance(qos0, PublishRefused) and qos0.violation  # nothing else tells QoS 0
    assert isinstance(qos1, PublishRefused) and not qos1.violation  # the PUBACK does
    assert qos1.reason_code == ReasonCode.PAYLOAD_FORMAT_INVALID
    ids = resolve(
        Publish("t", b"", 0, properties=Properties(subscription_identifiers=(1,))), aliases
    )
    assert isinstance(ids, PublishRefused) and ids.reason_code == ReasonCode.PROTOCOL_ERROR


def _read(data: bytes, level: int = 5) -> object:
    [packet] = PacketReader(side="client", protocol_level=level).feed(data)
    return packet


def test_acknowledgements() -> None:
    assert _read(publish_ack(1, 7, 1, True)) == Puback(7)
    assert _read(publish_ack(2, 7, 0, True)) == Pubrec(7, ReasonCode.NO_MATCHING_SUBSCRIBERS)
    assert _read(publish_ack(1, 7, 0, False), 4) == Puback(7)  # 3.x has no reason code
    refused = _read(refused_ack(1, 7, ReasonCode.QUOTA_EXCEEDED, "why", True))
    assert refused == Puback(7, ReasonCode.QUOTA_EXCEEDED, Properties(reason_string="why"))
    quiet = _read(refused_ack(2, 7, ReasonCode.QUOTA_EXCEEDED, "why", False))
    assert quiet == Pubrec(7, ReasonCode.QUOTA_EXCEEDED)
    assert _read(pubrel_unknown(7, True)) == Pubrel(7, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)
    assert _read(pubrel_unknown(7, False), 4) == Pubrel(7)
    assert _read(pubcomp_unknown(7, True)) == Pubcomp(7, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)
    assert _read(pubcomp_unknown(7, False), 4) == Pubcomp(7)


def test_expiry_at_disconnect() -> None:
    assert expiry_at_disconnect(60, 7200, 3600) == 3600
    assert expiry_at_disconnect(60, 0, 3600) == 0
    assert expiry_at_disconnect(0, 0, 3600) == 0
    refused = expiry_at_disconnect(0, 10, 3600)
    assert isinstance(refused, ProtocolViolation)
    assert refused.reason_code == ReasonCode.PROTOCOL_ERROR
