"""Retained messages (MQTT 5 §3.3.1.3): one per topic, per topic space.

:class:`RetainedStore` is the seam for persistence (issue 8). :class:`MemoryRetainedStore` keeps
the topics in a path-compressed level trie (:class:`TopicTree`), so a new subscription's filter
visits only the branches it can match (``+`` one level, ``#`` the subtree, the ``$`` rule at the
root) instead of every retained topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from ..matching.topic_tree import TopicTree
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


class MemoryRetainedStore:
    """Retained messages in memory; expired ones are dropped when met (MQTT 5 §3.3.2.3.3).

    The topics live in a path-compressed :class:`TopicTree`: a message on a deep topic costs
    its topic's bytes and one node, not a node and a dict per level."""

    __slots__ = ("_tree", "budget", "budget_tenant")

    def __init__(self, separator: str = "/") -> None:
        self._tree: TopicTree[Message] = TopicTree(separator)
        # the broker's RetainedBudget (issue 16), told of every message gained and lost
        self.budget: RetainedBudget | None = None
        self.budget_tenant = ""

    def set(self, message: Message) -> None:
        old = self._tree.get(message.topic)
        self._tree.store(message.topic, message)
        budget = self.budget
        if budget is not None:
            if old is not None:
                budget.removed(self.budget_tenant, old)
            budget.added(self.budget_tenant, message)

    def only_dollar_topics(self) -> bool:
        """No retained message outside ``$`` topics (``$SYS``): the space may be freed."""
        return all(name[:1] == "$" for name in self._tree.first_levels())

    def get(self, topic: str) -> Message | None:
        """The retained message of ``topic`` (expired or not), if any."""
        return self._tree.get(topic)

    def delete(self, topic: str) -> None:
        old = self._tree.get(topic)
        if old is None:
            return
        self._tree.delete(topic)
        if self.budget is not None:
            self.budget.removed(self.budget_tenant, old)

    def matching(self, topic_filter: str, now: float) -> Iterator[Message]:
        for message in self._tree.values_matching(topic_filter):
            if message.expired(now):
                self.delete(message.topic)
                continue
            yield message

    def is_empty_structure(self) -> bool:
        """Nothing left below the root (pruning works; for tests)."""
        return self._tree.is_empty_structure()

    def __len__(self) -> int:
        return len(self._tree)
