"""Sets of token rules compiled into tries (PATTERNS.md "Matching structures", §3).

:class:`PubRuleSet` answers "may this concrete channel be published to?" and
:class:`SubRuleSet` "may this subscription pattern be sent?", each with the text of the deciding
rule (the first in the given order, for explain and audit) or ``None``.

The trie is keyed by rule segment. A node *is* the dict of its literal edges (a ``dict``
subclass with slots, so 100k rules cost few objects and few CPU-cache lines per level).
Alternatives are built as edges of their own, keyed by their canonical variant set (rules
sharing ``(eu|us)`` share the edge); when the set is sealed their literal variants are merged
into the literal dict and their prefix variants become a sorted tuple tested with one
``str.startswith(tuple)``. ``?`` and ``*`` (subscribe rules) are single edges; ``#`` and ``>``
tails are marks on the node they end at. A decision walks one path per matching edge, so it
costs O(depth) for any number of rules, and each node knows the smallest rule index below it,
so branches that cannot beat the best rule found are skipped. Optionally each set keeps a
bounded cache of its decisions (``cache_entries``).
"""

from __future__ import annotations

import sys
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


class _Node(dict[str, "_Node"]):
    """A trie node: the node *is* the dict of its literal edges (token -> child).

    Compact on purpose (100k rules make 100k+ nodes, touched at random): no per-node dict of
    attributes, leaves share CPython's empty key table, and the rarely used parts live behind
    one slot each, ``None`` when unused. When the set is sealed, the literal variants of
    alternatives edges are merged into the literal dict (a token then finds an alternatives
    edge with the same lookup as a literal edge); ``more`` keeps the extra targets of a token
    that leads to several edges; prefix variants become the sorted tuple ``prefixes`` (one
    ``str.startswith(tuple)`` call rejects a token) with their edges in ``prefix_targets``.
    Mutable only while its rule set is being built.
    """

    __slots__ = (
        "marks",
        "best",
        "any_literal",
        "wildcard",
        "edges",
        "more",
        "prefixes",
        "prefix_targets",
    )

    def __init__(self, best: int) -> None:
        super().__init__()
        # (end, tail_zero, tail_one): smallest index of a rule ending here without a tail,
        # with '#', with '>' (_NONE where none does); None when no rule ends here.
        self.marks: tuple[int, int, int] | None = None
        self.best = best  # smallest rule index in this subtree (rules are inserted in order)
        self.any_literal: _Node | None = None  # "?"
        self.wildcard: _Node | None = None  # "*"
        self.edges: dict[Alternatives, _Node] | None = None  # while building only
        self.more: dict[str, tuple[_Node, ...]] | None = None
        self.prefixes: tuple[str, ...] | None = None
        self.prefix_targets: tuple[tuple[_Node, ...], ...] = ()

    def child(
        self, kind: SegmentKind, literal: str, alternatives: Alternatives | None, index: int
    ) -> _Node:
        if kind is SegmentKind.LITERAL:
            node = self.get(literal)
            if node is None:
                node = self[sys.intern(literal)] = _Node(index)
            return node
        if kind is SegmentKind.ALTERNATIVES:
            assert alternatives is not None
            if self.edges is None:
                self.edges = {}
            node = self.edges.get(alternatives)
            if node is None:
                node = self.edges[alternatives] = _Node(index)
            return node
        if kind is SegmentKind.ANY_LITERAL:
            if self.any_literal is None:
                self.any_literal = _Node(index)
            return self.any_literal
        if self.wildcard is None:
            self.wildcard = _Node(index)
        return self.wildcard

    def mark(self, tail: Tail | None, index: int) -> None:
        end, zero, one = self.marks or (_NONE, _NONE, _NONE)
        if tail is None:
            end = min(end, index)
        elif tail is Tail.ZERO_OR_MORE:
            zero = min(zero, index)
        else:
            one = min(one, index)
        self.marks = (end, zero, one)

    def seal_alternatives(self) -> list[_Node]:
        """Merge the alternatives edges into the lookup structures; returns their nodes."""
        edges = self.edges
        if edges is None:
            return []
        self.edges = None
        more: dict[str, list[_Node]] = {}
        by_prefix: dict[str, list[_Node]] = {}
        for alternatives, node in edges.items():
            for literal in alternatives.literals:
                if literal in self:
                    more.setdefault(literal, []).append(node)
                else:
                    self[sys.intern(literal)] = node
            for prefix in alternatives.prefixes:
                by_prefix.setdefault(prefix, []).append(node)
        if more:
            self.more = {k: tuple(v) for k, v in more.items()}
        if by_prefix:
            self.prefixes = tuple(sorted(by_prefix))
            self.prefix_targets = tuple(tuple(by_prefix[p]) for p in self.prefixes)
        return list(edges.values())

    def prefix_children(self, text: str) -> list[_Node]:
        """Edges with a prefix variant ``q*`` such that ``text`` starts with ``q``.

        For a literal token that is "matches ``q*``"; for a subscription token ``p*`` it is
        D3's "p ⊒ q": the same test.
        """
        found: list[_Node] = []
        if self.prefixes is not None:
            for prefix, targets in zip(self.prefixes, self.prefix_targets, strict=True):
                if text.startswith(prefix):
                    found.extend(targets)
        return found


