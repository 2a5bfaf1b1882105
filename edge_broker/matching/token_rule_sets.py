"""Sets of token rules compiled into tries (PATTERNS.md "Matching structures", §3).

:class:`PubRuleSet` answers "may this concrete channel be published to?" and
:class:`SubRuleSet` "may this subscription pattern be sent?", each with the text of the deciding
rule (the first in the given order, for explain and audit) or ``None``.

The trie is keyed by rule segment. Literal segments are dict edges; alternatives are edges of
their own, keyed by their canonical variant set (rules sharing ``(eu|us)`` share the edge) and
indexed by literal variant and by prefix variant so that a token finds its candidate edges with
one dict lookup per distinct prefix length instead of a scan; ``?`` and ``*`` (subscribe rules)
are single edges; ``#`` and ``>`` tails are markers on the node they end at. A decision walks
one path per matching edge, so it costs O(depth) for any number of rules, and each node knows
the smallest rule index below it, so branches that cannot beat the best rule found are skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from .names import DEFAULT_SEPARATOR, check_separator
from .pattern_tokens import PatternToken, TokenKind
from .subscription_patterns import SubscriptionPattern
from .token_rules import (
    Alternatives,
    PubRule,
    SegmentKind,
    SubRule,
    Tail,
    subscription_tokens,
)

_NONE: Final = 1 << 62  # "no rule": larger than any rule index


class _Node:
    """A trie node; mutable only while its rule set is being built."""

    __slots__ = (
        "literal",
        "alternatives",
        "alt_by_literal",
        "alt_by_prefix",
        "prefix_lengths",
        "any_literal",
        "wildcard",
        "end",
        "tail_zero",
        "tail_one",
        "best",
    )

    alt_by_literal: dict[str, list[_Node]]
    alt_by_prefix: dict[str, list[_Node]]
    prefix_lengths: tuple[int, ...]

    def __init__(self) -> None:
        # Most nodes are leaves or have literal children only: the alternatives maps are
        # created on first use (memory and build time for 100k rules).
        self.literal: dict[str, _Node] = {}
        self.alternatives: dict[Alternatives, _Node] | None = None
        # alt_by_literal, alt_by_prefix and prefix_lengths are set by seal() when
        # alternatives is not None, and only read then.
        self.any_literal: _Node | None = None  # "?"
        self.wildcard: _Node | None = None  # "*"
        self.end = _NONE  # smallest index of a rule ending here without a tail
        self.tail_zero = _NONE  # ... ending here with '#'
        self.tail_one = _NONE  # ... ending here with '>'
        self.best = _NONE  # smallest rule index in this subtree

    def child(self, kind: SegmentKind, literal: str, alternatives: Alternatives | None) -> _Node:
        if kind is SegmentKind.LITERAL:
            node = self.literal.get(literal)
            if node is None:
                node = self.literal[literal] = _Node()
            return node
        if kind is SegmentKind.ALTERNATIVES:
            assert alternatives is not None
            if self.alternatives is None:
                self.alternatives = {}
            node = self.alternatives.get(alternatives)
            if node is None:
                node = self.alternatives[alternatives] = _Node()
            return node
        if kind is SegmentKind.ANY_LITERAL:
            if self.any_literal is None:
                self.any_literal = _Node()
            return self.any_literal
        if self.wildcard is None:
            self.wildcard = _Node()
        return self.wildcard

    def seal(self) -> None:
        """Build the alternatives indexes of this subtree once every rule is in."""
        if self.alternatives is not None:
            self._index_alternatives(self.alternatives)
        for node in self._children():
            node.seal()

    def _index_alternatives(self, edges: dict[Alternatives, _Node]) -> None:
        self.alt_by_literal, self.alt_by_prefix = {}, {}
        lengths: set[int] = set()
        for alternatives, node in edges.items():
            for literal in alternatives.literals:
                self.alt_by_literal.setdefault(literal, []).append(node)
            for prefix in alternatives.prefixes:
                self.alt_by_prefix.setdefault(prefix, []).append(node)
                lengths.add(len(prefix))
        self.prefix_lengths = tuple(sorted(lengths))

    def _children(self) -> Iterable[_Node]:
        yield from self.literal.values()
        if self.alternatives is not None:
            yield from self.alternatives.values()
        if self.any_literal is not None:
            yield self.any_literal
        if self.wildcard is not None:
            yield self.wildcard


def _insert(root: _Node, rule: PubRule | SubRule, index: int) -> None:
    node = root
    node.best = min(node.best, index)
    for segment in rule.segments:
        node = node.child(segment.kind, segment.literal, segment.alternatives)
        node.best = min(node.best, index)
    if rule.tail is None:
        node.end = min(node.end, index)
    elif rule.tail is Tail.ZERO_OR_MORE:
        node.tail_zero = min(node.tail_zero, index)
    else:
        node.tail_one = min(node.tail_one, index)


def _alt_children(node: _Node, token: str, *, literal: bool) -> list[_Node]:
    """Alternatives edges admitting ``token``: as a literal, or (``literal=False``) as ``p*``."""
    found: list[_Node] = []
    if literal:
        found.extend(node.alt_by_literal.get(token, ()))
    size = len(token)
    for length in node.prefix_lengths:
        if length > size:
            break
        found.extend(node.alt_by_prefix.get(token[:length], ()))
    return found


def _walk_channel(node: _Node, tokens: Sequence[str], i: int, best: int) -> int:
    """Smallest index of a publish rule (below ``best``) whose set contains ``tokens[i:]``.

    Alternatives edges recurse; the literal edge is followed in the loop, so a path of
    literal segments costs one call.
    """
    n = len(tokens)
    while True:
        if node.tail_zero < best:
            best = node.tail_zero
        if i == n:
            return node.end if node.end < best else best
        if node.tail_one < best:
            best = node.tail_one
        token = tokens[i]
        i += 1
        if node.alternatives is not None:
            for alt in _alt_children(node, token, literal=True):
                if alt.best < best:
                    best = _walk_channel(alt, tokens, i, best)
        child = node.literal.get(token)
        if child is None or child.best >= best:
            return best
        node = child


def _walk_pattern(node: _Node, tokens: Sequence[PatternToken], i: int, best: int) -> int:
    """Smallest index of a subscribe rule (below ``best``) accepting ``tokens[i:]`` (§3).

    Every candidate edge but the last recurses; the last is followed in the loop.
    """
    n = len(tokens)
    while True:
        if node.tail_zero < best:
            best = node.tail_zero  # D4: '#' accepts any valid rest, including none
        if i == n:
            return node.end if node.end < best else best  # D5
        token = tokens[i]
        kind = token.kind
        if node.tail_one < best and not (i == n - 1 and kind is TokenKind.HASH):
            best = node.tail_one  # D4: '>' needs a rest that requires a channel token
        i += 1
        if kind is TokenKind.LITERAL:
            candidates: list[_Node | None] = [
                node.any_literal,  # D1
                node.wildcard,  # D2
                node.literal.get(token.text),
            ]
            if node.alternatives is not None:
                candidates.extend(_alt_children(node, token.text, literal=True))
        elif kind is TokenKind.STAR:
            candidates = [node.wildcard]  # D2
        elif kind is TokenKind.PREFIX_STAR:
            candidates = [node.wildcard]  # D2
            if node.alternatives is not None:
                candidates.extend(_alt_children(node, token.text, literal=False))  # D3
        else:
            return best  # tail tokens are accepted only by rule tails
        follow: _Node | None = None
        for child in candidates:
            if child is not None and child.best < best:
                if follow is not None:
                    best = _walk_pattern(follow, tokens, i, best)
                follow = child
        if follow is None or follow.best >= best:
            return best
        node = follow


class PubRuleSet:
    """Publish rules compiled into a trie; :meth:`allowed` costs O(channel depth)."""

    __slots__ = ("separator", "rules", "_root")

    def __init__(self, rules: Iterable[PubRule | str], separator: str = DEFAULT_SEPARATOR) -> None:
        self.separator = check_separator(separator)
        self.rules: tuple[PubRule, ...] = tuple(
            r if isinstance(r, PubRule) else PubRule.parse(r, separator) for r in rules
        )
        for rule in self.rules:
            if rule.separator != separator:
                raise ValueError(
                    f"rule {rule.text!r} was parsed with separator {rule.separator!r}, "
                    f"the set uses {separator!r}"
                )
        self._root = _Node()
        for index, rule in enumerate(self.rules):
            _insert(self._root, rule, index)
        self._root.seal()

    def allowed(self, channel: str) -> str | None:
        """The text of the first rule whose set contains ``channel``, or ``None``.

        ``channel`` must already be a valid channel (:func:`~edge_broker.matching.names.
        validate_channel`); this is the hot path and does not validate.
        """
        index = _walk_channel(self._root, channel.split(self.separator), 0, _NONE)
        return None if index == _NONE else self.rules[index].text

    def __len__(self) -> int:
        return len(self.rules)


class SubRuleSet:
    """Subscribe rules compiled into a trie; :meth:`allowed` costs O(pattern depth)."""

    __slots__ = ("separator", "rules", "_root")

    def __init__(self, rules: Iterable[SubRule | str], separator: str = DEFAULT_SEPARATOR) -> None:
        self.separator = check_separator(separator)
        self.rules: tuple[SubRule, ...] = tuple(
            r if isinstance(r, SubRule) else SubRule.parse(r, separator) for r in rules
        )
        for rule in self.rules:
            if rule.separator != separator:
                raise ValueError(
                    f"rule {rule.text!r} was parsed with separator {rule.separator!r}, "
                    f"the set uses {separator!r}"
                )
        self._root = _Node()
        for index, rule in enumerate(self.rules):
            _insert(self._root, rule, index)
        self._root.seal()

    def allowed(self, pattern: str | SubscriptionPattern | Sequence[PatternToken]) -> str | None:
        """The text of the first rule accepting the subscription ``pattern``, or ``None``.

        ``pattern`` is the text the client sent, validated per §2 first (:class:`RuleError`
        when invalid: a syntax error, not a denial), or an already parsed
        :class:`SubscriptionPattern` or token sequence.
        """
        tokens = subscription_tokens(pattern, self.separator)
        index = _walk_pattern(self._root, tokens, 0, _NONE)
        return None if index == _NONE else self.rules[index].text

    def __len__(self) -> int:
        return len(self.rules)
