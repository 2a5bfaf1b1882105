"""A published message as every gate judges it (issue 21 item 3): built once per PUBLISH.

The broker resolves the topic (a Topic Alias is gone, MQTT 5 §3.3.2.3.4), strips the per-hop
properties and computes the facts the gates ask about, once each: the site ACL's message kind
(AUTHZ.md §2 mapping table), whether the topic is reserved (gate 2 and routing) and whether it
is in SMOKER's ``restricted/`` area (the claims gate). The same value is judged at ingress
(``PolicyGate.check_publish``), routed, retained and judged again per delivery where a delivery
can be denied; the broker's own message (``broker/message.py``) extends it with what routing and
sending need. A will is judged as the same value, built from the CONNECT's will when it is
checked and again when it is published.

No import of the codec's packet classes (issue 21 item 5): ``properties`` is anything with the
three MQTT 5 properties the kind reads (the codec's ``Properties`` is one), and a SUBSCRIBE
reaches the gates as a :class:`SubscribeFilter`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..matching.reserved_topics import RESTRICTED_PREFIX

if TYPE_CHECKING:
    from ..matching.reserved_topics import ReservedTopics

# a frozen dataclass's own setattr, bound once: the facts are stored on the per-PUBLISH path
_set = object.__setattr__

# The ACL message kinds a PUBLISH can be (AUTHZ.md §2 table), as indices: the gates keep one
# decision cache per kind, and an int indexes them faster than an enum member hashes.
PUT, DELETE, QUERY, REPLY = range(4)


class UserProperties(Protocol):
    """What the site ACL reads of a SUBSCRIBE's properties (``queryable=true``)."""

    @property
    def user_properties(self) -> tuple[tuple[str, str], ...]: ...


class PublishProperties(UserProperties, Protocol):
    """What the gates read of a PUBLISH's properties (the codec's ``Properties`` has them)."""

    @property
    def response_topic(self) -> str | None: ...

    @property
    def correlation_data(self) -> bytes | None: ...


@dataclass(frozen=True, slots=True)
class NoPublishProperties:
    """A PUBLISH without properties, as far as the gates read them (the broker always passes
    the message's own, the codec's ``Properties``)."""

    response_topic: None = None
    correlation_data: None = None
    user_properties: tuple[tuple[str, str], ...] = ()


NO_PUBLISH_PROPERTIES = NoPublishProperties()


class PublishedMessage(Protocol):
    """What :func:`message_kind` and the site ACL's mapping read of a message: a
    :class:`Publication`, and the codec's PUBLISH or will as well."""

    @property
    def topic(self) -> str: ...

    @property
    def payload(self) -> bytes: ...

    @property
    def retain(self) -> bool: ...

    @property
    def properties(self) -> PublishProperties: ...


def message_kind(retain: bool, payload: bytes, properties: PublishProperties) -> int:
    """AUTHZ.md §2 in its order: a retained empty payload is a ``delete``, a Response Topic a
    ``query``, Correlation Data a ``reply``, anything else a ``put``."""
    if retain and not payload:
        return DELETE
    if properties.response_topic is not None:
        return QUERY
    if properties.correlation_data is not None:
        return REPLY
    return PUT


@dataclass(frozen=True, slots=True)
class Publication:
    """A PUBLISH (or a will, as it will be published) with its topic resolved and its per-hop
    properties removed. ``kind`` (:func:`message_kind`) is computed at most once per message,
    when a gate first asks (the ingress check), and kept for every delivery; a broker without
    the site ACL never computes it."""

    topic: str
    payload: bytes
    qos: int
    retain: bool
    properties: PublishProperties
    # The facts, each computed when first asked, packed in one int: a frozen dataclass's
    # __init__ pays one object.__setattr__ per field, which a field per fact made +3% CPU on a
    # 1→1 QoS 0 message (scripts/bench_egress.py). 0: nothing computed yet; bits 0-2 the ACL
    # kind + 1, bits 3-4 the reserved class + 1, bits 5-6 restricted + 1. (An unset slot read
    # through try/except cost an exception per message: +6% with the site ACL.)
    _facts: int = field(default=0, init=False, compare=False, repr=False)

    @property
    def kind(self) -> int:
        facts = self._facts
        kind = facts & 7
        if kind:
            return kind - 1
        kind = message_kind(self.retain, self.payload, self.properties)
        _set(self, "_facts", facts | (kind + 1))
        return kind

    def reservation(self, topics: ReservedTopics) -> int:
        """``topics.classify(self.topic)``, asked by gate 2 at ingress and by routing: the test
        runs once per message (the broker has one separator, so one ``ReservedTopics``)."""
        facts = self._facts
        reserved = (facts >> 3) & 3
        if reserved:
            return reserved - 1
        reserved = topics.classify(self.topic)
        _set(self, "_facts", facts | ((reserved + 1) << 3))
        return reserved

    @property
    def restricted(self) -> bool:
        """In SMOKER's ``restricted/`` area (SMOKER.md): what the claims gate asks at ingress
        and for every checked delivery."""
        facts = self._facts
        known = (facts >> 5) & 3
        if known:
            return known == 2
        restricted = self.topic.startswith(RESTRICTED_PREFIX)
        _set(self, "_facts", facts | ((2 if restricted else 1) << 5))
        return restricted


@dataclass(frozen=True, slots=True)
class SubscribeFilter:
    """One filter of a SUBSCRIBE as the gates judge it: the filter as sent (``$share/<group>/``
    included) and the subscription options the authorizers read (MQTT 5 §3.8.3.1). The broker
    builds it from the codec's subscription, so no gate depends on the packet classes."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
