"""An application message inside the broker, and the bytes it is sent as.

A PUBLISH is encoded once per variant (protocol family, QoS, retain flag, subscription
identifiers, remaining expiry, outbound topic alias) and the bytes are reused for every subscriber
of that variant; for QoS 1/2 only the packet identifier is patched (DESIGN.md "The broker core").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..authz.request import Publication
from ..mqtt.codec import encode_publish_template
from ..mqtt.packets import NO_PROPERTIES, Properties, Will


@dataclass(frozen=True, slots=True)
class Message(Publication):
    """What a publisher sent, as routed: built once per PUBLISH, judged by the gates as the
    :class:`Publication` it is, routed, retained and delivered (issue 21). The properties exclude
    Topic Alias and Subscription Identifiers (they are per hop). ``expires_at`` is a deadline on
    the broker's clock (``Broker.clock``, ``time.monotonic`` unless a test gives another) from
    the Message Expiry Interval (MQTT 5 §3.3.2.3.3). ``origin`` is the publishing client id (No
    Local)."""

    properties: Properties = NO_PROPERTIES
    expires_at: float | None = None
    origin: str | None = None
    encoded: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)
    # Bytes the message holds, as the queue and retained limits count them (message_size):
    # computed once, read when it is queued and again when it leaves the queue.
    size: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "size", message_size(self.topic, self.payload, self.properties))

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at

    def remaining_expiry(self, now: float) -> int | None:
        """Seconds left, rounded up; ``None`` without an expiry (MQTT 5 §3.3.2.3.3)."""
        if self.expires_at is None:
            return None
        return max(0, math.ceil(self.expires_at - now))

    def template(
        self,
        v5: bool,
        qos: int,
        retain: bool,
        sub_ids: tuple[int, ...],
        alias: int = 0,
        send_topic: bool = True,
        level: int = 4,
        now: float = 0.0,
    ) -> Any:
        """The cached encoded variant; ``.data`` (QoS 0) or ``.for_packet_id(pid)``. ``now``
        (the broker's clock) gives the remaining Message Expiry Interval: callers pass it
        whenever the message has an expiry (positionally: this runs once per delivery)."""
        expiry = None
        if self.expires_at is not None and v5:
            expiry = self.remaining_expiry(now)
        key: int | tuple[Any, ...]
        if sub_ids or expiry is not None or alias or not send_topic:
            key = (v5, qos, retain, sub_ids, expiry, alias, send_topic)
        else:
            # the common variant (once per delivery): an int key, no tuple to build and hash;
            # an int never equals one of the tuple keys
            key = (qos << 2) | (retain << 1) | v5
        tpl = self.encoded.get(key)
        if tpl is None:
            props = self.properties
            if v5:
                if sub_ids or expiry is not None or alias:
                    props = replace(
                        props,
                        subscription_identifiers=sub_ids,
                        message_expiry_interval=expiry,
                        topic_alias=alias or None,
                    )
            tpl = encode_publish_template(
                self.topic if send_topic else "",
                self.payload,
                qos,
                retain,
                False,
                props,
                5 if v5 else level,
            )
            encoded = self.encoded
            if encoded and (
                len(encoded) > 16
                or tpl.size + sum(t.size for t in encoded.values()) > 2 * self.size + 512
            ):
                # Issue 16: at most about two copies of the message (a 3.x and a 5 variant);
                # variants per subscription identifier made a retained message hold 17.
                encoded.clear()
            encoded[key] = tpl
        return tpl


USER_PROPERTY_OVERHEAD = 130  # a (name, value) tuple, two str headers, the tuple slot


def message_size(topic: str, payload: bytes, props: Properties) -> int:
    """:attr:`Message.size`: topic, payload and, estimated, the properties (issue 16: 1 MB of
    empty user properties is 200,000 Python tuples, so they must count)."""
    if props is NO_PROPERTIES:
        return len(topic) + len(payload) + 32
    return len(topic) + len(payload) + 32 + properties_bytes(props)


def properties_bytes(props: Properties) -> int:
    """Estimated bytes a PUBLISH's properties hold in memory (see :attr:`Message.size`)."""
    size = 64
    for name, value in props.user_properties:
        size += USER_PROPERTY_OVERHEAD + len(name) + len(value)
    for text in (props.content_type, props.response_topic, props.correlation_data):
        if text is not None:
            size += 40 + len(text)
    return size


def _message_setters() -> tuple[Callable[[Message, Any], None], ...]:
    """The slot writers :func:`make_message` uses, after checking the fields are still these:
    the check runs once, at import, so a field added later cannot be left unset silently (as
    ``mqtt/fast_construct.py`` does for the decoded packets)."""
    names = (
        "topic",
        "payload",
        "qos",
        "retain",
        "properties",
        "_facts",
        "expires_at",
        "origin",
        "encoded",
        "size",
    )
    if tuple(f.name for f in fields(Message)) != names:
        raise RuntimeError("Message fields changed: update message._message_setters")
    return tuple(getattr(Message, name).__set__ for name in names)


(
    _SET_TOPIC,
    _SET_PAYLOAD,
    _SET_QOS,
    _SET_RETAIN,
    _SET_PROPS,
    _SET_FACTS,
    _SET_EXPIRY,
    _SET_ORIGIN,
    _SET_ENCODED,
    _SET_SIZE,
) = _message_setters()


def make_message(
    topic: str,
    payload: bytes,
    qos: int,
    retain: bool,
    properties: Properties,
    origin: str | None,
    clock: Callable[[], float] = time.monotonic,
) -> Message:
    """A Message from a received PUBLISH (properties already stripped of the alias). ``clock``
    is the broker's (``Broker.clock``; every broker caller passes it, the default is the
    broker's default clock, for scripts and tests), read only for a message with a Message
    Expiry Interval: a call per message otherwise.

    Built without the frozen-dataclass ``__init__`` (one ``object.__setattr__`` per field; the
    slots' own descriptors cost about half): built once per PUBLISH, the :class:`Publication`
    fields made it cost +35% over the message before them (scripts/bench_egress.py)."""
    expiry = properties.message_expiry_interval
    message: Message = object.__new__(Message)
    _SET_TOPIC(message, topic)
    _SET_PAYLOAD(message, payload)
    _SET_QOS(message, qos)
    _SET_RETAIN(message, retain)
    _SET_PROPS(message, properties)
    _SET_FACTS(message, 0)
    _SET_EXPIRY(message, None if expiry is None else clock() + expiry)
    _SET_ORIGIN(message, origin)
    _SET_ENCODED(message, {})
    _SET_SIZE(message, message_size(topic, payload, properties))
    return message


def will_message(will: Will, origin: str, clock: Callable[[], float]) -> Message:
    """A CONNECT's will as the message it would be: what the gates judge at CONNECT and, built
    again when the will is published, what is judged, retained and routed then (issue 21). The
    Will Delay Interval is a CONNECT property, not part of the message."""
    props = will.properties
    if props.will_delay_interval is not None:
        props = replace(props, will_delay_interval=None)
    return make_message(will.topic, will.payload, will.qos, will.retain, props, origin, clock)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message towards the client: QoS granted for it, RETAIN flag, subscription ids.
    ``exempt``: the ``Policy.epoch`` under which no delivery gate could deny it when it was
    routed (its subscription not marked ``egress``, issue 32): the queue's drain skips gates
    5-6 while that policy is in force; None (restored, retained, claims answers): judged when
    drained."""

    message: Message
    qos: int
    retain: bool
    sub_ids: tuple[int, ...] = ()
    exempt: object = field(default=None, compare=False, repr=False)


def _outgoing_constructor() -> Callable[..., Outgoing]:
    """``Outgoing(message, qos, retain, sub_ids, exempt)`` through the slots' own descriptors:
    one per QoS 1/2 delivery, where the frozen dataclass ``__init__`` (an ``object.__setattr__`` per
    field) costs about twice as much. The field check runs once, at import."""
    names = ("message", "qos", "retain", "sub_ids", "exempt")
    if tuple(f.name for f in fields(Outgoing)) != names:
        raise RuntimeError("Outgoing fields changed: update message._outgoing_constructor")
    new = object.__new__
    set_message, set_qos, set_retain, set_sub_ids, set_exempt = (
        getattr(Outgoing, name).__set__ for name in names
    )

    def make(
        message: Message,
        qos: int,
        retain: bool,
        sub_ids: tuple[int, ...],
        exempt: object = None,
    ) -> Outgoing:
        outgoing: Outgoing = new(Outgoing)
        set_message(outgoing, message)
        set_qos(outgoing, qos)
        set_retain(outgoing, retain)
        set_sub_ids(outgoing, sub_ids)
        set_exempt(outgoing, exempt)
        return outgoing

    return make


new_outgoing = _outgoing_constructor()
