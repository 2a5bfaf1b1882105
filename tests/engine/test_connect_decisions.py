"""The CONNECT decisions the engine makes before and at CONNACK (engine/negotiation.py): the
empty Client Identifier rules, what refuses a will, and the capabilities an MQTT 5 CONNACK
announces. Pure functions of the CONNECT and the server's offer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from edge_broker.engine.negotiation import (
    NO_PACKET_LIMIT,
    Offer,
    Refusal,
    client_id_refusal,
    connack_properties,
    negotiate,
    resumes,
    will_refusal,
)
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect, Properties, Will
from edge_broker.mqtt.reason_codes import ReasonCode

OFFER = Offer(server_keep_alive=0, max_keep_alive=65535, max_session_expiry=3600, max_inflight=20)
INVALID_ID = ReasonCode.CLIENT_IDENTIFIER_NOT_VALID


@pytest.mark.parametrize(
    ("level", "clean", "allow", "refused"),
    [
        (3, True, True, "MQTT 3.1 needs a client identifier of 1 to 23 characters"),
        (4, False, True, "an empty client identifier needs clean session = 1"),
        (4, True, False, "this broker needs a client identifier"),
        (5, False, False, "this broker needs a client identifier"),
        (4, True, True, None),
        (5, False, True, None),  # MQTT 5: Clean Start 0 with an assigned id is allowed
    ],
)
def test_an_empty_client_identifier(
    level: int, clean: bool, allow: bool, refused: str | None
) -> None:
    got = client_id_refusal(Connect(level, "", clean, 60), allow_empty=allow)
    if refused is None:
        assert got is None
    else:
        assert isinstance(got, Refusal) and got.reason_code == INVALID_ID
        assert got.reason.startswith(refused)


@pytest.mark.parametrize("level", [3, 4, 5])
def test_a_client_identifier_is_never_refused_here(level: int) -> None:
    """Its length and characters are the codec's (mqtt/), its owner the broker's."""
    assert client_id_refusal(Connect(level, "c1", False, 60), allow_empty=False) is None


def test_a_will_above_the_maximum_qos_or_retained_without_retain_available() -> None:
    qos1 = Offer(0, 65535, 0, 10, maximum_qos=1, retain_available=False)
    refused = will_refusal(Will("w", b"x", qos=2), qos1)
    assert refused == Refusal(
        ReasonCode.QOS_NOT_SUPPORTED, "the will QoS 2 exceeds this broker's maximum QoS 1"
    )
    refused = will_refusal(Will("w", b"x", qos=1, retain=True), qos1)
    assert refused == Refusal(ReasonCode.RETAIN_NOT_SUPPORTED, "retained wills are not supported")
    assert will_refusal(Will("w", b"x", qos=1), qos1) is None
    assert will_refusal(Will("w", b"x", qos=2, retain=True), OFFER) is None


def test_the_connack_announces_the_capabilities_that_differ_from_the_defaults() -> None:
    offer = Offer(
        server_keep_alive=30,
        max_keep_alive=65535,
        max_session_expiry=600,
        max_inflight=20,
        receive_maximum=40,
        maximum_qos=1,
        retain_available=False,
        maximum_packet_size=1000,
        topic_alias_maximum=5,
        wildcard_subscriptions=False,
        subscription_identifiers=True,
        shared_subscriptions=False,
    )
    connect = Connect(
        5,
        "c",
        True,
        60,
        properties=Properties(
            session_expiry_interval=7200, authentication_method="SMOKER", receive_maximum=3
        ),
    )
    agreement = negotiate(connect, offer)
    props = connack_properties(connect, agreement, offer, b"final", "auto-1")
    assert props == Properties(
        session_expiry_interval=600,  # granted less than asked: named
        receive_maximum=40,
        maximum_qos=1,
        retain_available=0,
        maximum_packet_size=1000,
        assigned_client_identifier="auto-1",
        topic_alias_maximum=5,
        wildcard_subscription_available=0,
        subscription_identifier_available=1,
        shared_subscription_available=0,
        server_keep_alive=30,  # the server's Keep Alive replaces the client's 60
        authentication_method="SMOKER",
        authentication_data=b"final",
    )
    [connack] = PacketReader(side="client", protocol_level=5).feed(
        encode(Connack(False, 0, props), 5)
    )
    assert isinstance(connack, Connack) and connack.properties == props


def test_what_the_client_got_as_asked_is_not_repeated() -> None:
    connect = Connect(5, "c", True, 60, properties=Properties(session_expiry_interval=60))
    offer = Offer(0, 65535, 3600, 20, receive_maximum=10, maximum_packet_size=2048)
    props = connack_properties(connect, negotiate(connect, offer), offer, None, None)
    assert props.session_expiry_interval is None and props.server_keep_alive is None
    assert props.maximum_qos is None  # QoS 2 is the default: not named
    assert props.topic_alias_maximum is None and props.assigned_client_identifier is None
    assert props.authentication_method is None and props.authentication_data is None


@given(level=st.sampled_from([3, 4]), clean=st.booleans(), keep_alive=st.integers(0, 65535))
def test_mqtt3_connack_carries_no_properties(level: int, clean: bool, keep_alive: int) -> None:
    offer = Offer(30, 600, 3600, 20, receive_maximum=5, maximum_qos=1, topic_alias_maximum=9)
    connect = Connect(level, "c", clean, keep_alive)
    assert connack_properties(connect, negotiate(connect, offer), offer, None, None) == (
        Properties()
    )


def test_the_default_offer_is_mqtts_defaults() -> None:
    """An offer that names no capability announces MQTT's defaults (nothing limited)."""
    assert (OFFER.receive_maximum, OFFER.maximum_qos, OFFER.retain_available) == (65535, 2, True)
    assert OFFER.maximum_packet_size == NO_PACKET_LIMIT and OFFER.topic_alias_maximum == 0


@pytest.mark.parametrize("level", [3, 4, 5])
def test_the_agreement_carries_its_connack_properties(level: int) -> None:
    offer = Offer(45, 65535, 3600, 20, receive_maximum=7, maximum_qos=1)
    connect = Connect(level, "", True, 60)
    agreement = negotiate(connect, offer, b"data", "auto-2")
    if level == 5:
        assert agreement.connack == connack_properties(connect, agreement, offer, b"data", "auto-2")
        assert agreement.connack.server_keep_alive == 45
        assert agreement.connack.assigned_client_identifier == "auto-2"
    else:
        assert agreement.connack == Properties()


@pytest.mark.parametrize(
    ("clean", "expires_at", "now", "resumed"),
    [
        (False, None, 10.0, True),  # never expires, or its connection is still there
        (False, 20.0, 10.0, True),
        (False, 10.0, 10.0, False),  # expired at this very moment
        (False, 5.0, 10.0, False),
        (True, None, 10.0, False),  # Clean Start 1 (3.x: clean session 1) starts afresh
        (True, 20.0, 10.0, False),
    ],
)
def test_a_connect_resumes_an_unexpired_session_without_clean_start(
    clean: bool, expires_at: float | None, now: float, resumed: bool
) -> None:
    for level in (4, 5):
        assert resumes(Connect(level, "c", clean, 60), expires_at, now) is resumed
