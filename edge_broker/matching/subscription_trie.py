"""The broker's subscription index: MQTT topic filters in a token trie (NATS "sublist" style).

PATTERNS.md "Matching structures" and §4. Each node has literal edges in a dict and separate
edges for ``+`` and ``#``, so matching a topic costs O(levels × active wildcard branches), not
O(subscriptions). The ``$`` rule is applied at the root: a topic whose first level starts with
``$`` does not follow the root's ``+`` and ``#`` edges.

The trie is path-compressed (a radix tree): a run of literal levels that nothing branches from is
one node holding the run as one string (``skip``, the levels joined by the separator), so a
32-level filter costs one node and its bytes, not 32 nodes and 32 dicts (on a Pi, the 20,000
subscriptions the default limits allow must fit the unit's ``MemoryMax``). A node gets a child
dict only when it has a literal child; adding a filter that leaves a run part-way splits the
node, and removing one merges a node left with one child and nothing else back into it, so the
shape depends only on the set of filters, not on the order they came in.

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
    """One node of the trie: the edge into it (a literal level or ``+``) is followed by
    ``skip_n`` further literal levels, ``skip`` (joined by the separator; ``skip_n`` tells
    ``""`` from one empty level). ``subs`` holds the filters ending after them, ``hash_subs``
    the filters ending in ``#`` there (``#`` is always last, so it needs no node of its own)."""

    __slots__ = ("skip", "skip_n", "children", "plus", "subs", "hash_subs")

    def __init__(self, skip: str = "", skip_n: int = 0) -> None:
        self.skip = skip
        self.skip_n = skip_n
        self.children: Mapping[str, _FilterNode[K, V]] = _NO_CHILDREN
        self.plus: _FilterNode[K, V] | None = None
        self.subs: dict[K, V] | None = None
        self.hash_subs: dict[K, V] | None = None

    def is_empty(self) -> bool:
        return (
            not self.children and self.plus is None and self.subs is None and self.hash_subs is None
        )

    def skip_levels(self, sep: str) -> list[str]:
        return self.skip.split(sep) if self.skip_n else []

    def take_contents(self, other: _FilterNode[K, V]) -> None:
        """Hold what ``other`` holds below its skip (its edges and subscriber dicts)."""
        self.children = other.children
        self.plus = other.plus
        self.subs = other.subs
        self.hash_subs = other.hash_subs


