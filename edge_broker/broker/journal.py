"""The persistence interface of a session (issue 17): what the session and delivery code tell
persistence at each point that changes durable state.

A persistent session (expiry > 0, or 3.x clean session 0) has a
:class:`~edge_broker.broker.persist.hooks.PersistentJournal` in ``session.journal``; every other
session has :data:`NO_JOURNAL`, whose calls do nothing. The session's containers (``queue``,
``inflight``, ``qos2_incoming``, ``subscriptions``) are plain ``deque``/``OrderedDict``/``set``/
``dict``: code that changes one of them calls the matching method here right after, and a
change without that call is not stored (a restart then brings back the state before it).

The calls, in the order a message goes through a session:

- ``queued(outgoing)``: appended to ``session.queue``;
- ``dropped(outgoing)``: removed from the queue without going into flight (expired, denied at
  drain, a queue overflow policy, a removed subscription); ``dropped_many(outgoings)`` for
  several at once (a revocation that judged the whole queue);
- ``sent(pid, outgoing)``: put into ``session.inflight`` under ``pid`` (from the queue, or
  directly); call it before the connection's output is flushed, which is always true when it
  follows ``send_publish`` in the same synchronous code;
- ``released(pid)``: QoS 2 PUBREC received, PUBREL about to go;
- ``completed(pid)``: removed from ``session.inflight``;
- ``qos2_received(pid)`` / ``qos2_released(pid)``: incoming QoS 2 packet id held / released;
- ``changed()``: subscriptions, will or expiry changed (the session record is saved again).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .message import Outgoing


class SessionJournal(Protocol):
    def queued(self, outgoing: Outgoing) -> None: ...

    def dropped(self, outgoing: Outgoing) -> None: ...

    def dropped_many(self, outgoings: list[Outgoing]) -> None: ...

    def sent(self, pid: int, outgoing: Outgoing) -> None: ...

    def released(self, pid: int) -> None: ...

    def completed(self, pid: int) -> None: ...

    def qos2_received(self, pid: int) -> None: ...

    def qos2_released(self, pid: int) -> None: ...

    def changed(self) -> None: ...


class _NoJournal:
    """The journal of a session that ends with its connection: nothing is stored."""

    __slots__ = ()

    def queued(self, outgoing: Outgoing) -> None:
        pass

    def dropped(self, outgoing: Outgoing) -> None:
        pass

    def dropped_many(self, outgoings: list[Outgoing]) -> None:
        pass

    def sent(self, pid: int, outgoing: Outgoing) -> None:
        pass

    def released(self, pid: int) -> None:
        pass

    def completed(self, pid: int) -> None:
        pass

    def qos2_received(self, pid: int) -> None:
        pass

    def qos2_released(self, pid: int) -> None:
        pass

    def changed(self) -> None:
        pass


NO_JOURNAL: SessionJournal = _NoJournal()
