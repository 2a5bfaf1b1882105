"""Retained messages (MQTT 5 §3.3.1.3): one per topic, per topic space.

:class:`RetainedStore` is the seam for persistence (issue 8).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from ..matching.mqtt_topics import topic_matches
from .message import Message


class RetainedStore(Protocol):
    def set(self, message: Message) -> None: ...

    def delete(self, topic: str) -> None: ...

    def matching(self, topic_filter: str, now: float) -> Iterator[Message]: ...

    def __len__(self) -> int: ...


class MemoryRetainedStore:
    """Retained messages in a dict; expired ones are dropped when met (MQTT 5 §3.3.2.3.3)."""

    __slots__ = ("_messages", "_separator")

    def __init__(self, separator: str = "/") -> None:
        self._messages: dict[str, Message] = {}
        self._separator = separator

    def set(self, message: Message) -> None:
        self._messages[message.topic] = message

    def delete(self, topic: str) -> None:
        self._messages.pop(topic, None)

    def matching(self, topic_filter: str, now: float) -> Iterator[Message]:
        if "+" not in topic_filter and "#" not in topic_filter:
            message = self._messages.get(topic_filter)
            candidates = [message] if message is not None else []
        else:
            sep = self._separator
            candidates = [
                m for t, m in self._messages.items() if topic_matches(topic_filter, t, sep)
            ]
        for message in candidates:
            if message.expired(now):
                self._messages.pop(message.topic, None)
                continue
            yield message

    def __len__(self) -> int:
        return len(self._messages)
