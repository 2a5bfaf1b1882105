"""MQTT topic names and topic filters: validation, matching, containment, overlap.

PATTERNS.md §4 and MQTT 3.1.1 / MQTT 5 §4.7:

- Levels are separated by the separator (``/`` unless the broker is configured otherwise,
  PATTERNS.md "The separator"). Empty levels are real levels: ``a//b`` has three levels.
- ``+`` matches exactly one level (including an empty one); ``#`` matches zero or more
  levels, must be the whole last level, and so also matches the parent (``a/#`` matches ``a``).
- The ``$`` rule (§4.7.2): a filter whose first level is ``+`` or ``#`` does not match a topic
  whose first level starts with ``$``.
- ``$share/<group>/<filter>`` is a shared subscription (MQTT 5 §4.8.2): the group is not part
  of the filter.

Validation raises :class:`RuleError` (never returns an error value), so a caller that wants the
MQTT reason code maps ``RuleError`` from :func:`validate_topic_name` to 0x90 and from
:func:`validate_topic_filter` / :func:`parse_shared` to 0x8F.

Relations between filters are over the set of topics each filter matches, with the ``$`` rule
applied: :func:`filter_contains` is true when every topic matched by ``inner`` is matched by
``outer`` (so ``a/+`` does NOT contain ``a/#``: PATTERNS.md §4 "Permission containment"), and
:func:`filters_overlap` when some topic is matched by both. Both assume valid filters, and
"topic" means a valid topic name, which is never the empty string.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import RuleError

SHARE_PREFIX = "$share"
MAX_TOPIC_BYTES = 65535  # MQTT §1.5.4: a UTF-8 string is at most 65,535 bytes.

# A str of at most this many characters always fits in 65,535 UTF-8 bytes (4 bytes a char at
# most), so the common case never has to encode.
_SAFE_CHARS = MAX_TOPIC_BYTES // 4


@dataclass(frozen=True, slots=True)
class SharedFilter:
    """A shared subscription ``$share/<group>/<filter>`` split into its group and filter."""

    group: str
    filter: str


def _check_text(text: str, what: str) -> None:
    """The rules common to topic names and topic filters (MQTT §1.5.4, §4.7.3)."""
    if not text:
        raise RuleError(text, "", f"a topic {what} must be at least one character long")
    if "\x00" in text:
        raise RuleError(text, "", f"a topic {what} must not contain the null character U+0000")
    if len(text) > _SAFE_CHARS:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise RuleError(
                text, "", f"a topic {what} must be well-formed UTF-8 (lone surrogate)"
            ) from exc
        if size > MAX_TOPIC_BYTES:
            raise RuleError(
                text[:40] + "…", "", f"a topic {what} is {size} bytes; at most 65535 are allowed"
            )


def validate_topic_name(topic: str, separator: str = "/") -> None:
    """Raise :class:`RuleError` unless ``topic`` is a valid MQTT topic NAME (no wildcards).

    MQTT §4.7.3: at least one character, no ``+``/``#``, no U+0000, at most 65,535 bytes. A
    leading ``$`` is allowed here (the broker decides whether clients may publish to ``$SYS``).
    """
    _check_text(topic, "name")
    if "+" in topic or "#" in topic:
        level = next(lv for lv in topic.split(separator) if "+" in lv or "#" in lv)
        raise RuleError(
            topic,
            level,
            "wildcards '+' and '#' are only allowed in topic filters, not in the topic of a "
            "PUBLISH",
        )


def validate_topic_filter(topic_filter: str, separator: str = "/") -> None:
    """Raise :class:`RuleError` unless ``topic_filter`` is a valid MQTT topic FILTER.

    MQTT §4.7.1: ``+`` must occupy a whole level; ``#`` must occupy a whole level and be the
    last one. ``$share/…`` is not special here: see :func:`parse_shared`.
    """
    _check_text(topic_filter, "filter")
    if "+" not in topic_filter and "#" not in topic_filter:
        return
    levels = topic_filter.split(separator)
    last = len(levels) - 1
    for i, level in enumerate(levels):
        if level == "+":
            continue
        if level == "#":
            if i != last:
                raise RuleError(topic_filter, "#", "'#' must be the last segment")
            continue
        if "#" in level:
            raise RuleError(
                topic_filter,
                level,
                f"'#' must be a whole segment on its own (write '{level.replace('#', '')}"
                f"{separator}#' or remove it)",
            )
        if "+" in level:
            raise RuleError(
                topic_filter,
                level,
                "'+' must be a whole segment on its own (a prefix wildcard like 'ab+' does not "
                "exist in MQTT)",
            )


def parse_shared(topic_filter: str, separator: str = "/") -> SharedFilter | None:
    """Split a shared subscription ``$share/<group>/<filter>``; ``None`` if not shared.

    MQTT 5 §4.8.2: the group is at least one character and contains none of ``/``, ``+``,
    ``#``; the filter after it is a valid topic filter. A malformed ``$share/…`` raises
    :class:`RuleError` (reason code 0x8F), as does a filter that is exactly ``$share``'s
    prefix without a filter.
    """
    head = SHARE_PREFIX + separator
    if not topic_filter.startswith(head):
        return None
    rest = topic_filter[len(head) :]
    group, sep, inner = rest.partition(separator)
    if not sep:
        raise RuleError(
            topic_filter,
            group,
            f"a shared subscription is '$share{separator}<group>{separator}<filter>'; the filter "
            "is missing",
        )
    if not group:
        raise RuleError(topic_filter, "", "the share group name of a shared subscription is empty")
    if "+" in group or "#" in group:
        raise RuleError(
            topic_filter, group, "a share group name must not contain the wildcards '+' or '#'"
        )
    if not inner:
        raise RuleError(topic_filter, group, "the topic filter after the share group name is empty")
    try:
        validate_topic_filter(inner, separator)
    except RuleError as exc:
        raise RuleError(topic_filter, exc.segment, exc.reason) from exc
    return SharedFilter(group, inner)


def topic_matches(topic_filter: str, topic: str, separator: str = "/") -> bool:
    """True if the valid filter ``topic_filter`` matches the concrete ``topic`` (§4.7)."""
    if topic_filter == topic:
        return True
    if topic[:1] == "$" and topic_filter[:1] in ("+", "#"):
        return False
    flevels = topic_filter.split(separator)
    tlevels = topic.split(separator)
    n = len(tlevels)
    for i, f in enumerate(flevels):
        if f == "#":
            return True
        if i >= n:
            return False
        if f != "+" and f != tlevels[i]:
            return False
    return len(flevels) == n


# _EMPTY_TOPIC_NOTE: relations are over valid topic names, and a topic name is never empty.
# Splitting '' gives one empty level, which '+', '#', '/#' and '+/#' would all match; so '#'
# and '/#' as an inner filter behave like '+/#' and '/+/#', and '+' never meets '/#'. The
# property tests enumerate topics without '' to hold us to exactly this.


def _dollar_first(level: str) -> bool:
    return level[:1] == "$"


def _is_wild(level: str) -> bool:
    return level == "+" or level == "#"


def filter_contains(outer: str, inner: str, separator: str = "/") -> bool:
    """True if every topic matched by ``inner`` is matched by ``outer`` (PATTERNS.md §4).

    Level by level: ``#`` in ``outer`` contains any rest; ``+`` contains ``+`` or a literal;
    a literal contains only itself. ``a/+`` does not contain ``a/#`` (which matches ``a`` and
    ``a/b/c``), and ``#`` does not contain ``$SYS/#`` (the ``$`` rule).
    """
    o = outer.split(separator)
    i = inner.split(separator)
    if _is_wild(o[0]) and _dollar_first(i[0]):
        return False
    if i == ["#"]:
        i = ["+", "#"]  # same valid topics: no topic is empty (see _EMPTY_TOPIC_NOTE)
    elif i == ["", "#"]:
        i = ["", "+", "#"]  # '/#' matches '' and what '/+/#' matches; '' is not a topic
    ni = len(i)
    for k, ol in enumerate(o):
        if ol == "#":
            return True
        if k >= ni:
            return False
        il = i[k]
        if il == "#":
            return False
        if ol != "+" and ol != il:
            return False
    return len(o) == ni


def filters_overlap(a: str, b: str, separator: str = "/") -> bool:
    """True if some topic is matched by both filters ``a`` and ``b`` (PATTERNS.md §4).

    Symmetric. A first-level wildcard never meets a first level starting with ``$``.
    """
    x = a.split(separator)
    y = b.split(separator)
    if (x == ["+"] and y == ["", "#"]) or (y == ["+"] and x == ["", "#"]):
        return False  # their only common "topic" is '', which is not a topic name
    if (_is_wild(x[0]) and _dollar_first(y[0])) or (_is_wild(y[0]) and _dollar_first(x[0])):
        return False
    nx = len(x)
    ny = len(y)
    k = 0
    while True:
        xl = x[k] if k < nx else None
        yl = y[k] if k < ny else None
        if xl == "#" or yl == "#":
            return True
        if xl is None or yl is None:
            return xl is None and yl is None
        if xl != "+" and yl != "+" and xl != yl:
            return False
        k += 1
