"""The broker's subscription index: MQTT topic filters in a token trie (NATS "sublist" style).

PATTERNS.md "Matching structures" and §4. Each node has literal edges in a dict and separate
edges for ``+`` and ``#``, so matching a topic costs O(levels × active wildcard branches), not
O(subscriptions). The ``$`` rule is applied at the root: a topic whose first level starts with
``$`` does not follow the root's ``+`` and ``#`` edges.

Every filter that has at least one subscriber owns one dict ``key -> value`` (e.g. client id ->
subscription options). :meth:`SubscriptionTrie.match` returns those dicts themselves, one per
matching filter, so fan-out is one loop over a tuple with no copying. The counts, the
generation number and the result cache (which move only when a filter gains its first key or
loses its last one) are those of :class:`~edge_broker.matching.routing_index.RoutingIndex`.
Removing the last key of a filter prunes the nodes that became empty, so churn does not grow
memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from .mqtt_topics import validate_topic_filter
from .routing_index import DEFAULT_RESULT_CACHE_BYTES, DEFAULT_RESULT_CACHE_SIZE, RoutingIndex

K = TypeVar("K")
V = TypeVar("V")

DEFAULT_CACHE_SIZE = DEFAULT_RESULT_CACHE_SIZE
# Leaves share one read-only empty mapping instead of an empty dict each (memory on a Pi);
# a node gets its own dict when it gains its first child.
_NO_CHILDREN: Mapping[str, Any] = MappingProxyType({})


class _FilterNode(Generic[K, V]):
    """One level of the trie. ``subs`` holds the filters ending here, ``hash_subs`` the
    filters ending in ``#`` here (``#`` is always last, so it needs no node of its own)."""

    __slots__ = ("children", "plus", "subs", "hash_subs")

    def __init__(self) -> None:
        self.children: Mapping[str, _FilterNode[K, V]] = _NO_CHILDREN
        self.plus: _FilterNode[K, V] | None = None
        self.subs: dict[K, V] | None = None
        self.hash_subs: dict[K, V] | None = None

    def is_empty(self) -> bool:
        return (
            not self.children and self.plus is None and self.subs is None and self.hash_subs is None
        )


class SubscriptionTrie(RoutingIndex[K, V]):
    """Topic filters -> subscribers, matched against concrete topics.

    ``add(filter, key, value)`` adds or replaces; ``remove(filter, key)`` returns whether it was
    there; ``match(topic)`` returns a tuple of read-only mappings, one for each filter that
    matches ``topic`` (a key subscribed through two overlapping filters appears in two
    mappings; the broker decides how to merge). Do not add or remove while iterating over a
    returned mapping: copy it first. Filters are validated on :meth:`add` (``RuleError``).
    """

    __slots__ = ("_root",)

    def __init__(
        self,
        separator: str = "/",
        cache_size: int = DEFAULT_CACHE_SIZE,
        cache_bytes: int = DEFAULT_RESULT_CACHE_BYTES,
    ) -> None:
        if len(separator) != 1:
            raise ValueError(f"separator must be one character, got {separator!r}")
        super().__init__(separator, cache_size, cache_bytes)
        self._root: _FilterNode[K, V] = _FilterNode()

    @property
    def filter_count(self) -> int:
        """Number of distinct filters with at least one key."""
        return self._mappings

    def add(self, topic_filter: str, key: K, value: V) -> None:
        """Subscribe ``key`` to ``topic_filter`` with ``value``; replace the value if present."""
        validate_topic_filter(topic_filter, self._sep)
        node = self._root
        levels = topic_filter.split(self._sep)
        tail_hash = levels[-1] == "#"
        if tail_hash:
            levels.pop()
        for level in levels:
            if level == "+":
                nxt = node.plus
                if nxt is None:
                    nxt = node.plus = _FilterNode()
            else:
                nxt = node.children.get(level)
                if nxt is None:
                    nxt = _FilterNode()
                    children = node.children
                    if isinstance(children, dict):
                        children[level] = nxt
                    else:
                        node.children = {level: nxt}
            node = nxt
        subs = node.hash_subs if tail_hash else node.subs
        if subs is None:
            subs = {}
            if tail_hash:
                node.hash_subs = subs
            else:
                node.subs = subs
        self._subscribe(subs, key, value)

    def remove(self, topic_filter: str, key: K) -> bool:
        """Unsubscribe ``key`` from ``topic_filter``. False if it was not subscribed."""
        levels = topic_filter.split(self._sep)
        tail_hash = levels[-1] == "#"
        if tail_hash:
            levels.pop()
        path: list[tuple[_FilterNode[K, V], str]] = []
        node: _FilterNode[K, V] | None = self._root
        for level in levels:
            assert node is not None
            path.append((node, level))
            node = node.plus if level == "+" else node.children.get(level)
            if node is None:
                return False
        assert node is not None
        subs = node.hash_subs if tail_hash else node.subs
        if subs is None or key not in subs:
            return False
        if not self._unsubscribe(subs, key):
            return True
        if tail_hash:
            node.hash_subs = None
        else:
            node.subs = None
        # Prune the nodes that hold nothing any more, deepest first.
        while path and node.is_empty():
            parent, level = path.pop()
            if level == "+":
                parent.plus = None
            else:
                children = parent.children
                assert isinstance(children, dict)
                del children[level]
                if not children:
                    parent.children = _NO_CHILDREN
            node = parent
        return True

    def _match(self, topic: str) -> tuple[Mapping[K, V], ...]:
        found: list[Mapping[K, V]] = []
        levels = topic.split(self._sep)
        root = self._root
        # The first level is taken apart so the '$' rule costs nothing on deeper levels.
        nodes: list[_FilterNode[K, V]] = []
        child = root.children.get(levels[0])
        if child is not None:
            nodes.append(child)
        if topic[:1] != "$":
            if root.hash_subs is not None:
                found.append(root.hash_subs)
            if root.plus is not None:
                nodes.append(root.plus)
        for i in range(1, len(levels)):
            if not nodes:
                return tuple(found)
            level = levels[i]
            nxt: list[_FilterNode[K, V]] = []
            for node in nodes:
                if node.hash_subs is not None:
                    found.append(node.hash_subs)
                child = node.children.get(level)
                if child is not None:
                    nxt.append(child)
                if node.plus is not None:
                    nxt.append(node.plus)
            nodes = nxt
        for node in nodes:
            if node.subs is not None:
                found.append(node.subs)
            if node.hash_subs is not None:
                found.append(node.hash_subs)  # 'a/#' also matches 'a' (§4.7.1.2)
        return tuple(found)

    def filters(self) -> Iterator[tuple[str, Mapping[K, V]]]:
        """Every filter with its subscriber mapping (for inspection, ``$SYS`` and tests)."""
        stack: list[tuple[_FilterNode[K, V], list[str]]] = [(self._root, [])]
        sep = self._sep
        while stack:
            node, prefix = stack.pop()
            if node.subs is not None:
                yield sep.join(prefix), node.subs
            if node.hash_subs is not None:
                yield sep.join([*prefix, "#"]), node.hash_subs
            if node.plus is not None:
                stack.append((node.plus, [*prefix, "+"]))
            for level, child in node.children.items():
                stack.append((child, [*prefix, level]))

    def is_empty_structure(self) -> bool:
        """True when no node is left besides an empty root (pruning works; for tests)."""
        return self._root.is_empty()
