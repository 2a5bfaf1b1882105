"""Concrete topics in a trie, queried by a topic filter (retained messages, MQTT §3.3.1.3).

The reverse of :class:`SubscriptionTrie`: here the stored keys are concrete topic names and the
query is a filter. A new subscription must receive every retained message whose topic its filter
matches; walking the trie along the filter visits only the branches the filter can reach
(a literal level is one dict lookup; ``+`` fans out to the children; ``#`` takes the whole
subtree), instead of testing every retained topic. PATTERNS.md §4 semantics: the ``$`` rule
(a filter starting with ``+``/``#`` skips first levels starting with ``$``), empty levels are
levels, and ``a/#`` also yields ``a``. Deleting a topic prunes the nodes left empty.

Like the subscription trie the tree is path-compressed: the levels below a node that nothing
branches from are kept as one string (``skip``), so a retained message on a 32-level topic costs
one node and the topic's bytes, not 32 nodes with a dict each. Adding a topic that leaves a run
part-way splits the node; deleting one merges a node left with one child and no value back.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Generic, TypeVar, cast

from .mqtt_topics import validate_topic_filter, validate_topic_name

V = TypeVar("V")

_ABSENT = object()
_SKIP_MATCHED, _SKIP_DIFFERS, _HASH_IN_SKIP = object(), object(), object()
_NO_CHILDREN: Mapping[str, _TopicNode] = MappingProxyType({})


class _TopicNode:
    """The edge into a node (one level) is followed by ``skip_n`` more levels, ``skip`` (joined
    by the separator; ``skip_n`` tells ``""`` from one empty level); ``value`` is the value of
    the topic ending after them. A node gets a child dict only when it has a child."""

    __slots__ = ("skip", "skip_n", "children", "value")

    def __init__(self, skip: str = "", skip_n: int = 0) -> None:
        self.skip = skip
        self.skip_n = skip_n
        self.children: Mapping[str, _TopicNode] = _NO_CHILDREN
        self.value: object = _ABSENT

    def skip_levels(self, sep: str) -> list[str]:
        return self.skip.split(sep) if self.skip_n else []

    def attach(self, level: str, child: _TopicNode) -> None:
        children = self.children
        if isinstance(children, dict):
            children[level] = child
        else:
            self.children = {level: child}


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

    def _path(self, topic: str) -> tuple[list[tuple[_TopicNode, str]], _TopicNode] | None:
        """The (parent, level) edges down to the node of ``topic``, and that node."""
        sep = self._sep
        levels = topic.split(sep)
        path: list[tuple[_TopicNode, str]] = []
        node = self._root
        i, n = 0, len(levels)
        while i < n:
            nxt = node.children.get(levels[i])
            if nxt is None:
                return None
            i += 1
            if nxt.skip_n:
                if levels[i : i + nxt.skip_n] != nxt.skip.split(sep):
                    return None
                i += nxt.skip_n
            path.append((node, levels[i - 1 - nxt.skip_n]))
            node = nxt
        return path, node

    def _find(self, topic: str) -> _TopicNode | None:
        found = self._path(topic)
        if found is None or found[1].value is _ABSENT:
            return None
        return found[1]

    def set(self, topic: str, value: V) -> None:
        """Store ``value`` under the concrete ``topic`` (replacing any earlier value)."""
        validate_topic_name(topic, self._sep)
        self.store(topic, value)

    def store(self, topic: str, value: V) -> None:
        """:meth:`set` for a topic already validated (the broker checked the PUBLISH)."""
        sep = self._sep
        levels = topic.split(sep)
        node = self._root
        i, n = 0, len(levels)
        while i < n:
            nxt = node.children.get(levels[i])
            if nxt is None:
                nxt = _TopicNode(sep.join(levels[i + 1 :]), n - i - 1)
                node.attach(levels[i], nxt)
                node = nxt
                break
            i += 1
            if nxt.skip_n:
                skip = nxt.skip.split(sep)
                same = 0
                while same < len(skip) and i + same < n and levels[i + same] == skip[same]:
                    same += 1
                if same < len(skip):  # the topic leaves the run: cut it there
                    tail = _TopicNode(sep.join(skip[same + 1 :]), len(skip) - same - 1)
                    tail.children, tail.value = nxt.children, nxt.value
                    nxt.skip, nxt.skip_n = sep.join(skip[:same]), same
                    nxt.children, nxt.value = {skip[same]: tail}, _ABSENT
                i += same
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
        found = self._path(topic)
        if found is None or found[1].value is _ABSENT:
            return False
        path, node = found
        node.value = _ABSENT
        self._count -= 1
        while path and node.value is _ABSENT and not node.children:
            parent, level = path.pop()
            children = parent.children
            assert isinstance(children, dict)
            del children[level]
            if not children:
                parent.children = _NO_CHILDREN
            node = parent
        if node is not self._root and node.value is _ABSENT and len(node.children) == 1:
            ((level, child),) = node.children.items()
            sep = self._sep
            node.skip = sep.join([*node.skip_levels(sep), level, *child.skip_levels(sep)])
            node.skip_n += 1 + child.skip_n
            node.children, node.value = child.children, child.value
        return True

    def first_levels(self) -> Iterator[str]:
        """The distinct first levels of the stored topics."""
        return iter(self._root.children)

    def matching(self, topic_filter: str) -> Iterator[tuple[str, V]]:
        """Every stored ``(topic, value)`` whose topic ``topic_filter`` matches (any order).

        Do not :meth:`set` or :meth:`delete` while iterating; collect first.
        """
        validate_topic_filter(topic_filter, self._sep)
        sep = self._sep
        for path, value in self._walk(topic_filter, True):
            yield sep.join(path), value

    def values_matching(self, topic_filter: str) -> list[V]:
        """The values of :meth:`matching` without building their topics (a list: the tree may
        change once it is returned). The filter must be valid."""
        return [value for _, value in self._walk(topic_filter, False)]

    def _walk(self, topic_filter: str, paths: bool) -> Iterator[tuple[tuple[str, ...], V]]:
        """(topic levels, value) of every match; the levels only when ``paths``."""
        sep = self._sep
        levels = topic_filter.split(sep)
        n = len(levels)
        # (node whose skip is still to be matched, index of the filter level for its first
        # skip level, topic levels down to the node's edge)
        stack: list[tuple[_TopicNode, int, tuple[str, ...]]] = []
        self._push_children(stack, self._root, levels, 0, (), paths)
        if levels[0] == "#":
            yield from self._subtree(self._root, (), paths, skip_dollar=True)
            return
        while stack:
            node, k, path = stack.pop()
            skip = node.skip_levels(sep)
            if paths and skip:
                path = (*path, *skip)
            state = _SKIP_MATCHED
            for level in skip:
                wanted = levels[k] if k < n else None
                if wanted == "#":
                    state = _HASH_IN_SKIP  # '#' takes the rest of the run and all below it
                    break
                if wanted is None or (wanted != "+" and wanted != level):
                    state = _SKIP_DIFFERS
                    break
                k += 1
            if state is _SKIP_DIFFERS:
                continue
            if state is _HASH_IN_SKIP:
                if node.value is not _ABSENT:
                    yield path, cast(V, node.value)
                yield from self._subtree(node, path, paths)
            elif k == n:
                if node.value is not _ABSENT:
                    yield path, cast(V, node.value)
            elif levels[k] == "#":
                if node.value is not _ABSENT:
                    yield path, cast(V, node.value)  # 'a/#' yields 'a'
                yield from self._subtree(node, path, paths)
            else:
                self._push_children(stack, node, levels, k, path, paths)

    @staticmethod
    def _push_children(
        stack: list[tuple[_TopicNode, int, tuple[str, ...]]],
        node: _TopicNode,
        levels: list[str],
        k: int,
        path: tuple[str, ...],
        paths: bool,
    ) -> None:
        level = levels[k]
        if level == "#":
            return
        if level == "+":
            for name, child in node.children.items():
                if k == 0 and name[:1] == "$":
                    continue  # the $ rule (§4.7.2)
                stack.append((child, k + 1, (*path, name) if paths else ()))
            return
        same = node.children.get(level)
        if same is not None:
            stack.append((same, k + 1, (*path, level) if paths else ()))

    def _subtree(
        self, top: _TopicNode, prefix: tuple[str, ...], paths: bool, *, skip_dollar: bool = False
    ) -> Iterator[tuple[tuple[str, ...], V]]:
        """Every value strictly below ``top`` (``#`` matching one or more further levels)."""
        sep = self._sep
        stack: list[tuple[_TopicNode, tuple[str, ...]]] = []
        for name, child in top.children.items():
            if skip_dollar and name[:1] == "$":
                continue
            stack.append((child, (*prefix, name, *child.skip_levels(sep)) if paths else ()))
        while stack:
            node, path = stack.pop()
            if node.value is not _ABSENT:
                yield path, cast(V, node.value)
            for name, child in node.children.items():
                stack.append((child, (*path, name, *child.skip_levels(sep)) if paths else ()))

    def items(self) -> Iterator[tuple[str, V]]:
        """Every stored ``(topic, value)``, ``$`` topics included."""
        sep = self._sep
        for path, value in self._subtree(self._root, (), True):
            yield sep.join(path), value

    def is_empty_structure(self) -> bool:
        """True when nothing is left below the root (pruning works; for tests)."""
        return not self._root.children
