"""Concrete topics in a trie, queried by a topic filter (retained messages, MQTT §3.3.1.3).

The reverse of :class:`SubscriptionTrie`: here the stored keys are concrete topic names and the
query is a filter. A new subscription must receive every retained message whose topic its filter
matches; walking the trie along the filter visits only the branches the filter can reach
(a literal level is one dict lookup; ``+`` fans out to the children; ``#`` takes the whole
subtree), instead of testing every retained topic. PATTERNS.md §4 semantics: the ``$`` rule
(a filter starting with ``+``/``#`` skips first levels starting with ``$``), empty levels are
levels, and ``a/#`` also yields ``a``. Deleting a topic prunes the nodes left empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar, cast

from .mqtt_topics import validate_topic_filter, validate_topic_name

V = TypeVar("V")

_ABSENT = object()


class _TopicNode:
    """One level of a tree of concrete topic names (retained messages): no wildcard edges."""

    __slots__ = ("children", "value")

    def __init__(self) -> None:
        self.children: dict[str, _TopicNode] = {}
        self.value: object = _ABSENT


class TopicTree(Generic[V]):
    """``topic -> value`` for concrete topics; :meth:`matching` answers a filter query.

    Topic names are validated on :meth:`set`, filters on :meth:`matching` (``RuleError``).
    """

    __slots__ = ("_root", "_sep", "_count")

    def __init__(self, separator: str = "/") -> None:
        if len(separator) != 1:
            raise ValueError(f"separator must be one character, got {separator!r}")
        self._root = _TopicNode()
        self._sep = separator
        self._count = 0

    @property
    def separator(self) -> str:
        return self._sep

    def __len__(self) -> int:
        return self._count

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and self._find(topic) is not None

    def _find(self, topic: str) -> _TopicNode | None:
        node: _TopicNode | None = self._root
        for level in topic.split(self._sep):
            assert node is not None
            node = node.children.get(level)
            if node is None:
                return None
        assert node is not None
        return None if node.value is _ABSENT else node

    def set(self, topic: str, value: V) -> None:
        """Store ``value`` under the concrete ``topic`` (replacing any earlier value)."""
        validate_topic_name(topic, self._sep)
        node = self._root
        for level in topic.split(self._sep):
            nxt = node.children.get(level)
            if nxt is None:
                nxt = node.children[level] = _TopicNode()
            node = nxt
        if node.value is _ABSENT:
            self._count += 1
        node.value = value

    def get(self, topic: str) -> V | None:
        """The value stored under ``topic``, or ``None`` (use ``in`` if values may be None)."""
        node = self._find(topic)
        return None if node is None else cast(V, node.value)

    def delete(self, topic: str) -> bool:
        """Remove ``topic``; False if it was not stored. Empty nodes are pruned."""
        path: list[tuple[_TopicNode, str]] = []
        node = self._root
        for level in topic.split(self._sep):
            nxt = node.children.get(level)
            if nxt is None:
                return False
            path.append((node, level))
            node = nxt
        if node.value is _ABSENT:
            return False
        node.value = _ABSENT
        self._count -= 1
        while path and node.value is _ABSENT and not node.children:
            parent, level = path.pop()
            del parent.children[level]
            node = parent
        return True

    def matching(self, topic_filter: str) -> Iterator[tuple[str, V]]:
        """Every stored ``(topic, value)`` whose topic ``topic_filter`` matches (any order).

        Do not :meth:`set` or :meth:`delete` while iterating; collect first.
        """
        validate_topic_filter(topic_filter, self._sep)
        sep = self._sep
        levels = topic_filter.split(sep)
        n = len(levels)
        # (node, index of the next filter level, topic levels so far)
        stack: list[tuple[_TopicNode, int, tuple[str, ...]]] = [(self._root, 0, ())]
        while stack:
            node, k, path = stack.pop()
            if k == n:
                if node.value is not _ABSENT:
                    yield sep.join(path), cast(V, node.value)
                continue
            level = levels[k]
            if level == "#":
                if node.value is not _ABSENT and k > 0:
                    yield sep.join(path), cast(V, node.value)  # 'a/#' yields 'a'
                yield from self._subtree(node, path, skip_dollar=k == 0)
            elif level == "+":
                # Look one level ahead so that children which cannot continue are not pushed:
                # a '+' over many children is then one dict lookup each.
                ahead = levels[k + 1] if k + 1 < n else None
                literal_ahead = ahead is not None and ahead != "+" and ahead != "#"
                for name, child in node.children.items():
                    if k == 0 and name[:1] == "$":
                        continue
                    if literal_ahead:
                        if ahead not in child.children:
                            continue
                    elif ahead is None and child.value is _ABSENT:
                        continue
                    stack.append((child, k + 1, (*path, name)))
            else:
                same = node.children.get(level)
                if same is not None:
                    stack.append((same, k + 1, (*path, level)))

    def _subtree(
        self, top: _TopicNode, prefix: tuple[str, ...], *, skip_dollar: bool
    ) -> Iterator[tuple[str, V]]:
        """Every value strictly below ``top`` (``#`` matching one or more further levels)."""
        sep = self._sep
        stack: list[tuple[_TopicNode, tuple[str, ...]]] = []
        for name, child in top.children.items():
            if skip_dollar and name[:1] == "$":
                continue
            stack.append((child, (*prefix, name)))
        while stack:
            node, path = stack.pop()
            if node.value is not _ABSENT:
                yield sep.join(path), cast(V, node.value)
            for name, child in node.children.items():
                stack.append((child, (*path, name)))

    def items(self) -> Iterator[tuple[str, V]]:
        """Every stored ``(topic, value)``, ``$`` topics included."""
        return self._subtree(self._root, (), skip_dollar=False)

    def is_empty_structure(self) -> bool:
        """True when nothing is left below the root (pruning works; for tests)."""
        return not self._root.children
