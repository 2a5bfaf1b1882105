"""Hypothesis strategies for valid MQTT packets, by protocol level and direction."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Auth,
    Connack,
    Connect,
    Disconnect,
    Packet,
    PacketType,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Pubcomp,
    Publish,
    Pubrec,
    Pubrel,
    Suback,
    Subscribe,
    Subscription,
    Unsuback,
    Unsubscribe,
    Will,
)
from edge_broker.mqtt.properties import PROPERTY_SPECS, WILL, ValueKind
from edge_broker.mqtt.reason_codes import (
    AUTH_REASON_CODES_FROM_CLIENT,
    AUTH_REASON_CODES_FROM_SERVER,
    CONNACK_REASON_CODES,
    DISCONNECT_REASON_CODES_FROM_CLIENT,
    DISCONNECT_REASON_CODES_FROM_SERVER,
    PUBACK_REASON_CODES,
    PUBREL_REASON_CODES,
    SUBACK_REASON_CODES,
    SUBACK_RETURN_CODES_V3,
    UNSUBACK_REASON_CODES,
)

LEVELS = (3, 4, 5)

mqtt_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)
topic_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#"),
    min_size=1,
    max_size=12,
)
topic_filters = st.one_of(
    mqtt_text.filter(bool),
    st.sampled_from(["#", "+", "a/+/b", "a/#", "$share/g/a/+", "$SYS/#", "/", "+/+"]),
)
packet_ids = st.integers(1, 0xFFFF)
payloads = st.binary(max_size=40)
small_binary = st.binary(max_size=12)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFF_FFFF)

_BOOLEAN_FIELDS = {
    "payload_format_indicator",
    "request_problem_information",
    "request_response_information",
    "maximum_qos",
    "retain_available",
    "wildcard_subscription_available",
    "subscription_identifier_available",
    "shared_subscription_available",
}


def _value_strategy(field: str, kind: ValueKind) -> st.SearchStrategy[Any]:
    if field in _BOOLEAN_FIELDS:
        return st.integers(0, 1)
    if field in ("receive_maximum", "topic_alias"):
        return st.integers(1, 0xFFFF)
    if field == "maximum_packet_size":
        return st.integers(1, 0xFFFF_FFFF)
    if field == "response_topic":
        return topic_names
    return {
        ValueKind.BYTE: st.integers(0, 255),
        ValueKind.TWO_BYTE: u16,
        ValueKind.FOUR_BYTE: u32,
        ValueKind.STRING: mqtt_text,
        ValueKind.BINARY: small_binary,
    }[kind]


@st.composite
def properties(draw: st.DrawFn, context: int, from_client: bool = True) -> Properties:
    """Valid properties for ``context`` (a packet type or WILL)."""
    values: dict[str, Any] = {}
    for spec in PROPERTY_SPECS:
        if context not in spec.allowed_in or not draw(st.booleans()):
            continue
        if spec.kind is ValueKind.STRING_PAIR:
            values[spec.field] = tuple(draw(st.lists(st.tuples(mqtt_text, mqtt_text), max_size=3)))
        elif spec.kind is ValueKind.VARINT:
            if context == PacketType.PUBLISH and from_client:
                continue
            most = 1 if context == PacketType.SUBSCRIBE else 3
            values[spec.field] = tuple(
                draw(st.lists(st.integers(1, 268_435_455), min_size=1, max_size=most))
            )
        else:
            values[spec.field] = draw(_value_strategy(spec.field, spec.kind))
    if "authentication_data" in values and "authentication_method" not in values:
        values["authentication_method"] = draw(mqtt_text)
    return Properties(**values)


def _props(level: int, context: int, from_client: bool = True) -> st.SearchStrategy[Properties]:
    if level < 5:
        return st.just(NO_PROPERTIES)
    return properties(context, from_client)


@st.composite
def connects(draw: st.DrawFn, level: int) -> Connect:
    will = None
    if draw(st.booleans()):
        will = Will(
            draw(topic_names),
            draw(payloads),
            draw(st.integers(0, 2)),
            draw(st.booleans()),
            draw(_props(level, WILL)),
        )
    username = draw(st.none() | mqtt_text)
    password = draw(st.none() | small_binary)
    if level < 5 and username is None:
        password = None
    return Connect(
        level,
        draw(mqtt_text),
        draw(st.booleans()),
        draw(u16),
        will,
        username,
        password,
        draw(_props(level, PacketType.CONNECT)),
        "MQIsdp" if level == 3 else "MQTT",
    )


@st.composite
def publishes(draw: st.DrawFn, level: int, from_client: bool) -> Publish:
    qos = draw(st.integers(0, 2))
    props = draw(_props(level, PacketType.PUBLISH, from_client))
    topic = draw(topic_names)
    if props.topic_alias is not None and draw(st.booleans()):
        topic = ""
    return Publish(
        topic,
        draw(payloads),
        qos,
        draw(st.booleans()),
        qos > 0 and draw(st.booleans()),
        draw(packet_ids) if qos else None,
        props,
    )


def _acks(level: int, cls: type, context: int, codes: frozenset[int]) -> st.SearchStrategy[Any]:
    if level < 5:
        return st.builds(cls, packet_ids)
    return st.builds(cls, packet_ids, st.sampled_from(sorted(codes)), _props(level, context))


@st.composite
def subscribes(draw: st.DrawFn, level: int) -> Subscribe:
    subs = []
    for topic_filter in draw(st.lists(topic_filters, min_size=1, max_size=4)):
        qos = draw(st.integers(0, 2))
        if level < 5:
            subs.append(Subscription(topic_filter, qos))
            continue
        no_local = draw(st.booleans()) and not topic_filter.startswith("$share/")
        subs.append(
            Subscription(topic_filter, qos, no_local, draw(st.booleans()), draw(st.integers(0, 2)))
        )
    return Subscribe(draw(packet_ids), tuple(subs), draw(_props(level, PacketType.SUBSCRIBE)))


def client_packets(level: int) -> st.SearchStrategy[Packet]:
    """Packets a client sends after CONNECT."""
    choices: list[st.SearchStrategy[Any]] = [
        publishes(level, from_client=True),
        _acks(level, Puback, PacketType.PUBACK, PUBACK_REASON_CODES),
        _acks(level, Pubrec, PacketType.PUBREC, PUBACK_REASON_CODES),
        _acks(level, Pubrel, PacketType.PUBREL, PUBREL_REASON_CODES),
        _acks(level, Pubcomp, PacketType.PUBCOMP, PUBREL_REASON_CODES),
        subscribes(level),
        st.builds(
            Unsubscribe,
            packet_ids,
            st.lists(topic_filters, min_size=1, max_size=4).map(tuple),
            _props(level, PacketType.UNSUBSCRIBE),
        ),
        st.just(Pingreq()),
    ]
    if level == 5:
        choices.append(
            st.builds(
                Disconnect,
                st.sampled_from(sorted(DISCONNECT_REASON_CODES_FROM_CLIENT)),
                _props(level, PacketType.DISCONNECT),
            )
        )
        choices.append(
            st.builds(
                Auth,
                st.sampled_from(sorted(AUTH_REASON_CODES_FROM_CLIENT)),
                _props(level, PacketType.AUTH),
            )
        )
    else:
        choices.append(st.just(Disconnect()))
    return st.one_of(choices)


def server_packets(level: int) -> st.SearchStrategy[Packet]:
    """Packets a server sends."""
    if level < 5:
        connack = st.builds(
            Connack, st.just(False) if level == 3 else st.booleans(), st.integers(0, 5)
        )
        suback_codes = st.sampled_from(sorted(SUBACK_RETURN_CODES_V3))
        unsuback = st.builds(Unsuback, packet_ids)
    else:
        connack = st.builds(
            Connack,
            st.booleans(),
            st.sampled_from(sorted(CONNACK_REASON_CODES)),
            _props(level, PacketType.CONNACK, False),
        )
        suback_codes = st.sampled_from(sorted(SUBACK_REASON_CODES))
        unsuback = st.builds(
            Unsuback,
            packet_ids,
            st.lists(st.sampled_from(sorted(UNSUBACK_REASON_CODES)), min_size=1, max_size=4).map(
                tuple
            ),
            _props(level, PacketType.UNSUBACK, False),
        )
    choices: list[st.SearchStrategy[Any]] = [
        connack,
        publishes(level, from_client=False),
        _acks(level, Puback, PacketType.PUBACK, PUBACK_REASON_CODES),
        _acks(level, Pubrec, PacketType.PUBREC, PUBACK_REASON_CODES),
        _acks(level, Pubrel, PacketType.PUBREL, PUBREL_REASON_CODES),
        _acks(level, Pubcomp, PacketType.PUBCOMP, PUBREL_REASON_CODES),
        st.builds(
            Suback,
            packet_ids,
            st.lists(suback_codes, min_size=1, max_size=4).map(tuple),
            _props(level, PacketType.SUBACK, False),
        ),
        unsuback,
        st.just(Pingresp()),
    ]
    if level == 5:
        choices.append(
            st.builds(
                Disconnect,
                st.sampled_from(sorted(DISCONNECT_REASON_CODES_FROM_SERVER)),
                _props(level, PacketType.DISCONNECT, False),
            )
        )
        choices.append(
            st.builds(
                Auth,
                st.sampled_from(sorted(AUTH_REASON_CODES_FROM_SERVER)),
                _props(level, PacketType.AUTH, False),
            )
        )
    return st.one_of(choices)
