"""Token rules of seed 000: publish rules and subscribe rules (PATTERNS.md §3, D1–D9, D12, D17).

A rule is parsed once into an immutable :class:`PubRule` or :class:`SubRule`; every syntax
problem raises :class:`~edge_broker.matching.errors.RuleError` naming the rule, the segment and
the reason, at parse time and never at match time. Rule sets compile into tries in
:mod:`edge_broker.matching.token_rule_sets`.

- A publish rule describes a set of concrete channels: literal segments, alternatives
  ``(v1|v2|p*)`` and, as the last segment only, the tails ``#`` (0+ tokens) and ``>`` (1+).
- A subscribe rule describes which subscription *patterns* a client may send; it is checked
  against the pattern segment by segment (the table of §3, D1–D5), not by set containment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, NoReturn

from .errors import RuleError
from .names import (
    DEFAULT_SEPARATOR,
    check_separator,
    is_literal,
    literal_chars_hint,
    literal_regex,
)
from .pattern_tokens import PatternToken, TokenKind, pattern_tokens
from .subscription_patterns import SubscriptionPattern

MAX_SEGMENTS: Final = 32  # D8: a tail counts
MAX_SEGMENT_BYTES: Final = 128  # D9: counting "(", "|", ")"
MAX_VARIANTS: Final = 16  # D7


class SegmentKind(Enum):
    """What one (non-tail) segment of a rule is."""

    LITERAL = "literal"
    ANY_LITERAL = "?"  # subscribe rules only (D1)
    WILDCARD = "*"  # subscribe rules only (D2)
    ALTERNATIVES = "alternatives"  # (v1|v2|p*) (D3, D7)


class Tail(Enum):
    """The last segment ``#`` (zero or more further tokens) or ``>`` (one or more)."""

    ZERO_OR_MORE = "#"
    ONE_OR_MORE = ">"


@dataclass(frozen=True, slots=True)
class Alternatives:
    """The variants of ``(v1|…)`` in canonical form.

    Literals already covered by a prefix variant and prefixes covered by a shorter prefix are
    dropped (``(ab|a*|abc*)`` is ``(a*)``), so a token matches through at most one variant kind
    and equal sets compare equal: tries share their edges.
    """

    literals: frozenset[str]
    prefixes: tuple[str, ...]  # sorted, none a prefix of another

    @staticmethod
    def of(literals: Sequence[str], prefixes: Sequence[str]) -> Alternatives:
        kept: list[str] = []
        for prefix in sorted(set(prefixes), key=lambda p: (len(p), p)):
            if not any(prefix.startswith(shorter) for shorter in kept):
                kept.append(prefix)
        covered = frozenset(lit for lit in literals if not any(lit.startswith(p) for p in kept))
        return Alternatives(covered, tuple(sorted(kept)))

    def matches(self, token: str) -> bool:
        """A concrete token matches a literal variant or starts with a prefix variant."""
        return token in self.literals or any(token.startswith(p) for p in self.prefixes)

    def admits_prefix(self, prefix: str) -> bool:
        """D3: a subscription token ``p*`` is accepted only under a variant ``q*`` with p ⊒ q."""
        return any(prefix.startswith(q) for q in self.prefixes)


@dataclass(frozen=True, slots=True)
class Segment:
    """One non-tail segment: ``kind`` and, per kind, ``literal`` or ``alternatives``."""

    kind: SegmentKind
    text: str
    literal: str = ""
    alternatives: Alternatives | None = None

    def matches_channel_token(self, token: str) -> bool:
        """Publish matching: does a concrete channel token satisfy this segment?"""
        if self.kind is SegmentKind.LITERAL:
            return token == self.literal
        if self.kind is SegmentKind.ALTERNATIVES:
            assert self.alternatives is not None
            return self.alternatives.matches(token)
        return True  # "?" and "*" (subscribe rules) cover any single token

    def accepts(self, token: PatternToken) -> bool:
        """Subscribe acceptance of one subscription token (the table of §3, D1–D3)."""
        kind = token.kind
        if self.kind is SegmentKind.LITERAL:
            return kind is TokenKind.LITERAL and token.text == self.literal
        if self.kind is SegmentKind.ANY_LITERAL:
            return kind is TokenKind.LITERAL
        if self.kind is SegmentKind.WILDCARD:
            return kind in (TokenKind.LITERAL, TokenKind.STAR, TokenKind.PREFIX_STAR)
        assert self.alternatives is not None
        if kind is TokenKind.LITERAL:
            return self.alternatives.matches(token.text)
        if kind is TokenKind.PREFIX_STAR:
            return self.alternatives.admits_prefix(token.text)
        return False


