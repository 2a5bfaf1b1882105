"""Retained messages written through to the log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..message import Message
from ..retained import MemoryRetainedStore

if TYPE_CHECKING:
    from .persistence import Persistence


class PersistentRetainedStore(MemoryRetainedStore):
    """Retained messages of one topic space, written through to the log (``$`` topics not)."""

    __slots__ = ("_store", "_tenant")

    def __init__(self, store: Persistence, tenant: str, separator: str = "/") -> None:
        super().__init__(separator)
        self._store = store
        self._tenant = tenant

    def set(self, message: Message) -> None:
        super().set(message)
        if message.topic[:1] != "$":
            self._store.retained_set(self._tenant, message)

    def delete(self, topic: str) -> None:
        before = len(self)
        super().delete(topic)
        if len(self) != before and topic[:1] != "$":
            self._store.retained_delete(self._tenant, topic)
