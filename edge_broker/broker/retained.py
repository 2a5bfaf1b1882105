"""Retained messages (MQTT 5 §3.3.1.3): one per topic, per topic space.

:class:`RetainedStore` is the seam for persistence (issue 8). :class:`MemoryRetainedStore` keeps
the topics in a level trie, so a new subscription's filter visits only the branches it can match
(``+`` one level, ``#`` the subtree, the ``$`` rule at the root) instead of every retained topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from .message import Message

if TYPE_CHECKING:
    from .limits.retained_budget import RetainedBudget


class RetainedStore(Protocol):
    def set(self, message: Message) -> None: ...

    def get(self, topic: str) -> Message | None: ...

    def delete(self, topic: str) -> None: ...

    def matching(self, topic_filter: str, now: float) -> Iterator[Message]: ...

    def only_dollar_topics(self) -> bool: ...

    def __len__(self) -> int: ...


class _Level:
    __slots__ = ("children", "message")

    def __init__(self) -> None:
        self.children: dict[str, _Level] = {}
        self.message: Message | None = None


class MemoryRetainedStore:
    """Retained messages in memory; expired ones are dropped when met (MQTT 5 §3.3.2.3.3)."""

    __slots__ = ("_root", "_count", "_separator", "budget", "budget_tenant")

    def __init__(self, separator: str = "/") -> None:
        self._root = _Level()
        self._count = 0
        self._separator = separator
        # the broker's RetainedBudget (issue 16), told of every message gained and lost
        self.budget: RetainedBudget | None = None
        self.budget_tenant = ""

    def set(self, message: Message) -> None:
        node = self._root
        for level in message.topic.split(self._separator):
            child = node.children.get(level)
            if child is None:
                child = node.children[level] = _Level()
            node = child
        old = node.message
        if old is None:
            self._count += 1
        node.message = message
        budget = self.budget
        if budget is not None:
            if old is not None:
                budget.removed(self.budget_tenant, old)
            budget.added(self.budget_tenant, message)

    def only_dollar_topics(self) -> bool:
        """No retained message outside ``$`` topics (``$SYS``): the space may be freed."""
        return all(name[:1] == "$" for name in self._root.children)

    def get(self, topic: str) -> Message | None:
        """The retained message of ``topic`` (expired or not), if any."""
        node = self._root
        for level in topic.split(self._separator):
            child = node.children.get(level)
            if child is None:
                return None
            node = child
        return node.message

    def delete(self, topic: str) -> None:
        path: list[tuple[_Level, str]] = []
        node = self._root
        for level in topic.split(self._separator):
            child = node.children.get(level)
            if child is None:
                return
            path.append((node, level))
            node = child
        old = node.message
        if old is None:
            return
        node.message = None
        self._count -= 1
        if self.budget is not None:
            self.budget.removed(self.budget_tenant, old)
        while path and node.message is None and not node.children:  # prune empty branches
            parent, level = path.pop()
            del parent.children[level]
            node = parent

    def matching(self, topic_filter: str, now: float) -> Iterator[Message]:
        found: list[Message] = []
        self._collect(self._root, topic_filter.split(self._separator), 0, True, found)
        for message in found:
            if message.expired(now):
                self.delete(message.topic)
                continue
            yield message

    def _collect(
        self, node: _Level, levels: list[str], i: int, root: bool, found: list[Message]
    ) -> None:
        if i == len(levels):
            if node.message is not None:
                found.append(node.message)
            return
        level = levels[i]
        if level == "#":
            if node.message is not None and not root:
                found.append(node.message)  # "a/#" matches "a" (§4.7.1.2)
            self._subtree(node, root, found)
            return
        if level == "+":
            for name, child in node.children.items():
                if root and name[:1] == "$":
                    continue  # the $ rule (§4.7.2)
                self._collect(child, levels, i + 1, False, found)
            return
        exact = node.children.get(level)
        if exact is not None:
            self._collect(exact, levels, i + 1, False, found)

    def _subtree(self, node: _Level, root: bool, found: list[Message]) -> None:
        stack = [child for name, child in node.children.items() if not (root and name[:1] == "$")]
        while stack:
            current = stack.pop()
            if current.message is not None:
                found.append(current.message)
            stack.extend(current.children.values())

    def __len__(self) -> int:
        return self._count