@dataclass(frozen=True, slots=True)
class PubRule:
    """A publish rule (``allow_channels_pub``): the set of concrete channels it allows."""

    text: str
    separator: str
    segments: tuple[Segment, ...]
    tail: Tail | None

    @staticmethod
    def parse(text: str, separator: str = DEFAULT_SEPARATOR) -> PubRule:
        segments, tail = _parse_rule(text, separator, subscribe=False)
        return PubRule(text, separator, segments, tail)

    def matches(self, channel: str) -> bool:
        """True when the concrete ``channel`` is in this rule's set (seed 000 "Matching")."""
        return _rule_matches_tokens(self.segments, self.tail, channel.split(self.separator))

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, slots=True)
class SubRule:
    """A subscribe rule (``allow_channels_sub``): which subscription patterns may be sent."""

    text: str
    separator: str
    segments: tuple[Segment, ...]
    tail: Tail | None

    @staticmethod
    def parse(text: str, separator: str = DEFAULT_SEPARATOR) -> SubRule:
        segments, tail = _parse_rule(text, separator, subscribe=True)
        return SubRule(text, separator, segments, tail)

    def accepts(self, pattern: str | SubscriptionPattern | Sequence[PatternToken]) -> bool:
        """Segment-wise acceptance of a subscription pattern (PATTERNS.md §3, D1–D5).

        ``pattern`` is the text the client sent (validated per §2, :class:`RuleError` if
        invalid), a parsed :class:`SubscriptionPattern` or its tokens.
        """
        return accepts_tokens(
            self.segments, self.tail, subscription_tokens(pattern, self.separator)
        )

    def matches(self, channel: str) -> bool:
        """True when ``channel`` is in the rule's channel set (``?``/``*`` = any one token).

        Not used for decisions (subscribe rules judge patterns); it states what the rule
        covers, for the soundness property and ``explain``.
        """
        return _rule_matches_tokens(self.segments, self.tail, channel.split(self.separator))

    def __str__(self) -> str:
        return self.text


def subscription_tokens(
    pattern: str | SubscriptionPattern | Sequence[PatternToken], separator: str
) -> Sequence[PatternToken]:
    """The §2 tokens of a subscription pattern given as text, parsed pattern or tokens."""
    if isinstance(pattern, str):
        return pattern_tokens(pattern, separator)
    if isinstance(pattern, SubscriptionPattern):
        if pattern.separator != separator:
            raise ValueError(
                f"pattern {pattern.text!r} was parsed with separator {pattern.separator!r}, "
                f"the rules use {separator!r}"
            )
        return pattern.body if pattern.tail is None else (*pattern.body, pattern.tail)
    return pattern


def accepts_tokens(
    segments: Sequence[Segment], tail: Tail | None, tokens: Sequence[PatternToken]
) -> bool:
    """The §3 acceptance table for one rule over parsed subscription tokens (D1–D5)."""
    n, m = len(tokens), len(segments)
    if n < m:  # D5: shorter is rejected unless only a '#' tail is left (handled at n == m)
        return False
    for segment, token in zip(segments, tokens, strict=False):
        if not segment.accepts(token):
            return False
    if n == m:
        return tail is not Tail.ONE_OR_MORE  # D4: '>' needs at least one further token
    if tail is None:
        return False  # D5: longer than a tail-less rule
    if tail is Tail.ONE_OR_MORE:
        # D4: the tail must require a channel token: exactly '#' may match none.
        return not (n == m + 1 and tokens[m].kind is TokenKind.HASH)
    return True  # '#': any valid tokens (already validated as a pattern, D4)


def _rule_matches_tokens(
    segments: Sequence[Segment], tail: Tail | None, tokens: Sequence[str]
) -> bool:
    n, m = len(tokens), len(segments)
    if n < m:
        return False
    for segment, token in zip(segments, tokens, strict=False):
        if not segment.matches_channel_token(token):
            return False
    if n == m:
        return tail is not Tail.ONE_OR_MORE
    return tail is not None


# ---------------------------------------------------------------------------------------------
# grammar


def _parse_rule(
    text: str, separator: str, *, subscribe: bool
) -> tuple[tuple[Segment, ...], Tail | None]:
    check_separator(separator)
    kind = "subscribe" if subscribe else "publish"
    if not isinstance(text, str):
        raise RuleError(repr(text), "", f"a {kind} rule must be a string")
    if text == "":
        raise RuleError(text, "", f"a {kind} rule must not be empty")
    if "(" in text or ")" in text:
        _check_parentheses(text, separator)
    raw = text.split(separator)
    if len(raw) > MAX_SEGMENTS:
        raise RuleError(
            text,
            "",
            f"rule has {len(raw)} segments; at most {MAX_SEGMENTS} are allowed "
            "(a tail counts; split it into shorter rules)",
        )
    segments: list[Segment] = []
    tail: Tail | None = None
    last = len(raw) - 1
    literal = literal_regex(separator).fullmatch
    for position, seg in enumerate(raw):
        if len(seg) <= MAX_SEGMENT_BYTES and literal(seg) is not None:  # the common case
            segments.append(Segment(SegmentKind.LITERAL, seg, seg))
            continue
        if seg == "":
            raise RuleError(
                text,
                "",
                f"empty segment at position {position + 1}; remove the extra {separator!r}",
            )
        size = len(seg.encode("utf-8"))
        if size > MAX_SEGMENT_BYTES:
            raise RuleError(
                text,
                seg,
                f"segment is {size} bytes; at most {MAX_SEGMENT_BYTES} are allowed "
                "(counting '(', '|', ')')",
            )
        if seg in ("#", ">"):
            if position != last:
                raise RuleError(text, seg, f"{seg!r} must be the last segment")
            tail = Tail(seg)
            continue
        segments.append(_parse_segment(text, seg, separator, subscribe=subscribe))
    return tuple(segments), tail


