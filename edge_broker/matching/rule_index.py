"""First-match lookup over an ordered list of MQTT-filter rules (HiveMQ-style permissions).

Seed 003: "The list of TopicPermissions is evaluated in the order they are added, the first one
that matches is used." AUTHZ.md §2 gate 4 adds, for SUBSCRIBE, true containment (PATTERNS.md
§4): the deciding rule is the first whose filter CONTAINS the subscription filter, and earlier
rules that merely OVERLAP it are reported so the subscription can be checked per delivery.

:class:`FirstMatchIndex` compiles the filters once into a token trie (PATTERNS.md "Matching
structures"); every node knows the smallest rule index in its subtree, so a lookup stops
following branches that cannot beat the best index found so far. A PUBLISH decision costs
O(topic depth × wildcard branches), independent of the number of rules. The index is immutable:
a policy change builds a new one.

The relations follow :mod:`.mqtt_topics` exactly (the ``$`` rule, empty levels, and topics
never being the empty string); the property tests compare every query with a linear scan.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

from .errors import RuleError
from .mqtt_topics import validate_topic_filter

_NONE = sys.maxsize  # "no rule": larger than every index
_ORDERED_FROM = 8  # nodes with more children than this keep them ordered by minimum


# Leaves share one read-only empty mapping instead of an empty dict each (memory on a Pi).
_NO_CHILDREN: Mapping[str, _RuleNode] = MappingProxyType({})


class _RuleNode:
    """One level of the first-match rule index: MQTT filter edges plus the rule indices and
    subtree minima that let a query stop at the first rule before the limit."""

    __slots__ = ("children", "plus", "end", "hash", "end_first", "hash_first", "min", "order")

    def __init__(self) -> None:
        self.children: Mapping[str, _RuleNode] = {}
        self.plus: _RuleNode | None = None
        # Lists while building, tuples once finished (the empty tuple is shared).
        self.end: Sequence[int] = []  # rules whose filter ends at this node
        self.hash: Sequence[int] = []  # rules whose filter is this node's path + '#'
        self.end_first = _NONE
        self.hash_first = _NONE
        self.min = _NONE  # smallest rule index anywhere in this subtree
        # For a node with many children: (minima, names, nodes) ordered by subtree minimum,
        # so a scan over the children for a '+' or '#' query level stops at the first child
        # that holds no rule before the limit. Parallel tuples cost less than a tuple each.
        self.order: tuple[tuple[int, ...], tuple[str, ...], tuple[_RuleNode, ...]] | None = None

    def finish(self) -> int:
        """Freeze the subtree bottom-up: sort the lists, compute firsts and minima."""
        self.end = tuple(sorted(self.end))
        self.hash = tuple(sorted(self.hash))
        if not self.children:
            self.children = _NO_CHILDREN
        self.end_first = self.end[0] if self.end else _NONE
        self.hash_first = self.hash[0] if self.hash else _NONE
        low = min(self.end_first, self.hash_first)
        for child in self.children.values():
            low = min(low, child.finish())
        if self.plus is not None:
            low = min(low, self.plus.finish())
        self.min = low
        if len(self.children) > _ORDERED_FROM:
            names = sorted(self.children, key=lambda name: self.children[name].min)
            nodes = tuple(self.children[name] for name in names)
            self.order = (tuple(node.min for node in nodes), tuple(names), nodes)
        return low

    def children_before(self, limit: int) -> Iterable[tuple[str, _RuleNode]]:
        """Children whose subtree holds a rule ``< limit`` (smallest minimum first when the
        node has many children)."""
        if self.order is None:
            return [(name, c) for name, c in self.children.items() if c.min < limit]
        mins, names, nodes = self.order
        stop = bisect_left(mins, limit)
        return zip(names[:stop], nodes[:stop], strict=True)

    def rules_below(self, limit: int) -> Iterable[int]:
        """Every rule index ``< limit`` in this subtree, skipping subtrees that hold none."""
        stack = [self]
        while stack:
            node = stack.pop()
            if node.min >= limit:
                continue
            yield from (i for i in node.end if i < limit)
            yield from (i for i in node.hash if i < limit)
            stack.extend(child for _, child in node.children_before(limit))
            if node.plus is not None:
                stack.append(node.plus)


def _normalize_query(levels: list[str]) -> list[str]:
    """Rewrite the two filters that also match the non-topic ``''`` (see mqtt_topics)."""
    if levels == ["#"]:
        return ["+", "#"]
    if levels == ["", "#"]:
        return ["", "+", "#"]
    return levels


class FirstMatchIndex:
    """Ordered MQTT topic filters; rule ``i`` is ``filters[i]``.

    Queries return rule indices in ascending order (the first is the first-match winner):

    - :meth:`first_match` / :meth:`matches`: rules whose filter matches a concrete topic.
    - :meth:`first_containing` / :meth:`containing`: rules whose filter contains a
      subscription filter (every topic it can match).
    - :meth:`overlapping`: rules that share some topic with a subscription filter without
      containing it, optionally only those before a given index.

    Pass the filter of a shared subscription without ``$share/<group>/`` (:func:`parse_shared`).
    An invalid rule filter raises :class:`RuleError` naming the rule's position.
    """

    __slots__ = ("_root", "_sep", "_filters")

    def __init__(self, filters: Sequence[str], separator: str = "/") -> None:
        if len(separator) != 1:
            raise ValueError(f"separator must be one character, got {separator!r}")
        self._sep = separator
        self._filters = tuple(filters)
        self._root = _RuleNode()
        for index, topic_filter in enumerate(self._filters):
            try:
                validate_topic_filter(topic_filter, separator)
            except RuleError as exc:
                raise RuleError(
                    exc.rule, exc.segment, f"{exc.reason} (rule {index + 1} of {len(filters)})"
                ) from exc
            self._insert(topic_filter, index)
        self._root.finish()

    def _insert(self, topic_filter: str, index: int) -> None:
        levels = topic_filter.split(self._sep)
        tail_hash = levels[-1] == "#"
        if tail_hash:
            levels.pop()
        node = self._root
        for level in levels:
            if level == "+":
                if node.plus is None:
                    node.plus = _RuleNode()
                node = node.plus
            else:
                children = node.children
                assert isinstance(children, dict)  # only frozen by finish()
                nxt = children.get(level)
                if nxt is None:
                    nxt = children[level] = _RuleNode()
                node = nxt
        rules = node.hash if tail_hash else node.end
        assert isinstance(rules, list)
        rules.append(index)

    def __len__(self) -> int:
        return len(self._filters)

    @property
    def filters(self) -> tuple[str, ...]:
        return self._filters

    @property
    def separator(self) -> str:
        return self._sep

    # -- concrete topics (PUBLISH, will, delivery) ------------------------------------------

    def first_match(self, topic: str) -> int | None:
        """The smallest index whose filter matches the concrete ``topic``, or ``None``."""
        root = self._root
        levels = topic.split(self._sep)
        best = _NONE
        # The first level is taken apart so the '$' rule costs nothing on deeper levels.
        nodes: list[_RuleNode] = []
        child = root.children.get(levels[0])
        if child is not None:
            nodes.append(child)
        if topic[:1] != "$":
            best = root.hash_first
            plus = root.plus
            if plus is not None and plus.min < best:
                nodes.append(plus)
        for i in range(1, len(levels)):
            level = levels[i]
            nxt: list[_RuleNode] = []
            for node in nodes:
                if node.min >= best:
                    continue
                if node.hash_first < best:
                    best = node.hash_first
                child = node.children.get(level)
                if child is not None and child.min < best:
                    nxt.append(child)
                plus = node.plus
                if plus is not None and plus.min < best:
                    nxt.append(plus)
            if not nxt:
                return None if best == _NONE else best
            nodes = nxt
        for node in nodes:
            if node.end_first < best:
                best = node.end_first
            if node.hash_first < best:
                best = node.hash_first
        return None if best == _NONE else best

    def matches(self, topic: str) -> list[int]:
        """Every index whose filter matches ``topic``, ascending (for rules whose other
        attributes, e.g. QoS or retain, are checked by the caller in order)."""
        root = self._root
        found: list[int] = []
        dollar = topic[:1] == "$"
        nodes = [root]
        for level in topic.split(self._sep):
            nxt: list[_RuleNode] = []
            for node in nodes:
                wild = not (dollar and node is root)
                if wild:
                    found.extend(node.hash)
                child = node.children.get(level)
                if child is not None:
                    nxt.append(child)
                if wild and node.plus is not None:
                    nxt.append(node.plus)
            if not nxt:
                nodes = nxt
                break
            nodes = nxt
        for node in nodes:
            found.extend(node.end)
            found.extend(node.hash)
        found.sort()
        return found

    # -- subscription filters (SUBSCRIBE, AUTHZ.md gate 4) -----------------------------------

    def containing(self, topic_filter: str) -> list[int]:
        """Every index whose filter contains the valid ``topic_filter``, ascending."""
        q = _normalize_query(topic_filter.split(self._sep))
        root = self._root
        dollar = q[0][:1] == "$"
        n = len(q)
        found: list[int] = []
        stack: list[tuple[_RuleNode, int]] = [(root, 0)]
        while stack:
            node, k = stack.pop()
            wild = not (dollar and node is root)
            if wild:
                found.extend(node.hash)
            if k == n:
                found.extend(node.end)
                continue
            level = q[k]
            if level == "#":
                continue  # only a '#' rule contains a '#' tail, taken above
            if wild and node.plus is not None:
                stack.append((node.plus, k + 1))
            if level != "+":
                child = node.children.get(level)
                if child is not None:
                    stack.append((child, k + 1))
        found.sort()
        return found

    def first_containing(self, topic_filter: str) -> int | None:
        """The smallest index whose filter contains ``topic_filter``, or ``None``."""
        found = self.containing(topic_filter)
        return found[0] if found else None

    def shadowed_by(self, index: int) -> int | None:
        """The first earlier rule whose filter contains rule ``index``'s filter, or ``None``.

        Under first-match such a rule decides every topic rule ``index`` could match, so rule
        ``index`` can never match on its filter alone (``edge-broker lint``, AUTHZ.md; the
        caller still compares the rules' other attributes).
        """
        if not 0 <= index < len(self._filters):
            raise IndexError(f"rule index {index} is out of range 0..{len(self._filters) - 1}")
        first = self.first_containing(self._filters[index])
        return first if first is not None and first < index else None

    def overlapping(self, topic_filter: str, before: int | None = None) -> list[int]:
        """Indices (``< before`` if given) whose filter overlaps the valid ``topic_filter``
        without containing it, ascending. ``overlapping(f, first_containing(f))`` are the
        earlier rules AUTHZ.md gate 4 must recheck per delivery."""
        limit = _NONE if before is None else before
        q = _normalize_query(topic_filter.split(self._sep))
        root = self._root
        q_dollar = q[0][:1] == "$"
        q_wild_first = q[0] in ("+", "#")
        n = len(q)
        found: list[int] = []
        # (node, k, contained): ``contained`` says the rule path so far contains q[:k].
        stack: list[tuple[_RuleNode, int, bool]] = [(root, 0, True)]
        empty_first = root.children.get("")
        while stack:
            node, k, cont = stack.pop()
            if node.min >= limit:
                continue
            if k < n and q[k] == "#":
                # Every rule below overlaps; only a '#' rule on a containing path contains.
                if not cont:
                    found.extend(i for i in node.hash if i < limit)
                found.extend(i for i in node.end if i < limit)
                for _, child in node.children_before(limit):
                    found.extend(child.rules_below(limit))
                if node.plus is not None:
                    found.extend(node.plus.rules_below(limit))
                continue
            if k == n:
                # q is exhausted: a rule ending here, or ending in '#' here, meets it. When q is
                # '+' and the rule starts with an empty level, the only common string would
                # be '', which is not a topic name.
                if not cont and not (k == 1 and node is empty_first):
                    found.extend(i for i in node.end if i < limit)
                    found.extend(i for i in node.hash if i < limit)
                continue
            at_root = node is root
            if not cont and not (at_root and q_dollar):
                found.extend(i for i in node.hash if i < limit)
            level = q[k]
            plus = node.plus
            if plus is not None and not (at_root and q_dollar):
                stack.append((plus, k + 1, cont))  # '+' contains '+' and any literal
            if level == "+":
                for name, child in node.children_before(limit):
                    if at_root and q_wild_first and name[:1] == "$":
                        continue
                    stack.append((child, k + 1, False))
            else:
                same = node.children.get(level)
                if same is not None:
                    stack.append((same, k + 1, cont))
        found.sort()
        return found
