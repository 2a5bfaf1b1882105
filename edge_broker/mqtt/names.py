"""Topic names, topic filters and UTF-8 payloads (MQTT 5 §4.7, §4.8.2, §3.3.2.3.2; 3.1.1 §4.7).

These checks return an error text instead of raising: whether a bad filter closes the
connection (3.x) or earns a per-filter SUBACK 0x8F (MQTT 5) is the broker's decision.
"""

from __future__ import annotations

SHARE_PREFIX = "$share/"
MAX_STRING_BYTES = 65_535


def validate_topic_name(name: str) -> str | None:
    """Why ``name`` cannot be a PUBLISH topic name, or ``None`` if it can (MQTT 5 §4.7.3).

    An empty name is rejected here; the codec itself accepts it only in MQTT 5 with a Topic
    Alias (§3.3.2.1).
    """
    if not name:
        return "a topic name must be at least one character long"
    if "+" in name or "#" in name:
        return f"topic name {name!r} contains a wildcard ('+' or '#'); publish to a concrete topic"
    if "\x00" in name:
        return f"topic name {name!r} contains U+0000"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES:
        return "topic name is longer than 65535 bytes of UTF-8"
    return None


def validate_topic_filter(topic_filter: str) -> str | None:
    """Why ``topic_filter`` is not a valid topic filter, or ``None`` (MQTT 5 §4.7.1, §4.8.2).

    ``#`` must be alone in the last level, ``+`` alone in its level, and a shared subscription
    ``$share/<group>/<filter>`` needs a group without ``+``, ``#`` or ``/`` and a non-empty filter.
    """
    if not topic_filter:
        return "a topic filter must be at least one character long"
    if "\x00" in topic_filter:
        return f"topic filter {topic_filter!r} contains U+0000"
    if len(topic_filter.encode("utf-8", "surrogatepass")) > MAX_STRING_BYTES:
        return "topic filter is longer than 65535 bytes of UTF-8"
    shared = topic_filter.startswith(SHARE_PREFIX)
    if shared:
        rest = topic_filter[len(SHARE_PREFIX) :]
        group, slash, inner = rest.partition("/")
        if not group:
            return f"shared subscription {topic_filter!r} has an empty share name"
        if "+" in group or "#" in group:
            return f"share name {group!r} in {topic_filter!r} must not contain '+' or '#'"
        if not slash or not inner:
            return (
                f"shared subscription {topic_filter!r} has no topic filter; "
                "write $share/<group>/<filter>"
            )
        return _filter_levels_error(inner, topic_filter)
    return _filter_levels_error(topic_filter, topic_filter)


def _filter_levels_error(levels: str, whole: str) -> str | None:
    if "+" not in levels and "#" not in levels:
        return None
    parts = levels.split("/")
    last = len(parts) - 1
    for index, level in enumerate(parts):
        if "#" in level:
            if level != "#":
                return f"in topic filter {whole!r}, '#' must occupy a whole level"
            if index != last:
                return f"in topic filter {whole!r}, '#' must be the last level"
        if "+" in level and level != "+":
            return f"in topic filter {whole!r}, '+' must occupy a whole level"
    return None


def parse_shared_filter(topic_filter: str) -> tuple[str, str] | None:
    """``(group, filter)`` of a valid ``$share/<group>/<filter>``, else ``None`` (MQTT 5 §4.8.2)."""
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    group, slash, inner = topic_filter[len(SHARE_PREFIX) :].partition("/")
    if not group or not slash or not inner:
        return None
    return group, inner


def payload_is_valid_utf8(payload: bytes) -> bool:
    """True if ``payload`` is well-formed UTF-8 (Payload Format Indicator 1, MQTT 5 §3.3.2.3.2).

    Python's strict decoder rejects overlong forms, encoded surrogates and code points beyond
    U+10FFFF, which is what the Unicode definition of well-formed UTF-8 requires.
    """
    try:
        payload.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