def _seal(root: _Node) -> None:
    """Merge alternatives edges once every rule is in (iterative: no recursion limit).

    The literal dict of a node must be sealed before its alternatives edges are merged into
    it, so the walk collects children before sealing.
    """
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.values())
        stack.extend(node.seal_alternatives())
        if node.any_literal is not None:
            stack.append(node.any_literal)
        if node.wildcard is not None:
            stack.append(node.wildcard)


def _build(rules: Sequence[PubRule | SubRule]) -> _Node:
    root = _Node(_NONE)
    for index, rule in enumerate(rules):
        node = root
        if index < node.best:
            node.best = index
        for segment in rule.segments:
            node = node.child(segment.kind, segment.literal, segment.alternatives, index)
        node.mark(rule.tail, index)
    _seal(root)
    return root


def _walk_channel(node: _Node, tokens: Sequence[str], i: int, best: int) -> int:
    """Smallest index of a publish rule (below ``best``) whose set contains ``tokens[i:]``.

    Extra edges (prefix variants, a token leading to several edges) recurse; the edge of the
    literal dict is followed in the loop, so a path of literal segments costs one call.
    Rules are inserted in index order, so a child's ``best`` is only worth comparing once a
    rule has matched (``best`` is not ``_NONE``).
    """
    n = len(tokens)
    while True:
        marks = node.marks
        if marks is not None:
            end, zero, one = marks
            if zero < best:
                best = zero
            if i == n:
                return end if end < best else best
            if one < best:
                best = one
        elif i == n:
            return best
        token = tokens[i]
        i += 1
        prefixes = node.prefixes
        if prefixes is not None and token.startswith(prefixes):  # rejects most tokens at once
            for alt in node.prefix_children(token):
                if alt.best < best:
                    best = _walk_channel(alt, tokens, i, best)
        if node.more is not None:
            for alt in node.more.get(token, ()):
                if alt.best < best:
                    best = _walk_channel(alt, tokens, i, best)
        child = node.get(token)
        if child is None or (best is not _NONE and child.best >= best):
            return best
        node = child


def _walk_pattern(node: _Node, tokens: Sequence[PatternToken], i: int, best: int) -> int:
    """Smallest index of a subscribe rule (below ``best``) accepting ``tokens[i:]`` (§3).

    Every candidate edge but the last recurses; the last is followed in the loop.
    """
    n = len(tokens)
    while True:
        token = tokens[i] if i < n else None
        marks = node.marks
        if marks is not None:
            end, zero, one = marks
            if zero < best:
                best = zero  # D4: '#' accepts any valid rest, including none
            if token is None:
                return end if end < best else best  # D5
            if one < best and not (i == n - 1 and token.kind is TokenKind.HASH):
                best = one  # D4: '>' needs a rest that requires a channel token
        elif token is None:
            return best
        kind = token.kind
        i += 1
        if kind is TokenKind.LITERAL:
            literal_child = node.get(token.text)  # literal edges and literal variants
            if (
                node.any_literal is None
                and node.wildcard is None
                and node.prefixes is None
                and node.more is None
            ):  # the common case: no branching
                if literal_child is None or (best is not _NONE and literal_child.best >= best):
                    return best
                node = literal_child
                continue
            candidates: list[_Node | None] = [
                node.any_literal,  # D1
                node.wildcard,  # D2
                literal_child,
            ]
            if node.more is not None:
                candidates.extend(node.more.get(token.text, ()))
            if node.prefixes is not None and token.text.startswith(node.prefixes):
                candidates.extend(node.prefix_children(token.text))
        elif kind is TokenKind.STAR:
            candidates = [node.wildcard]  # D2
        elif kind is TokenKind.PREFIX_STAR:
            candidates = [node.wildcard]  # D2
            candidates.extend(node.prefix_children(token.text))  # D3
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