def _attach(node: _FilterNode[K, V], level: str, child: _FilterNode[K, V]) -> None:
    children = node.children
    if isinstance(children, dict):
        children[level] = child
    else:
        node.children = {level: child}


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

    def _new_node(self, levels: list[str], start: int) -> _FilterNode[K, V]:
        """A node whose skip is the run of literal levels at ``levels[start:]``."""
        end = start
        while end < len(levels) and levels[end] != "+":
            end += 1
        return _FilterNode(self._sep.join(levels[start:end]), end - start)

    def _split(self, node: _FilterNode[K, V], skip: list[str], keep: int) -> None:
        """Cut ``node``'s skip after ``keep`` levels: the rest moves to a new child (``node``
        stays where its parent points, so no parent needs to change)."""
        sep = self._sep
        tail: _FilterNode[K, V] = _FilterNode(sep.join(skip[keep + 1 :]), len(skip) - keep - 1)
        tail.take_contents(node)
        node.skip = sep.join(skip[:keep])
        node.skip_n = keep
        node.children = {skip[keep]: tail}
        node.plus = node.subs = node.hash_subs = None

    def _merge_single_child(self, node: _FilterNode[K, V]) -> None:
        """Fold ``node``'s only literal child into it when ``node`` holds nothing else."""
        if (
            node is self._root
            or len(node.children) != 1
            or node.plus is not None
            or node.subs is not None
            or node.hash_subs is not None
        ):
            return
        ((level, child),) = node.children.items()
        node.skip = self._sep.join(
            [*node.skip_levels(self._sep), level, *child.skip_levels(self._sep)]
        )
        node.skip_n += 1 + child.skip_n
        node.take_contents(child)

    def add(self, topic_filter: str, key: K, value: V) -> None:
        """Subscribe ``key`` to ``topic_filter`` with ``value``; replace the value if present."""
        validate_topic_filter(topic_filter, self._sep)
        node = self._root
        levels = topic_filter.split(self._sep)
        tail_hash = levels[-1] == "#"
        if tail_hash:
            levels.pop()
        i, n = 0, len(levels)
        while i < n:
            level = levels[i]
            nxt = node.plus if level == "+" else node.children.get(level)
            if nxt is None:
                nxt = self._new_node(levels, i + 1)
                if level == "+":
                    node.plus = nxt
                else:
                    _attach(node, level, nxt)
                i += 1 + nxt.skip_n
            else:
                i += 1
                if nxt.skip_n:
                    skip = nxt.skip.split(self._sep)
                    same = 0
                    while same < len(skip) and i + same < n and levels[i + same] == skip[same]:
                        same += 1
                    if same < len(skip):
                        self._split(nxt, skip, same)
                    i += same
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
        sep = self._sep
        levels = topic_filter.split(sep)
        tail_hash = levels[-1] == "#"
        if tail_hash:
            levels.pop()
        path: list[tuple[_FilterNode[K, V], str]] = []
        node = self._root
        i, n = 0, len(levels)
        while i < n:
            level = levels[i]
            nxt = node.plus if level == "+" else node.children.get(level)
            if nxt is None:
                return False
            i += 1
            if nxt.skip_n:
                if levels[i : i + nxt.skip_n] != nxt.skip.split(sep):
                    return False
                i += nxt.skip_n
            path.append((node, level))
            node = nxt
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
        self._merge_single_child(node)
        return True

    def _match(self, topic: str) -> tuple[Mapping[K, V], ...]:
        found: list[Mapping[K, V]] = []
        sep = self._sep
        levels = topic.split(sep)
        n = len(levels)
        root = self._root
        # (node, index of the topic level after the edge into it). The first level is taken
        # apart so the '$' rule costs nothing on deeper levels.
        stack: list[tuple[_FilterNode[K, V], int]] = []
        child = root.children.get(levels[0])
        if child is not None:
            stack.append((child, 1))
        if topic[:1] != "$":
            if root.hash_subs is not None:
                found.append(root.hash_subs)
            if root.plus is not None:
                stack.append((root.plus, 1))
        starts: list[int] | None = None  # where each level begins in topic, made when needed
        while stack:
            node, i = stack.pop()
            k = node.skip_n
            if k:
                if i + k > n:
                    continue
                if k == 1:
                    if levels[i] != node.skip:
                        continue
                else:
                    if starts is None:
                        starts = []
                        pos = 0
                        for level in levels:
                            starts.append(pos)
                            pos += len(level) + 1
                    # the k levels equal the run iff the text does and a level ends after it
                    begin = starts[i]
                    end = begin + len(node.skip)
                    if not topic.startswith(node.skip, begin) or (
                        end != len(topic) and topic[end] != sep
                    ):
                        continue
                i += k
            if node.hash_subs is not None:
                found.append(node.hash_subs)  # 'a/#' also matches 'a' (§4.7.1.2)
            if i == n:
                if node.subs is not None:
                    found.append(node.subs)
                continue
            child = node.children.get(levels[i])
            if child is not None:
                stack.append((child, i + 1))
            if node.plus is not None:
                stack.append((node.plus, i + 1))
        return tuple(found)

    def filters(self) -> Iterator[tuple[str, Mapping[K, V]]]:
        """Every filter with its subscriber mapping (for inspection, ``$SYS`` and tests)."""
        sep = self._sep
        stack: list[tuple[_FilterNode[K, V], list[str]]] = [(self._root, [])]
        while stack:
            node, prefix = stack.pop()
            if node.subs is not None:
                yield sep.join(prefix), node.subs
            if node.hash_subs is not None:
                yield sep.join([*prefix, "#"]), node.hash_subs
            if node.plus is not None:
                stack.append((node.plus, [*prefix, "+", *node.plus.skip_levels(sep)]))
            for level, child in node.children.items():
                stack.append((child, [*prefix, level, *child.skip_levels(sep)]))

    def has_first_level(self, level: str) -> bool:
        """Whether some filter starts with the literal ``level`` (e.g. ``$SYS``: only such
        filters match topics of a ``$`` root, MQTT §4.7.2)."""
        return level in self._root.children

    def node_count(self) -> int:
        """Nodes below the root (the compactness the memory budget counts on; for tests)."""
        count = 0
        stack = [self._root]
        while stack:
            node = stack.pop()
            if node.plus is not None:
                stack.append(node.plus)
            stack.extend(node.children.values())
            count += 1
        return count - 1

    def is_empty_structure(self) -> bool:
        """True when no node is left besides an empty root (pruning works; for tests)."""
        return self._root.is_empty()
