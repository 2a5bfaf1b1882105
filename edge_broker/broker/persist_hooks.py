"""Containers that record their changes for persistence (issue 8).

A persistent session (expiry > 0, or 3.x clean session 0) gets these in place of its plain
``deque`` / ``OrderedDict`` / ``dict`` / ``set``: the broker code that queues, sends and
acknowledges messages (delivery.py, connection.py, handle_*.py) stays unchanged and every change
becomes an op in the :class:`~edge_broker.broker.persistence.Persistence` buffer, committed as one
record per publish (and group-committed across clients). Clean sessions keep the plain
containers and cost nothing.

Each queued or in-flight QoS 1/2 message has a sequence number: table ``m`` holds the message
under it, table ``f`` its packet id and QoS 2 ``released`` flag while it is in flight. A message
moving from the queue into flight keeps its number (the pop parks it until the in-flight insert
claims it; an unclaimed one is deleted at the next commit).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .session import Inflight, Outgoing, Session, SubscriptionEntry

if TYPE_CHECKING:
    from .persistence import Persistence

_MISSING: Any = object()


class PersistentQueue(deque[Outgoing]):
    """The session queue; ``seqs`` runs parallel to the messages."""

    def __init__(self, store: Persistence, client_id: str, items: Iterable[Outgoing] = (),
                 seqs: Iterable[int] | None = None) -> None:
        super().__init__()
        self.store = store
        self.client_id = client_id
        self.seqs: deque[int] = deque()
        if seqs is None:
            for item in items:
                self.append(item)
        else:
            super().extend(items)
            self.seqs.extend(seqs)

    def append(self, item: Outgoing) -> None:
        super().append(item)
        self.seqs.append(self.store.put_message(self.client_id, item))

    def appendleft(self, item: Outgoing) -> None:
        super().appendleft(item)
        self.seqs.appendleft(self.store.claim_or_put(self.client_id, item))

    def extend(self, items: Iterable[Outgoing]) -> None:
        for item in items:
            self.append(item)

    def popleft(self) -> Outgoing:
        item = super().popleft()
        self.store.park(item, self.seqs.popleft())
        return item

    def pop(self, index: int = -1) -> Outgoing:
        if index != -1:
            raise IndexError("a session queue pops only at its ends")
        item = super().pop()
        self.store.park(item, self.seqs.pop())
        return item

    def clear(self) -> None:
        for seq in self.seqs:
            self.store.delete_message(seq)
        self.seqs.clear()
        super().clear()


class PersistentInflight(OrderedDict[int, Inflight]):
    """The session's in-flight window: packet id → message; ``seqs`` packet id → sequence."""

    def __init__(self, store: Persistence, client_id: str) -> None:
        super().__init__()
        self.store = store
        self.client_id = client_id
        self.seqs: dict[int, int] = {}

    def restore(self, pid: int, inflight: Inflight, seq: int) -> None:
        """Recovery: insert without recording (the records are on disk already)."""
        OrderedDict.__setitem__(self, pid, inflight)
        self.seqs[pid] = seq

    def __setitem__(self, pid: int, inflight: Inflight) -> None:
        old = self.seqs.get(pid)
        if old is not None:
            self.store.delete_message(old)
        seq = self.store.claim_or_put(self.client_id, inflight.outgoing)
        self.seqs[pid] = seq
        super().__setitem__(pid, inflight)
        self.store.put_flight(seq, pid, inflight.released)

    def __delitem__(self, pid: int) -> None:
        super().__delitem__(pid)
        seq = self.seqs.pop(pid, None)
        if seq is not None:
            self.store.delete_message(seq)

    def pop(self, pid: int, default: Any = _MISSING) -> Any:
        if pid in self:
            value = OrderedDict.__getitem__(self, pid)
            self.__delitem__(pid)
            return value
        if default is _MISSING:
            raise KeyError(pid)
        return default

    def popitem(self, last: bool = True) -> tuple[int, Inflight]:
        pid = next(reversed(self)) if last else next(iter(self))
        return pid, self.pop(pid)

    def clear(self) -> None:
        for seq in self.seqs.values():
            self.store.delete_message(seq)
        self.seqs.clear()
        super().clear()

    def released(self, pid: int) -> None:
        """QoS 2: PUBREC came, PUBREL went out (resend PUBREL, not PUBLISH, after a restart)."""
        seq = self.seqs.get(pid)
        if seq is not None:
            self.store.put_flight(seq, pid, True)


class PersistentSubscriptions(dict[str, SubscriptionEntry]):
    """The session's subscriptions; any change re-saves the session record."""

    def __init__(self, store: Persistence, session: Session,
                 items: dict[str, SubscriptionEntry]) -> None:
        super().__init__(items)
        self.store = store
        self.session = session

    def __setitem__(self, key: str, value: SubscriptionEntry) -> None:
        super().__setitem__(key, value)
        self.store.session_changed(self.session)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.store.session_changed(self.session)

    def pop(self, key: str, default: Any = _MISSING) -> Any:
        if key in self:
            value = dict.__getitem__(self, key)
            self.__delitem__(key)
            return value
        if default is _MISSING:
            raise KeyError(key)
        return default

    def clear(self) -> None:
        super().clear()
        self.store.session_changed(self.session)


class PersistentQos2(set[int]):
    """Packet ids of incoming QoS 2 messages awaiting PUBREL (exactly once across restarts)."""

    def __init__(self, store: Persistence, client_id: str, items: Iterable[int] = (),
                 record: bool = True) -> None:
        super().__init__()
        self.store = store
        self.client_id = client_id
        for pid in items:
            super().add(pid)
            if record:
                store.put_qos2(client_id, pid)

    def add(self, pid: int) -> None:
        if pid not in self:
            super().add(pid)
            self.store.put_qos2(self.client_id, pid)

    def discard(self, pid: object) -> None:
        if isinstance(pid, int) and pid in self:
            super().discard(pid)
            self.store.delete_qos2(self.client_id, pid)

    def remove(self, pid: object) -> None:
        if pid not in self:
            raise KeyError(pid)
        self.discard(pid)

    def clear(self) -> None:
        for pid in list(self):
            self.discard(pid)
