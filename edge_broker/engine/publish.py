"""An incoming PUBLISH as the protocol judges it, and the acknowledgements both ways (MQTT 5
§3.3–§3.7, §4.3; 3.1.1 §3.3–§3.7): pure functions of the packet, the connection's protocol
level and its topic aliases, with no socket, no clock and no broker.

What is left to the broker (``broker/handle_publish.py``): its own limits (topic length and
levels, publish rate), the policy, storing and routing. It asks here in the order the checks
have always run: :func:`capability_refusal` first (Maximum QoS, Retain Available), then its
limits, then :func:`resolve` (topic alias, Subscription Identifier, Payload Format Indicator).

The acknowledgements are bytes, ready to send: success ones are the same in 3.1, 3.1.1 and 5
(MQTT 5 §3.4.2.1: the reason code may be left out when it is 0x00 and there are no
properties); the others carry their reason code in MQTT 5 and fall back to the plain packet in
3.x, which has no reason codes there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..mqtt.codec import encode
from ..mqtt.errors import ProtocolError
from ..mqtt.names import payload_is_valid_utf8
from ..mqtt.packets import NO_PROPERTIES, Properties, Puback, Pubcomp, Publish, Pubrec, Pubrel
from ..mqtt.reason_codes import ReasonCode
from .aliases import InboundAliases

PUBACK_HEAD = b"\x40\x02"
PUBREC_HEAD = b"\x50\x02"
PUBREL_HEAD = b"\x62\x02"  # PUBREL: its fixed-header flags are 0b0010 (MQTT 5 §3.6.1)
PUBCOMP_HEAD = b"\x70\x02"


@dataclass(frozen=True, slots=True)
class PublishRefused:
    """A PUBLISH the protocol does not take. ``violation``: the connection ends (DISCONNECT
    ``reason_code`` in MQTT 5, a close in 3.x); else it is answered with a PUBACK / PUBREC
    carrying ``reason_code`` (:func:`refused_ack`) and the connection goes on."""

    reason_code: int
    reason: str
    violation: bool = True


def capability_refusal(
    packet: Publish, maximum_qos: int, retain_available: bool
) -> PublishRefused | None:
    """Above this server's Maximum QoS (0x9B) or retained when Retain Available is 0 (0x9A):
    the CONNACK announced both (MQTT 5 §3.2.2.3.4, §3.2.2.3.5), so either is a violation."""
    qos = packet.qos
    if qos > maximum_qos:
        return PublishRefused(
            ReasonCode.QOS_NOT_SUPPORTED,
            f"QoS {qos} exceeds this broker's maximum QoS {maximum_qos}",
        )
    if packet.retain and not retain_available:
        return PublishRefused(
            ReasonCode.RETAIN_NOT_SUPPORTED, "retained messages are not supported"
        )
    return None


def resolve(packet: Publish, aliases: InboundAliases) -> tuple[str, Properties] | PublishRefused:
    """The topic and properties an MQTT 5 PUBLISH stands for: its Topic Alias set or used
    (§3.3.2.3.4; 0x94 above our maximum, 0x82 unset) and taken out of the properties; a
    Subscription Identifier from a client is a violation (0x82, §3.3.4); a payload that
    says UTF-8 and is not (§3.3.2.3.2, 0x99) ends a QoS 0 connection and is refused in the
    acknowledgement of QoS 1 and 2."""
    topic = packet.topic
    props = packet.properties
    if props is NO_PROPERTIES:
        return topic, props
    alias = props.topic_alias
    if alias is not None:
        try:
            topic = aliases.resolve(alias, topic)
        except ProtocolError as exc:
            return PublishRefused(int(exc.reason_code), exc.message)
        props = replace(props, topic_alias=None)
    if props.subscription_identifiers:
        return PublishRefused(
            ReasonCode.PROTOCOL_ERROR,
            "a client must not send Subscription Identifiers (MQTT 5 §3.3.4)",
        )
    if props.payload_format_indicator == 1 and not payload_is_valid_utf8(packet.payload):
        return PublishRefused(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            "payload format indicator says UTF-8 but the payload is not",
            violation=packet.qos == 0,
        )
    return topic, props


def publish_ack(qos: int, packet_id: int, routed: int, v5: bool) -> bytes:
    """PUBACK (QoS 1) or PUBREC (QoS 2) for a message taken: MQTT 5 says 0x10 No matching
    subscribers when it reached nobody (§3.4.2.1)."""
    if routed or not v5:
        return (PUBACK_HEAD if qos == 1 else PUBREC_HEAD) + packet_id.to_bytes(2, "big")
    ack = Puback if qos == 1 else Pubrec
    return encode(ack(packet_id, ReasonCode.NO_MATCHING_SUBSCRIBERS), 5)


def refused_ack(
    qos: int, packet_id: int, code: int, reason: str, problem_information: bool
) -> bytes:
    """An MQTT 5 PUBACK / PUBREC refusing a QoS 1 / 2 message with ``code`` (and ``reason`` as
    Reason String unless the client asked for no problem information, §3.1.2.11.7)."""
    props = Properties(reason_string=reason) if problem_information else NO_PROPERTIES
    ack = Puback if qos == 1 else Pubrec
    return encode(ack(packet_id, code, props), 5)


def pubrec(packet_id: int) -> bytes:
    """PUBREC 0x00: a QoS 2 message held (or its resend acknowledged again)."""
    return PUBREC_HEAD + packet_id.to_bytes(2, "big")


def pubrel(packet_id: int) -> bytes:
    """PUBREL 0x00: an outgoing QoS 2 message released (MQTT 5 §4.3.3)."""
    return PUBREL_HEAD + packet_id.to_bytes(2, "big")


def pubcomp(packet_id: int) -> bytes:
    """PUBCOMP 0x00: an incoming QoS 2 packet id released."""
    return PUBCOMP_HEAD + packet_id.to_bytes(2, "big")


def pubrel_unknown(packet_id: int, v5: bool) -> bytes:
    """The answer to a PUBREC for no QoS 2 message in flight: PUBREL 0x92 Packet Identifier not
    found in MQTT 5, a plain PUBREL in 3.x (which ends the client's flow either way)."""
    if v5:
        return encode(Pubrel(packet_id, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND), 5)
    return pubrel(packet_id)


def pubcomp_unknown(packet_id: int, v5: bool) -> bytes:
    """The answer to a PUBREL for a packet id not held: PUBCOMP 0x92 in MQTT 5, a plain
    PUBCOMP in 3.x."""
    if v5:
        return encode(Pubcomp(packet_id, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND), 5)
    return pubcomp(packet_id)
