"""The journal of a persistent session (issue 17; the interface is broker/journal.py).

Each queued or in-flight QoS 1/2 message of a persistent session is a *reference* (table
``ref``: reference number → ``[session key, message id, qos, retain, packet id or None,
released, subscription ids]``) to a message stored once (table ``msg``) however many sessions
hold it; the message is deleted with its last reference (:class:`~.persistence.Persistence`
counts them). A message moving from the queue into flight keeps its reference, its packet id
set in place, so in-flight and queued messages keep their order (reference numbers grow with
time). The journal's ``waiting`` and ``flight`` are the session's references: the store's
index keeps no copy (``KeyedLog.hold``), and the ops of a turn are batched per kind
(``Persistence._take``).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from ..session import Inflight, Outgoing, Session
from .tables import Ref

if TYPE_CHECKING:
    from ..message import Message


class RefStore(Protocol):
    """What a journal writes to: :class:`~.persistence.Persistence`, which builds the journals
    (named here so that the two modules do not import each other). ``sent``, on the
    per-delivery path, reads ``_batch_no`` and ``_new_refs`` itself rather than call."""

    _batch_no: int
    _new_refs: list[Any]

    def put_ref(self, cid: str, outgoing: Outgoing, pid: int | None = None) -> Ref: ...
    def ref_sent(self, ref: Ref, pid: int) -> None: ...
    def ref_released(self, seq: int) -> None: ...
    def delete_ref(self, ref: Ref) -> None: ...
    def put_qos2(self, client_id: str, pid: int) -> None: ...
    def delete_qos2(self, client_id: str, pid: int) -> None: ...
    def session_changed(self, session: Session) -> None: ...
    def _hold(self, message: Message, message_id: int) -> list[Any]: ...


class PersistentJournal:
    """Records the changes of one persistent session as ops of ``store``; its ``waiting`` and
    ``flight`` are the session's reference rows (the store's index keeps no copy of them:
    compaction reads them here, ``Persistence.held_rows``)."""

    __slots__ = ("store", "session", "key", "waiting", "flight", "released_pids")

    def __init__(self, store: RefStore, session: Session) -> None:
        self.store = store
        self.session = session
        self.key = session.key
        # The Refs of the queued messages in the order of ``session.queue`` (queued() appends
        # as the queue does; the queue leaves from its head, so sent() and dropped() find
        # the message first in the common case, with no hashing and no id()).
        self.waiting: deque[Ref] = deque()
        self.flight: dict[int, Ref] = {}  # packet id -> Ref (the same tuple as while queued)
        self.released_pids: set[int] = set()  # QoS 2 in flight with PUBREC received

    def queued(self, outgoing: Outgoing) -> None:
        self.waiting.append(self.store.put_ref(self.key, outgoing))

    def dropped(self, outgoing: Outgoing) -> None:
        ref = self._unqueue(outgoing)
        if ref is not None:
            self.store.delete_ref(ref)

    def dropped_many(self, outgoings: list[Outgoing]) -> None:
        """``dropped`` for several queued messages at once (a revocation judging the whole
        queue, broker/rejudge.py): one pass over the queue's references."""
        if not outgoings:
            return
        gone = {id(outgoing) for outgoing in outgoings}
        kept: deque[Ref] = deque()
        delete_ref = self.store.delete_ref
        for ref in self.waiting:
            if id(ref[0]) in gone:
                delete_ref(ref)
            else:
                kept.append(ref)
        self.waiting = kept

    def _unqueue(self, outgoing: Outgoing) -> Ref | None:
        """The Ref of ``outgoing`` taken out of ``waiting``: at the head as a rule, anywhere
        else by looking (rare); None when it was never queued (sent directly)."""
        waiting = self.waiting
        if waiting and waiting[0][0] is outgoing:
            return waiting.popleft()
        for i, ref in enumerate(waiting):
            if ref[0] is outgoing:
                del waiting[i]
                return ref
        return None

    def sent(self, pid: int, outgoing: Outgoing) -> None:
        old = self.flight.pop(pid, None)
        if old is not None:  # not expected: an id is free before it is given again
            self.released_pids.discard(pid)
            self.store.delete_ref(old)
        waiting = self.waiting
        if waiting and waiting[0][0] is outgoing:  # the queue's head went into flight
            ref: Ref | None = waiting.popleft()  # (_unqueue's first case, without its call)
        else:
            ref = self._unqueue(outgoing)
        if ref is not None:
            store = self.store
            if ref[3] == store._batch_no:  # queued in this turn: Persistence.ref_sent, inlined
                store._new_refs[ref[4]] = pid
            else:
                store.ref_sent(ref, pid)
            self.flight[pid] = ref
        else:
            self.flight[pid] = self.store.put_ref(self.key, outgoing, pid)

    def released(self, pid: int) -> None:
        ref = self.flight.get(pid)
        if ref is not None and pid in self.session.inflight:
            self.released_pids.add(pid)
            self.store.ref_released(ref[1])

    def completed(self, pid: int) -> None:
        ref = self.flight.pop(pid, None)
        if ref is not None:
            if self.released_pids:
                self.released_pids.discard(pid)
            self.store.delete_ref(ref)

    def qos2_received(self, pid: int) -> None:
        self.store.put_qos2(self.key, pid)

    def qos2_released(self, pid: int) -> None:
        self.store.delete_qos2(self.key, pid)

    def changed(self) -> None:
        self.store.session_changed(self.session)

    def references(self) -> list[Ref]:
        return [*self.waiting, *self.flight.values()]


def restore(
    store: RefStore,
    session: Session,
    seq: int,
    outgoing: Outgoing,
    pid: int | None,
    released: bool,
    message_id: int,
) -> int | None:
    """Recovery and migration: reference ``seq`` back in flight under ``pid`` (the packet id the
    client saw) or in the queue; returns the packet id it is in flight under."""
    journal = session.journal
    assert isinstance(journal, PersistentJournal)
    ref = (outgoing, seq, store._hold(outgoing.message, message_id), -1, 0)
    if pid is not None and 0 < pid <= 65535 and pid not in session.inflight:
        item = Inflight(outgoing)
        item.released = released
        session.open_inflight()[pid] = item
        journal.flight[pid] = ref
        if released:
            journal.released_pids.add(pid)
        # The counter goes on after the newest id in flight (reference order is
        # assignment order), never back to one the client may still hold.
        session.next_packet_id = pid % 65535 + 1
        return pid
    session.open_queue().append(outgoing)
    session.queued_bytes += outgoing.message.size
    journal.waiting.append(ref)
    return None
