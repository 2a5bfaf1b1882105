"""Topic name and filter limits (issue 16): ``[limits] max_topic_length`` (UTF-8 bytes) and
``max_topic_levels``.

MQTT allows 65,535 bytes, so 65,535 levels: ten filters of empty levels (``////…``) cost the
subscription trie 160 MB. Every topic the broker indexes (subscription and retained tries,
routing and decision caches, alias maps) is checked here first. A PUBLISH beyond them gets 0x90
Topic Name invalid (PUBACK/PUBREC for QoS 1/2, DISCONNECT for QoS 0; 3.x: the connection
closes), a filter SUBACK 0x8F Topic Filter invalid (3.1.1: 0x80), with a Reason String naming
the key.
"""

from __future__ import annotations

from ...config import LimitsConfig


def topic_limit(topic: str, limits: LimitsConfig, separator: str) -> str | None:
    """The ``[limits]`` key ``topic`` (a name or filter) exceeds, or ``None``.

    The hot path: one ``len`` and one ``count`` for a topic of up to a quarter of the length
    limit in characters (a character is at most 4 UTF-8 bytes); longer ones are encoded."""
    n = len(topic)
    max_length = limits.max_topic_length
    if n > max_length or (n * 4 > max_length and len(topic.encode()) > max_length):
        return "max_topic_length"
    if topic.count(separator) >= limits.max_topic_levels:
        return "max_topic_levels"
    return None


def topic_limit_reason(topic: str, limit: str, limits: LimitsConfig, separator: str) -> str:
    """The Reason String / log text for a :func:`topic_limit` refusal."""
    if limit == "max_topic_length":
        return (
            f"topic of {len(topic.encode())} bytes exceeds limits.max_topic_length "
            f"({limits.max_topic_length} bytes)"
        )
    return (
        f"topic of {topic.count(separator) + 1} levels exceeds limits.max_topic_levels "
        f"({limits.max_topic_levels})"
    )
