"""Topic aliases of one connection, both ways (MQTT 5 §3.3.2.3.4): the client's aliases
resolved on the way in, ours assigned on the way out. Connection state with no socket and no
clock; the connection's ``ConnectionEngine`` holds one of each."""

from __future__ import annotations

from ..mqtt.errors import ProtocolError
from ..mqtt.reason_codes import ReasonCode


class InboundAliases:
    """The aliases a client sets in its PUBLISH packets, up to the Topic Alias Maximum we
    announced in CONNACK (``broker.topic_alias_maximum``). Bounded: at most ``maximum``
    entries, each a topic within the packet-size limit."""

    __slots__ = ("maximum", "_topics")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        # made by the first alias set: most clients (every MQTT 3.x one) never set any
        self._topics: dict[int, str] | None = None

    def resolve(self, alias: int, topic: str) -> str:
        """The topic of a PUBLISH carrying ``alias``: a non-empty ``topic`` (re)sets the alias,
        an empty one uses it. Raises ``ProtocolError`` 0x94 for an alias above the maximum (or
        0, which the codec already refuses) and 0x82 for an empty topic with an unset alias."""
        if alias > self.maximum:
            raise ProtocolError(
                ReasonCode.TOPIC_ALIAS_INVALID,
                f"topic alias {alias} exceeds the maximum {self.maximum}",
            )
        topics = self._topics
        if topic:
            if topics is None:
                topics = self._topics = {}
            topics[alias] = topic
            return topic
        known = None if topics is None else topics.get(alias)
        if known is None:
            raise ProtocolError(ReasonCode.PROTOCOL_ERROR, f"topic alias {alias} is not set")
        return known

    def __len__(self) -> int:
        return 0 if self._topics is None else len(self._topics)


class OutboundAliases:
    """The aliases we give topics sent to the client, up to the Topic Alias Maximum in its
    CONNECT. First come, first served, never reassigned: a topic keeps its alias for the life
    of the connection, and topics beyond the maximum are always sent in full."""

    __slots__ = ("maximum", "_aliases")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self._aliases: dict[str, int] = {}

    def assign(self, topic: str) -> tuple[int, bool]:
        """``(alias, send_topic)`` for a PUBLISH to ``topic``: ``(0, True)`` without an alias,
        ``(n, True)`` when ``n`` is assigned now (the client learns it from this packet),
        ``(n, False)`` when it is already known to the client (the topic is left out)."""
        aliases = self._aliases
        alias = aliases.get(topic, 0)
        if alias:
            return alias, False
        if len(aliases) < self.maximum:
            alias = aliases[topic] = len(aliases) + 1
            return alias, True
        return 0, True

    def unassign(self, topic: str) -> None:
        """Undo the assignment :meth:`assign` just made: the packet that would have told the
        client was not sent (too large for it), so the next one must carry the topic again.
        Only the newest alias is ever undone, so the numbers stay 1..n without gaps."""
        if self._aliases.get(topic) == len(self._aliases):
            del self._aliases[topic]

    def __len__(self) -> int:
        return len(self._aliases)
