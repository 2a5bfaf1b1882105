"""``PersistentJournal`` keeps the queued references in queue order (a deque beside
``session.queue``): a message leaving from the head is found first, one leaving from the
middle (or never queued) is found by looking, several dropped at once in one pass; what the
store holds afterwards (its reference count and the rows compaction writes) is exactly what
is still queued or in flight, in order."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edge_broker.broker.message import make_message
from edge_broker.broker.persist.hooks import PersistentJournal
from edge_broker.broker.persist.persistence import Persistence
from edge_broker.broker.persist.tables import REFS
from edge_broker.broker.session import Outgoing, Session, new_outgoing
from edge_broker.identity import DEFAULT_TENANT, Identity
from edge_broker.mqtt.packets import NO_PROPERTIES
from edge_broker.store import KeyedLog


def _outgoings(n: int) -> list[Outgoing]:
    return [
        new_outgoing(make_message(f"t/{i}", b"x", 1, False, NO_PROPERTIES, "pub"), 1, False, ())
        for i in range(n)
    ]


def _run(tmp_path: Path, steps) -> tuple[list[str], int, list[tuple[str, int | None]]]:
    async def body() -> tuple[list[str], int, list[tuple[str, int | None]]]:
        keyed = KeyedLog.open(tmp_path / "broker.log", fsync="none")
        store = Persistence(keyed)
        keyed.hold(REFS, store)
        store._recording = True  # what recovery.recover ends with, on an empty store
        session = Session("s", DEFAULT_TENANT, Identity("s", "anonymous"), 5)
        store._tracked[session.key] = session
        journal = PersistentJournal(store, session)
        session.journal = journal
        steps(journal, store)
        store.before_send()
        held = [ref[0].message.topic for ref in journal.waiting]
        topics = {entry[0]: entry[2].topic for entry in store._messages.values()}
        rows = [(topics[row[1]], row[4]) for _, row in store.held_rows()]
        count = len(store)
        await store.aclose()
        return held, count, rows

    return asyncio.run(body())


def test_queued_messages_leave_from_the_head_middle_and_in_bulk(tmp_path: Path) -> None:
    out = _outgoings(6)

    def steps(journal: PersistentJournal, store: Persistence) -> None:
        for outgoing in out:
            journal.queued(outgoing)
        journal.sent(1, out[0])  # the head goes into flight
        journal.dropped(out[3])  # from the middle
        journal.sent(2, out[2])  # not the head either (out[1] is)
        journal.dropped_many([out[5], out[1]])  # any order, one pass

    held, count, _ = _run(tmp_path, steps)
    assert held == ["t/4"]
    assert count == 3  # t/0 and t/2 in flight, t/4 queued


def test_a_message_never_queued_goes_into_flight_with_its_own_reference(tmp_path: Path) -> None:
    out = _outgoings(3)

    def steps(journal: PersistentJournal, store: Persistence) -> None:
        journal.queued(out[0])
        journal.sent(7, out[2])  # sent directly: not in the queue
        journal.dropped(out[1])  # never queued: nothing to drop
        journal.completed(7)

    held, count, _ = _run(tmp_path, steps)
    assert (held, count) == (["t/0"], 1)


def test_compaction_rows_follow_reference_order_with_packet_ids(tmp_path: Path) -> None:
    out = _outgoings(4)

    def steps(journal: PersistentJournal, store: Persistence) -> None:
        for outgoing in out:
            journal.queued(outgoing)
        store.before_send()  # the rows are written; sent() now records packet ids apart
        journal.sent(5, out[0])
        journal.sent(6, out[1])
        journal.completed(5)

    held, count, rows = _run(tmp_path, steps)
    assert (held, count) == (["t/2", "t/3"], 3)
    assert rows == [("t/1", 6), ("t/2", None), ("t/3", None)]


def test_a_reference_to_a_message_of_an_earlier_turn_is_written_before_the_next_send(
    tmp_path: Path,
) -> None:
    """The fan-out's message (``Persistence._last``) may have been stored in an earlier turn:
    its new reference must still be written when the broker next writes to a socket."""
    out = _outgoings(1)
    again = new_outgoing(out[0].message, 1, False, ())
    pending: list[bool] = []

    def steps(journal: PersistentJournal, store: Persistence) -> None:
        journal.queued(out[0])
        store.before_send()  # turn 1 written
        journal.queued(again)  # turn 2: the same message, queued once more
        journal.sent(3, again)
        store.before_send()
        pending.append(store.pending())

    held, count, _ = _run(tmp_path, steps)
    assert pending == [False]
    assert (held, count) == (["t/0"], 2)
