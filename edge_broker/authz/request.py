"""A published message as every gate judges it (issue 21 item 3): built once per PUBLISH.

The broker resolves the topic (a Topic Alias is gone, MQTT 5 §3.3.2.3.4), strips the per-hop
properties and computes the facts the gates ask about, once: the site ACL's message kind
(AUTHZ.md §2 mapping table). The same value is judged at ingress (``PolicyGate.check_publish``),
routed, retained and judged again per delivery where a delivery can be denied; the broker's own
message (``broker/message.py``) extends it with what routing and sending need.

No import of the codec's packet classes: ``properties`` is anything with the three MQTT 5
properties the kind reads (the codec's ``Properties`` is one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

# The ACL message kinds a PUBLISH can be (AUTHZ.md §2 table), as indices: the gates keep one
# decision cache per kind, and an int indexes them faster than an enum member hashes.
PUT, DELETE, QUERY, REPLY = range(4)


class PublishProperties(Protocol):
    """What the gates read of a PUBLISH's properties (the codec's ``Properties`` has them)."""

    @property
    def response_topic(self) -> str | None: ...

    @property
    def correlation_data(self) -> bytes | None: ...

    @property
    def user_properties(self) -> tuple[tuple[str, str], ...]: ...


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
    # -1 until first asked (an unset slot read through try/except cost an exception per
    # message: 6% of a 1→1 QoS 0 delivery with the site ACL)
    _kind: int = field(default=-1, init=False, compare=False, repr=False)

    @property
    def kind(self) -> int:
        kind = self._kind
        if kind < 0:
            kind = message_kind(self.retain, self.payload, self.properties)
            object.__setattr__(self, "_kind", kind)
        return kind
