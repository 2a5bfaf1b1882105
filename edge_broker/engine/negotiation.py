"""What a CONNECT and the server agree on, and what happens to a session when its connection
goes: pure functions of the packet, the server's offer and ``now``, no socket and no clock.

- :func:`negotiate`: Keep Alive (MQTT 5 §3.1.2.10, §3.2.2.3.14 Server Keep Alive; 3.1.1 has
  no way to tell the client, so its own value is kept), Session Expiry Interval (§3.1.2.11.2,
  capped by the server; 3.x: clean session 0 keeps the session for ever), Receive Maximum
  (§3.1.2.11.3, capped by ``limits.max_inflight``), the client's Maximum Packet Size
  (§3.1.2.11.4) and Topic Alias Maximum (§3.1.2.11.5). The connection engine applies the result
  at CONNACK (``ConnectionEngine.accept``).
- :func:`client_id_refusal` and :func:`will_refusal`: what refuses a CONNECT before
  authentication is asked (an empty Client Identifier the version or the server does not take,
  §3.1.3.1; a will beyond Maximum QoS or Retain Available, §3.2.2.3.4, §3.2.2.3.5).
- :func:`connack_properties`: the capabilities an MQTT 5 CONNACK announces (§3.2.2.3), from the
  server's :class:`Offer` and the :class:`Agreement`.
- :func:`expiry_at_disconnect`: a Session Expiry Interval in the client's DISCONNECT
  (§3.14.2.2.2): capped as at CONNECT, and a protocol error when the CONNECT set none.
- :func:`resumes`: whether a CONNECT resumes the session its client id has (Clean Start,
  §3.1.2.4; an expired session is not resumed, §3.1.2.11.2).
- :func:`departure`: the will and the session when the connection ends (§3.1.2.11.2,
  §3.1.3.2.2 Will Delay Interval): the will now, later, or never; the session ended now, at an
  expiry, or never. The broker arms its timers from the answer.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..mqtt.packets import Connect, Properties, Will
from ..mqtt.reason_codes import ReasonCode
from .events import ProtocolViolation

NEVER_EXPIRES = 0xFFFFFFFF
"""Session Expiry Interval 0xFFFFFFFF: the session does not expire (MQTT 5 §3.1.2.11.2)."""

NO_PACKET_LIMIT = 268_435_460
"""The largest packet MQTT can express: the client's limit when its CONNECT names none."""


@dataclass(frozen=True, slots=True)
class Offer:
    """The server's side of the negotiation (``[broker]`` and ``[limits]``)."""

    server_keep_alive: int  # 0: accept the client's; else impose this value
    max_keep_alive: int  # client keep alives above it (and 0, unless it is 65535) are lowered
    max_session_expiry: int
    max_inflight: int  # our cap on the client's Receive Maximum
    # what the CONNACK announces (MQTT 5 §3.2.2.3); the defaults are MQTT's when absent
    receive_maximum: int = 65535  # ours: the client's QoS 2 messages awaiting PUBREL
    maximum_qos: int = 2
    retain_available: bool = True
    maximum_packet_size: int = NO_PACKET_LIMIT
    topic_alias_maximum: int = 0  # ours: how many aliases the client may give us
    wildcard_subscriptions: bool = True
    subscription_identifiers: bool = True
    shared_subscriptions: bool = True


@dataclass(frozen=True, slots=True)
class Agreement:
    """What the CONNACK settles. ``server_keep_alive`` is the Server Keep Alive to announce
    (MQTT 5 only, None when the client's own value stands); ``keep_alive`` is what the engine
    enforces; ``asked`` is the Session Expiry Interval the client asked for (CONNACK names the
    granted one only when it differs)."""

    keep_alive: int
    server_keep_alive: int | None
    session_expiry: int
    asked: int
    send_quota: int  # min(our max_inflight, the client's Receive Maximum)
    client_max_packet: int
    topic_alias_maximum: int  # the client's: how many aliases we may give it
    connack: Properties = Properties()  # what the CONNACK announces (MQTT 5; 3.x: none)


def negotiate(
    connect: Connect,
    offer: Offer,
    authentication_data: bytes | None = None,
    assigned_client_id: str | None = None,
) -> Agreement:
    """See the module docstring; the agreement carries its CONNACK's properties
    (:func:`connack_properties`, with the authentication method's final data and the Client
    Identifier the server assigned, if any)."""
    v5 = connect.protocol_level == 5
    if v5:
        props = connect.properties
        asked = props.session_expiry_interval or 0
        send_quota = min(props.receive_maximum or 65535, offer.max_inflight)
        client_max_packet = props.maximum_packet_size or NO_PACKET_LIMIT
        topic_alias_maximum = min(props.topic_alias_maximum or 0, 65535)
    else:
        asked = 0 if connect.clean_start else NEVER_EXPIRES
        send_quota = offer.max_inflight
        client_max_packet = NO_PACKET_LIMIT
        topic_alias_maximum = 0
    keep_alive = connect.keep_alive
    if offer.server_keep_alive:
        keep_alive = offer.server_keep_alive
    elif keep_alive > offer.max_keep_alive or (keep_alive == 0 and offer.max_keep_alive < 65535):
        keep_alive = offer.max_keep_alive
    changed = keep_alive != connect.keep_alive
    agreement = Agreement(
        keep_alive=keep_alive if v5 else connect.keep_alive,
        server_keep_alive=keep_alive if v5 and changed else None,
        session_expiry=min(asked, offer.max_session_expiry),
        asked=asked,
        send_quota=send_quota,
        client_max_packet=client_max_packet,
        topic_alias_maximum=topic_alias_maximum,
    )
    if not v5:
        return agreement
    props = connack_properties(connect, agreement, offer, authentication_data, assigned_client_id)
    return replace(agreement, connack=props)


