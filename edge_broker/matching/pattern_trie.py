"""Routing channels to subscribers by runtime subscription patterns (PATTERNS.md §2).

A token trie like :class:`SubscriptionTrie`, with the edge kinds of seed 001 kept apart
(PATTERNS.md "Matching structures"): exact tokens in a dict, ``*`` as one edge, ``p*`` edges in
a dict keyed by the prefix, and the tails ``#``, ``>``, ``p#``, ``p>`` stored on the node where
they start. A channel token finds its prefix edges by looking up each of its own prefixes (at
most as long as the longest prefix at that node), so the cost does not grow with the number of
prefixes. The result shape and pruning are those of :class:`SubscriptionTrie`; the counts, the
generation and the result cache are those of
:class:`~edge_broker.matching.routing_index.RoutingIndex`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from .names import DEFAULT_SEPARATOR
from .pattern_tokens import TokenKind
from .routing_index import DEFAULT_RESULT_CACHE_BYTES, DEFAULT_RESULT_CACHE_SIZE, RoutingIndex
from .subscription_patterns import SubscriptionPattern, parse_pattern

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_CACHE_SIZE = DEFAULT_RESULT_CACHE_SIZE
# Leaves share one read-only empty mapping instead of an empty dict each (memory on a Pi).
_NO_CHILDREN: Mapping[str, Any] = MappingProxyType({})


class _PrefixMap(Generic[V]):
    """Values keyed by a prefix; finds every key that is a prefix of a token.

    ``lengths`` is the sorted tuple of the distinct prefix lengths present (usually a few even
    for thousands of prefixes), so a token costs one dict lookup per such length.
    """

    __slots__ = ("items", "_length_counts", "lengths")

    def __init__(self) -> None:
        self.items: dict[str, V] = {}
        self._length_counts: dict[int, int] = {}
        self.lengths: tuple[int, ...] = ()

    def add_default(self, prefix: str, make: type[V]) -> V:
        item = self.items.get(prefix)
        if item is None:
            item = self.items[prefix] = make()
            n = len(prefix)
            count = self._length_counts.get(n, 0)
            self._length_counts[n] = count + 1
            if not count:
                self.lengths = tuple(sorted(self._length_counts))
        return item

    def discard(self, prefix: str) -> None:
        del self.items[prefix]
        n = len(prefix)
        count = self._length_counts[n] - 1
        if count:
            self._length_counts[n] = count
        else:
            del self._length_counts[n]
            self.lengths = tuple(sorted(self._length_counts))

    def prefixes_of(self, token: str) -> list[V]:
        items = self.items
        if len(items) <= 4:  # a handful of prefixes: test each rather than slice the token
            return [v for p, v in items.items() if token.startswith(p)]
        found: list[V] = []
        size = len(token)
        for n in self.lengths:
            if n > size:
                break
            v = items.get(token[:n])
            if v is not None:
                found.append(v)
        return found


class _PatternNode(Generic[K, V]):
    """One level of a seed-001 pattern trie: literal, ``*`` and prefix (``p*``) edges, and the
    subscriptions ending here or in a tail wildcard (``#``, ``>``, ``p#``, ``p>``) here."""

    __slots__ = (
        "exact",
        "star",
        "prefix",
        "subs",
        "hash_subs",
        "gt_subs",
        "prefix_hash",
        "prefix_gt",
    )

    def __init__(self) -> None:
        self.exact: Mapping[str, _PatternNode[K, V]] = _NO_CHILDREN
        self.star: _PatternNode[K, V] | None = None
        self.prefix: _PrefixMap[_PatternNode[K, V]] | None = None
        self.subs: dict[K, V] | None = None  # the pattern ends here
        self.hash_subs: dict[K, V] | None = None  # '#' starts here
        self.gt_subs: dict[K, V] | None = None  # '>' starts here
        self.prefix_hash: _PrefixMap[dict[K, V]] | None = None  # 'p#' starts here
        self.prefix_gt: _PrefixMap[dict[K, V]] | None = None  # 'p>' starts here

    def is_empty(self) -> bool:
        return (
            not self.exact
            and self.star is None
            and self.prefix is None
            and self.subs is None
            and self.hash_subs is None
            and self.gt_subs is None
            and self.prefix_hash is None
            and self.prefix_gt is None
        )


class PatternTrie(RoutingIndex[K, V]):
    """Runtime subscription patterns -> subscribers, matched against concrete channels.

    ``add(pattern, key, value)`` (a str is parsed with the trie's separator; ``RuleError`` if
    invalid) adds or replaces; ``remove(pattern, key) -> bool``; ``match(channel)`` returns one
    read-only mapping per matching pattern. The cache rules are those of :class:`RoutingIndex`.
    """

    __slots__ = ("_root",)

    def __init__(
        self,
        separator: str = DEFAULT_SEPARATOR,
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_bytes: int = DEFAULT_RESULT_CACHE_BYTES,
    ) -> None:
        if separator not in (".", "/"):
            raise ValueError(f"separator must be '.' or '/', not {separator!r}")
        super().__init__(separator, cache_size, cache_bytes)
        self._root: _PatternNode[K, V] = _PatternNode()

    @property
    def pattern_count(self) -> int:
        """Number of distinct patterns with at least one key."""
        return self._mappings

    def _compile(self, pattern: SubscriptionPattern | str) -> SubscriptionPattern:
        if isinstance(pattern, str):
            return parse_pattern(pattern, self._sep)
        if pattern.separator != self._sep:
            raise ValueError(
                f"pattern {pattern.text!r} uses separator {pattern.separator!r}; "
                f"this trie uses {self._sep!r}"
            )
        return pattern

    def add(self, pattern: SubscriptionPattern | str, key: K, value: V) -> None:
        """Subscribe ``key`` with ``value`` (replacing an earlier value for the same key)."""
        compiled = self._compile(pattern)
        node = self._root
        for token in compiled.body:
            if token.kind is TokenKind.LITERAL:
                nxt = node.exact.get(token.text)
                if nxt is None:
                    nxt = _PatternNode()
                    exact = node.exact
                    if isinstance(exact, dict):
                        exact[token.text] = nxt
                    else:
                        node.exact = {token.text: nxt}
            elif token.kind is TokenKind.STAR:
                nxt = node.star
                if nxt is None:
                    nxt = node.star = _PatternNode()
            else:
                if node.prefix is None:
                    node.prefix = _PrefixMap()
                nxt = node.prefix.add_default(token.text, _PatternNode)
            node = nxt
        subs = self._terminal(node, compiled, create=True)
        assert subs is not None
        self._subscribe(subs, key, value)

    def _terminal(
        self, node: _PatternNode[K, V], compiled: SubscriptionPattern, *, create: bool
    ) -> dict[K, V] | None:
        tail = compiled.tail
        if tail is None:
            if node.subs is None and create:
                node.subs = {}
            return node.subs
        kind = tail.kind
        if kind is TokenKind.HASH:
            if node.hash_subs is None and create:
                node.hash_subs = {}
            return node.hash_subs
        if kind is TokenKind.GT:
            if node.gt_subs is None and create:
                node.gt_subs = {}
            return node.gt_subs
        if kind is TokenKind.PREFIX_HASH:
            if node.prefix_hash is None:
                if not create:
                    return None
                node.prefix_hash = _PrefixMap()
            pmap = node.prefix_hash
        else:
            if node.prefix_gt is None:
                if not create:
                    return None
                node.prefix_gt = _PrefixMap()
            pmap = node.prefix_gt
        if create:
            return pmap.add_default(tail.text, dict)
        return pmap.items.get(tail.text)

    @staticmethod
    def _drop_terminal(node: _PatternNode[K, V], compiled: SubscriptionPattern) -> None:
        tail = compiled.tail
        if tail is None:
            node.subs = None
        elif tail.kind is TokenKind.HASH:
            node.hash_subs = None
        elif tail.kind is TokenKind.GT:
            node.gt_subs = None
        elif tail.kind is TokenKind.PREFIX_HASH:
            assert node.prefix_hash is not None
            node.prefix_hash.discard(tail.text)
            if not node.prefix_hash.items:
                node.prefix_hash = None
        else:
            assert node.prefix_gt is not None
            node.prefix_gt.discard(tail.text)
            if not node.prefix_gt.items:
                node.prefix_gt = None

    def remove(self, pattern: SubscriptionPattern | str, key: K) -> bool:
        """Unsubscribe ``key`` from ``pattern``. False if it was not subscribed."""
        compiled = self._compile(pattern)
        path: list[tuple[_PatternNode[K, V], TokenKind, str]] = []
        node: _PatternNode[K, V] | None = self._root
        for token in compiled.body:
            assert node is not None
            path.append((node, token.kind, token.text))
            if token.kind is TokenKind.LITERAL:
                node = node.exact.get(token.text)
            elif token.kind is TokenKind.STAR:
                node = node.star
            else:
                node = None if node.prefix is None else node.prefix.items.get(token.text)
            if node is None:
                return False
        assert node is not None
        subs = self._terminal(node, compiled, create=False)
        if subs is None or key not in subs:
            return False
        if not self._unsubscribe(subs, key):
            return True
        self._drop_terminal(node, compiled)
        while path and node.is_empty():
            parent, kind, text = path.pop()
            if kind is TokenKind.LITERAL:
                exact = parent.exact
                assert isinstance(exact, dict)
                del exact[text]
                if not exact:
                    parent.exact = _NO_CHILDREN
            elif kind is TokenKind.STAR:
                parent.star = None
            else:
                assert parent.prefix is not None
                parent.prefix.discard(text)
                if not parent.prefix.items:
                    parent.prefix = None
            node = parent
        return True

    def _match(self, channel: str) -> tuple[Mapping[K, V], ...]:
        found: list[Mapping[K, V]] = []
        tokens = channel.split(self._sep)
        last = len(tokens) - 1
        nodes: list[_PatternNode[K, V]] = [self._root]
        for i, token in enumerate(tokens):
            more = i < last  # at least one token after this one
            nxt: list[_PatternNode[K, V]] = []
            for node in nodes:
                # Tails starting at this node cover tokens[i:], which is never empty here.
                if node.hash_subs is not None:
                    found.append(node.hash_subs)
                if node.gt_subs is not None:
                    found.append(node.gt_subs)
                if node.prefix_hash is not None:
                    found.extend(node.prefix_hash.prefixes_of(token))
                if more and node.prefix_gt is not None:
                    found.extend(node.prefix_gt.prefixes_of(token))
                child = node.exact.get(token)
                if child is not None:
                    nxt.append(child)
                if node.star is not None:
                    nxt.append(node.star)
                if node.prefix is not None:
                    nxt.extend(node.prefix.prefixes_of(token))
            if not nxt:
                return tuple(found)
            nodes = nxt
        for node in nodes:
            if node.subs is not None:
                found.append(node.subs)
            if node.hash_subs is not None:
                found.append(node.hash_subs)  # '#' also matches zero further tokens
        return tuple(found)

    def is_empty_structure(self) -> bool:
        """True when no node is left besides an empty root (pruning works; for tests)."""
        return self._root.is_empty()