class _Decisions:
    """A bounded cache of decisions of one immutable rule set: text -> rule text, ``""`` = deny.

    The rule set never changes, so its generation never moves: a new rule set (a new token or
    grant) starts with an empty cache, which is the generation bump of
    :mod:`~edge_broker.matching.decision_cache`. When full it is emptied (as that module does):
    cheap, and a repeating working set refills in a few decisions.
    """

    __slots__ = ("entries", "max_entries")

    def __init__(self, max_entries: int) -> None:
        self.entries: dict[str, str] = {}
        self.max_entries = max_entries

    def store(self, key: str, rule: str | None) -> None:
        if len(self.entries) >= self.max_entries:
            self.entries.clear()
        self.entries[key] = rule or ""


def _decisions(cache_entries: int) -> _Decisions | None:
    if not isinstance(cache_entries, int) or cache_entries < 0:
        raise ValueError(
            f"cache_entries must be an integer >= 0 (0 disables the cache), got {cache_entries!r}"
        )
    return _Decisions(cache_entries) if cache_entries else None


def _check_separators(rules: Sequence[PubRule | SubRule], separator: str) -> None:
    for rule in rules:
        if rule.separator != separator:
            raise ValueError(
                f"rule {rule.text!r} was parsed with separator {rule.separator!r}, "
                f"the set uses {separator!r}"
            )


class PubRuleSet:
    """Publish rules compiled into a trie; :meth:`allowed` costs O(channel depth).

    ``cache_entries`` > 0 keeps up to that many decisions by channel text (repeated
    decisions, a publisher's channels, then cost one dict lookup); 0 (the default) walks the
    trie every time.
    """

    __slots__ = ("separator", "rules", "_root", "_decisions")

    def __init__(
        self,
        rules: Iterable[PubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        self.separator = check_separator(separator)
        self.rules: tuple[PubRule, ...] = tuple(
            r if isinstance(r, PubRule) else PubRule.parse(r, separator) for r in rules
        )
        _check_separators(self.rules, separator)
        self._decisions = _decisions(cache_entries)
        self._root = _build(self.rules)

    def allowed(self, channel: str) -> str | None:
        """The text of the first rule whose set contains ``channel``, or ``None``.

        ``channel`` must already be a valid channel (:func:`~edge_broker.matching.names.
        validate_channel`); this is the hot path and does not validate.
        """
        decisions = self._decisions
        if decisions is not None:
            known = decisions.entries.get(channel)
            if known is not None:
                return known or None
        index = _walk_channel(self._root, channel.split(self.separator), 0, _NONE)
        rule = None if index == _NONE else self.rules[index].text
        if decisions is not None:
            decisions.store(channel, rule)
        return rule

    def __len__(self) -> int:
        return len(self.rules)


class SubRuleSet:
    """Subscribe rules compiled into a trie; :meth:`allowed` costs O(pattern depth).

    ``cache_entries`` > 0 keeps up to that many decisions by pattern text (patterns given
    parsed are not cached); 0 (the default) walks the trie every time.
    """

    __slots__ = ("separator", "rules", "_root", "_decisions")

    def __init__(
        self,
        rules: Iterable[SubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        self.separator = check_separator(separator)
        self.rules: tuple[SubRule, ...] = tuple(
            r if isinstance(r, SubRule) else SubRule.parse(r, separator) for r in rules
        )
        _check_separators(self.rules, separator)
        self._decisions = _decisions(cache_entries)
        self._root = _build(self.rules)

    def allowed(self, pattern: str | SubscriptionPattern | Sequence[PatternToken]) -> str | None:
        """The text of the first rule accepting the subscription ``pattern``, or ``None``.

        ``pattern`` is the text the client sent, validated per §2 first (:class:`RuleError`
        when invalid: a syntax error, not a denial, and never cached), or an already parsed
        :class:`SubscriptionPattern` or token sequence.
        """
        decisions = self._decisions
        key = pattern if isinstance(pattern, str) and decisions is not None else None
        if key is not None and decisions is not None:
            known = decisions.entries.get(key)
            if known is not None:
                return known or None
        tokens = subscription_tokens(pattern, self.separator)
        index = _walk_pattern(self._root, tokens, 0, _NONE)
        rule = None if index == _NONE else self.rules[index].text
        if key is not None and decisions is not None:
            decisions.store(key, rule)
        return rule

    def __len__(self) -> int:
        return len(self.rules)