@dataclass(frozen=True, slots=True)
class Refusal:
    """A CONNECT refused with CONNACK ``reason_code`` (3.x: the mapped return code) and
    ``reason`` as Reason String."""

    reason_code: int
    reason: str


def client_id_refusal(connect: Connect, allow_empty: bool) -> Refusal | None:
    """An empty Client Identifier (MQTT 5 §3.1.3.1, 3.1.1 §3.1.3.1): MQTT 3.1 needs one of 1
    to 23 characters, 3.1.1 allows none only with clean session 1, and the server assigns one
    only if ``allow_empty`` (``broker.allow_zero_length_client_id``). None: go on (with an
    identifier assigned by the server when the CONNECT's is empty)."""
    if connect.client_id:
        return None
    if connect.protocol_level == 3:
        return Refusal(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            "MQTT 3.1 needs a client identifier of 1 to 23 characters",
        )
    if connect.protocol_level == 4 and not connect.clean_start:
        return Refusal(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            "an empty client identifier needs clean session = 1 (MQTT 3.1.1 §3.1.3.1)",
        )
    if not allow_empty:
        return Refusal(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID, "this broker needs a client identifier"
        )
    return None


def will_refusal(will: Will, offer: Offer) -> Refusal | None:
    """A will the server cannot take: QoS above its Maximum QoS (0x9B, MQTT 5 §3.2.2.3.4) or
    retained when Retain Available is 0 (0x9A, §3.2.2.3.5)."""
    if will.qos > offer.maximum_qos:
        return Refusal(
            ReasonCode.QOS_NOT_SUPPORTED,
            f"the will QoS {will.qos} exceeds this broker's maximum QoS {offer.maximum_qos}",
        )
    if will.retain and not offer.retain_available:
        return Refusal(ReasonCode.RETAIN_NOT_SUPPORTED, "retained wills are not supported")
    return None


def connack_properties(
    connect: Connect,
    agreement: Agreement,
    offer: Offer,
    authentication_data: bytes | None,
    assigned_client_id: str | None,
) -> Properties:
    """Every capability of MQTT 5 §3.2.2.3 the client needs to know (3.x: none): the
    granted Session Expiry Interval only when it differs from the one asked, the Server Keep
    Alive only when the server changed it, Maximum QoS only below 2, the Topic Alias Maximum
    only when aliases are taken; the Authentication Method of the CONNECT and the method's
    final data (enhanced authentication, §4.12)."""
    if connect.protocol_level != 5:
        return Properties()
    expiry = agreement.session_expiry
    return Properties(
        session_expiry_interval=expiry if expiry != agreement.asked else None,
        receive_maximum=offer.receive_maximum,
        maximum_qos=offer.maximum_qos if offer.maximum_qos < 2 else None,
        retain_available=int(offer.retain_available),
        maximum_packet_size=offer.maximum_packet_size,
        assigned_client_identifier=assigned_client_id,
        topic_alias_maximum=offer.topic_alias_maximum or None,
        wildcard_subscription_available=int(offer.wildcard_subscriptions),
        subscription_identifier_available=int(offer.subscription_identifiers),
        shared_subscription_available=int(offer.shared_subscriptions),
        server_keep_alive=agreement.server_keep_alive,
        authentication_method=connect.properties.authentication_method,
        authentication_data=authentication_data,
    )


def resumes(connect: Connect, expires_at: float | None, now: float) -> bool:
    """Whether ``connect`` resumes the session its client id has, which expires at
    ``expires_at`` (None: not while offline, or never): not with Clean Start 1 (3.x: clean
    session 1), nor once the session expired (at ``now`` or before)."""
    return not connect.clean_start and (expires_at is None or expires_at > now)


@dataclass(frozen=True, slots=True)
class Departure:
    """What the end of a connection does (:func:`departure`): publish the will now
    (``will_now``), keep it until ``will_at``, end the session now (``end_session``), or let it
    expire at ``expires_at`` (None with ``end_session`` False: it never expires, or a takeover
    resumes it at once)."""

    will_now: bool
    will_at: float | None
    end_session: bool
    expires_at: float | None


def departure(
    will: Will | None, v5: bool, expiry_interval: int, keep_session: bool, now: float
) -> Departure:
    """The will and the session of a connection that ended at ``now``. ``keep_session``: a new
    connection takes the session over and resumes it, so it does not expire and a delayed will
    is not sent (MQTT 5 §3.1.3.2.2). A will is published at once without a delay, and also
    when the session ends with the connection (the delay never outlives the session)."""
    will_now = False
    will_at = None
    if will is not None:
        delay = (will.properties.will_delay_interval or 0) if v5 else 0
        if delay == 0 or (expiry_interval == 0 and not keep_session):
            will_now = True
        elif not keep_session:
            will_at = now + delay
    if keep_session:
        return Departure(will_now, will_at, False, None)
    if expiry_interval == 0:
        return Departure(will_now, will_at, True, None)
    expires_at = None if expiry_interval == NEVER_EXPIRES else now + expiry_interval
    return Departure(will_now, will_at, False, expires_at)


def expiry_at_disconnect(current: int, asked: int, maximum: int) -> int | ProtocolViolation:
    """The session's expiry after an MQTT 5 DISCONNECT asking for ``asked`` seconds: capped
    by ``maximum`` (``broker.max_session_expiry``); from 0 to anything else is a protocol
    error (MQTT 5 §3.14.2.2.2: the session may already be gone)."""
    if current == 0 and asked != 0:
        return ProtocolViolation(
            ReasonCode.PROTOCOL_ERROR,
            "a DISCONNECT must not set a session expiry when the CONNECT set none",
        )
    return min(asked, maximum)
