"""Runtime subscription patterns of seed 001, compiled once and matched against channels.

PATTERNS.md §2. Tokens: an exact literal; ``*`` (exactly one token, ``+`` as an alias when the
separator is ``/``); ``p*`` (one token starting with ``p``, ``p`` itself included, D13); and as
the last token only ``>`` (one or more tokens), ``#`` (zero or more), ``p>`` (a token starting
with ``p`` then one or more) and ``p#`` (a token starting with ``p`` then zero or more). ``#`` or
``>`` alone match every channel (D16). Validation (D9, D10, D15) is the single parser in
:mod:`.pattern_tokens`, shared with the subscribe-rule acceptance of §3.

There is no ``$`` rule here: that belongs to MQTT topic filters (§4) only.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mqtt_topics import SHARE_PREFIX, SharedFilter, parse_shared
from .names import DEFAULT_SEPARATOR
from .pattern_tokens import TAIL_KINDS, PatternToken, TokenKind, pattern_tokens

# Compact per-token codes for the hot path (a tuple compare beats an Enum attribute lookup).
_LIT = 0
_ANY = 1
_PFX = 2

_STEP_CODE = {TokenKind.LITERAL: _LIT, TokenKind.STAR: _ANY, TokenKind.PREFIX_STAR: _PFX}


def is_runtime_pattern(topic_filter: str, separator: str = DEFAULT_SEPARATOR) -> bool:
    """``topic_filter`` uses a wildcard MQTT lacks (``*``, ``>``, a prefix ``p#``), so it is
    meant as a runtime pattern, not an MQTT filter. The one definition: the broker's SUBSCRIBE
    parsing, the site ACL gate and the claims gate all ask this."""
    return (
        "*" in topic_filter
        or ">" in topic_filter
        or any(token.endswith("#") and token != "#" for token in topic_filter.split(separator))
    )


@dataclass(frozen=True, slots=True)
class SubscriptionPattern:
    """A validated runtime subscription pattern (PATTERNS.md §2).

    ``body`` is every token before the tail; ``tail`` is the last token when it is ``#``,
    ``>``, ``p#`` or ``p>``, else ``None``. ``steps`` is the body as ``(code, text)`` pairs
    precomputed for :meth:`matches`.
    """

    text: str
    separator: str
    body: tuple[PatternToken, ...]
    tail: PatternToken | None
    steps: tuple[tuple[int, str], ...]

    @property
    def min_tokens(self) -> int:
        """The fewest channel tokens this pattern can match."""
        n = len(self.body)
        tail = self.tail
        if tail is None or tail.kind is TokenKind.HASH:
            return n
        if tail.kind is TokenKind.PREFIX_GT:
            return n + 2
        return n + 1

    def matches(self, channel: str) -> bool:
        """True if the concrete ``channel`` is matched by this pattern."""
        tokens = channel.split(self.separator)
        steps = self.steps
        n = len(steps)
        tail = self.tail
        have = len(tokens)
        if tail is None:
            if have != n:
                return False
        elif have < self.min_tokens:
            return False
        for (code, text), token in zip(steps, tokens, strict=False):
            if code == _LIT:
                if token != text:
                    return False
            elif code == _PFX and not token.startswith(text):
                return False
        if tail is not None and tail.kind in (TokenKind.PREFIX_HASH, TokenKind.PREFIX_GT):
            return tokens[n].startswith(tail.text)
        return True


def parse_pattern(text: str, separator: str = DEFAULT_SEPARATOR) -> SubscriptionPattern:
    """Validate ``text`` as a runtime subscription pattern; :class:`RuleError` if invalid."""
    tokens = pattern_tokens(text, separator)
    tail: PatternToken | None = None
    body = tokens
    if tokens[-1].kind in TAIL_KINDS:
        tail = tokens[-1]
        body = tokens[:-1]
    steps = tuple((_STEP_CODE[t.kind], t.text) for t in body)
    return SubscriptionPattern(text, separator, body, tail, steps)


def pattern_matches(
    pattern: SubscriptionPattern | str, channel: str, separator: str | None = None
) -> bool:
    """True if ``pattern`` matches ``channel``.

    A str pattern is parsed (and validated) first with ``separator`` (default ``/``). A
    compiled pattern carries its own separator; passing a different one is a ``ValueError``.
    """
    if isinstance(pattern, str):
        pattern = parse_pattern(pattern, separator or DEFAULT_SEPARATOR)
    elif separator is not None and separator != pattern.separator:
        raise ValueError(
            f"pattern {pattern.text!r} was compiled for separator {pattern.separator!r}, "
            f"not {separator!r}"
        )
    return pattern.matches(channel)


def runtime_pattern(topic_filter: str, separator: str) -> SubscriptionPattern | None:
    """The compiled pattern when ``topic_filter`` (without ``$share/<group>/``) uses a wildcard
    that MQTT lacks; ``None`` for a filter that means the same in MQTT. :class:`RuleError`
    when it is meant as a pattern (it contains ``*``, ``>`` or a prefix ``#``) but is invalid."""
    if not is_runtime_pattern(topic_filter, separator):
        return None
    return parse_pattern(topic_filter, separator)


def split_shared(topic_filter: str, separator: str, patterns: bool) -> SharedFilter | None:
    """:func:`~edge_broker.matching.mqtt_topics.parse_shared`, where the filter after the group
    may also be a runtime pattern when ``patterns`` (the listener allows them). The group rules
    of MQTT 5 §4.8.2 apply either way; :class:`RuleError` when malformed."""
    head = SHARE_PREFIX + separator
    if not patterns or not topic_filter.startswith(head):
        return parse_shared(topic_filter, separator)
    group, _, inner = topic_filter[len(head) :].partition(separator)
    if not inner or runtime_pattern(inner, separator) is None:
        return parse_shared(topic_filter, separator)  # the MQTT rules and their messages
    if not group or "+" in group or "#" in group:
        return parse_shared(topic_filter, separator)
    return SharedFilter(group, inner)


def subscription_pattern(
    topic_filter: str, separator: str, patterns: bool
) -> tuple[SharedFilter | None, str, SubscriptionPattern | None]:
    """A SUBSCRIBE filter as (shared part, filter without ``$share/<group>/``, runtime pattern
    or ``None``); :class:`RuleError` when it is invalid for the listener's grammar."""
    shared = split_shared(topic_filter, separator, patterns)
    inner = shared.filter if shared is not None else topic_filter
    pattern = runtime_pattern(inner, separator) if patterns else None
    return shared, inner, pattern