def _check_parentheses(text: str, separator: str) -> None:
    """Parentheses balance, do not nest and hold no separator (§3 "Alternatives")."""
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "(":
            if depth:
                raise RuleError(
                    text, _segment_at(text, i, separator), "nested parentheses are not allowed"
                )
            depth, start = 1, i
        elif char == ")":
            if not depth:
                raise RuleError(text, _segment_at(text, i, separator), "')' without a matching '('")
            depth = 0
        elif char == separator and depth:
            if text.find(")", i) < 0:
                raise RuleError(text, text[start:i], "'(' without a matching ')'")
            group = _group(text, start)
            raise RuleError(
                text,
                group,
                f"alternatives {group!r} contain the separator {separator!r}; alternatives "
                "choose one segment: use two rules instead",
            )
    if depth:
        raise RuleError(text, text[start:], "'(' without a matching ')'")


def _group(text: str, start: int) -> str:
    end = text.find(")", start)
    return text[start:] if end < 0 else text[start : end + 1]


def _segment_at(text: str, index: int, separator: str) -> str:
    begin = text.rfind(separator, 0, index) + 1
    end = text.find(separator, index)
    return text[begin:] if end < 0 else text[begin:end]


def _parse_segment(rule: str, seg: str, separator: str, *, subscribe: bool) -> Segment:
    if is_literal(seg, separator):
        return Segment(SegmentKind.LITERAL, seg, literal=seg)
    if seg == "?" or seg == "*":
        if not subscribe:
            return _fail(
                rule, seg, f"{seg!r} is not allowed in publish rules (only in subscribe rules)"
            )
        kind = SegmentKind.ANY_LITERAL if seg == "?" else SegmentKind.WILDCARD
        return Segment(kind, seg)
    if "(" in seg or ")" in seg:
        if not (seg.startswith("(") and seg.endswith(")")):
            return _fail(
                rule,
                seg,
                "text around the parentheses; alternatives must be a whole segment such as '(a|b)'",
            )
        return Segment(
            SegmentKind.ALTERNATIVES, seg, alternatives=_parse_alternatives(rule, seg, separator)
        )
    if "|" in seg:
        return _fail(rule, seg, f"'|' outside parentheses; write '({seg})'")
    if seg.endswith("*") and is_literal(seg[:-1], separator):
        return _fail(
            rule,
            seg,
            f"a prefix is allowed only as a variant of alternatives; write '({seg})' (D6)",
        )
    return _fail(rule, seg, _bad_characters(seg, separator, subscribe=subscribe))


def _parse_alternatives(rule: str, seg: str, separator: str) -> Alternatives:
    variants = seg[1:-1].split("|")
    if len(variants) > MAX_VARIANTS:
        _fail(
            rule,
            seg,
            f"{len(variants)} alternatives; at most {MAX_VARIANTS} are allowed (split the rule)",
        )
    literals: list[str] = []
    prefixes: list[str] = []
    for variant in variants:
        if variant == "":
            _fail(
                rule,
                seg,
                "empty alternative; every variant between '(', '|' and ')' must "
                "be a literal or a prefix like 'b*'",
            )
        elif is_literal(variant, separator):
            literals.append(variant)
        elif variant.endswith("*") and is_literal(variant[:-1], separator):
            prefixes.append(variant[:-1])
        elif variant == "*":
            _fail(
                rule,
                seg,
                "'*' alone is not a variant; a prefix needs a literal before '*' (like 'b*')",
            )
        elif any(c in variant for c in "?#>"):
            _fail(
                rule,
                seg,
                f"variant {variant!r}: '?', '#' and '>' are not allowed inside alternatives",
            )
        elif "*" in variant:
            _fail(rule, seg, f"variant {variant!r}: '*' may only end a prefix (like 'b*')")
        else:
            _fail(
                rule,
                seg,
                f"variant {variant!r}: " + _bad_characters(variant, separator, subscribe=False),
            )
    return Alternatives.of(literals, prefixes)


def _bad_characters(seg: str, separator: str, *, subscribe: bool) -> str:
    for char in seg:
        if char in "#>":
            return f"{char!r} is allowed only as a whole last segment"
        if char == "?" or char == "*":
            where = "a whole segment" if subscribe else "a prefix variant inside alternatives"
            if not subscribe and char == "?":
                return "'?' is not allowed in publish rules (only in subscribe rules)"
            return f"{char!r} is allowed only as {where}"
        if not is_literal(char, separator):
            return f"{char!r} is not allowed; use {literal_chars_hint(separator)}"
    return f"not a valid segment; use {literal_chars_hint(separator)}"


def _fail(rule: str, seg: str, reason: str) -> NoReturn:
    raise RuleError(rule, seg, reason)
