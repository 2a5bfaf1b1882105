#!/usr/bin/env python3
"""The persistence cost of one reference, without sockets (issue 17): how many µs the journal
calls of one QoS 1 delivery to a persistent session cost, writing the turns' records included.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_journal.py [--messages 20000]
        [--subscribers 10] [--repeat 5] [--per-turn 16]
        [--part all|no-write|harness|floor|floor-no-write]

``--per-turn`` messages are queued to every subscriber's journal in one turn, go into flight in
the next turn and are completed in the turn after (the order the broker sees under load: a full
window, drained on PUBACK), each turn ended by ``Persistence.before_send`` as the broker does
before it writes to a socket. The store is a real log in a temporary directory with durability
``none``. The figure is the best of ``--repeat`` runs of process CPU time, so other load on the
machine counts as little as it can; bench_persistence.py measures the whole broker.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from edge_broker.broker.journal import NO_JOURNAL
from edge_broker.broker.message import Message, make_message
from edge_broker.broker.persist.codec import encode_message, now_pair
from edge_broker.broker.persist.hooks import PersistentJournal
from edge_broker.broker.persist.persistence import Persistence
from edge_broker.broker.persist.tables import REFS
from edge_broker.broker.session import Outgoing, Session, new_outgoing
from edge_broker.identity import DEFAULT_TENANT, Identity
from edge_broker.mqtt.packets import NO_PROPERTIES
from edge_broker.store.keyed import RAW_DELETE, RAW_PUT, KeyedLog


class Floor:
    """``--part floor``: the least any per-reference record costs in this interpreter. Each
    message stored once (encoded as the store does) with a reference count; per reference one
    append when queued (message id, session number), one when sent (session number, packet
    id), one when completed (the same), a dict entry while in flight, and the turn's three lists
    written as one record. No recovery, compaction, releases or drops: a lower bound, not a
    design (docs/persistence.md, "Cost")."""

    def __init__(self, keyed: KeyedLog) -> None:
        self.keyed = keyed
        self.fan: list[int] = []
        self.moved: list[int] = []
        self.acked: list[int] = []
        self.ops: list[object] = []
        self.count = 0
        self.entries: dict[int, list[object]] = {}
        self.last: list[object] = [0, 0, None]
        self.seq = 0

    def new_message(self, message: Message) -> list[object]:
        self.seq += 1
        entry = self.entries[id(message)] = self.last = [self.seq, 0, message]
        now_mono, now_wall = now_pair(time.monotonic)
        self.ops += (RAW_PUT, "fmsg", self.seq, encode_message(message, now_mono, now_wall))
        self.count += 1
        return entry

    def gone(self, entry: list[object]) -> None:
        del self.entries[id(entry[2])]
        self.ops += (RAW_DELETE, "fmsg", entry[0])
        self.count += 1

    def before_send(self) -> None:
        if self.fan or self.moved or self.acked or self.ops:
            self.ops += (RAW_PUT, "floor", 0, [self.fan, self.moved, self.acked])
            self.keyed.write_flat(self.ops, self.count + 1)
            self.fan, self.moved, self.acked, self.ops, self.count = [], [], [], [], 0

    def __len__(self) -> int:
        return len(self.entries)

    async def aclose(self) -> None:
        await self.keyed.aclose()


class FloorJournal:
    __slots__ = ("floor", "sno", "flight")

    def __init__(self, floor: Floor, sno: int) -> None:
        self.floor = floor
        self.sno = sno
        self.flight: dict[int, list[object]] = {}

    def queued(self, outgoing: Outgoing) -> None:
        floor = self.floor
        entry = floor.last
        if entry[2] is not outgoing.message:
            entry = floor.new_message(outgoing.message)
        entry[1] += 1  # type: ignore[operator]
        floor.fan += (entry[0], self.sno)  # type: ignore[arg-type]

    def sent(self, pid: int, outgoing: Outgoing) -> None:
        floor = self.floor
        message = outgoing.message
        entry = floor.last if floor.last[2] is message else floor.entries[id(message)]
        self.flight[pid] = entry
        floor.moved += (self.sno, pid)

    def completed(self, pid: int) -> None:
        entry = self.flight.pop(pid)
        floor = self.floor
        floor.acked += (self.sno, pid)
        entry[1] -= 1  # type: ignore[operator]
        if not entry[1]:
            floor.gone(entry)


async def run(directory: Path, messages: int, subscribers: int, per_turn: int, part: str) -> float:
    keyed = KeyedLog.open(directory / "broker.log", fsync="none", compact_min_bytes=1 << 40)
    store = Persistence(keyed)
    keyed.hold(REFS, store)
    store._recording = True  # what recovery.recover ends with, on an empty store
    if part.endswith("no-write"):  # the records are made (Persistence._take) but not encoded
        store.keyed.write_flat = lambda ops, count: 0  # type: ignore[method-assign]
    journals: list[Any] = [
        NO_JOURNAL
        if part == "harness"  # this loop alone, to subtract
        else PersistentJournal(
            store, Session(f"sub{i}", DEFAULT_TENANT, Identity(f"sub{i}", "anonymous"), 4)
        )
        for i in range(subscribers)
    ]
    if part.startswith("floor"):
        store = Floor(keyed)  # type: ignore[assignment]
        journals = [FloorJournal(store, i) for i in range(subscribers)]  # type: ignore[arg-type]
    payload = b"x" * 64
    started = time.process_time()
    for first in range(0, messages, per_turn):
        sent = []
        for n in range(first, min(first + per_turn, messages)):
            message = make_message("bench/t", payload, 1, False, NO_PROPERTIES, "pub")
            pid = n % 65535 + 1
            for journal in journals:
                outgoing = new_outgoing(message, 1, False, ())
                journal.queued(outgoing)
                sent.append((journal, pid, outgoing))
        store.before_send()
        for journal, pid, outgoing in sent:
            journal.sent(pid, outgoing)
        store.before_send()
        for journal, pid, _ in sent:
            journal.completed(pid)
        store.before_send()
    elapsed = time.process_time() - started
    if part != "harness" and len(store):  # each reference was completed: none is left
        raise SystemExit(f"bench_journal: {len(store)} references still held after the run")
    await store.aclose()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--subscribers", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--part",
        choices=("all", "no-write", "harness", "floor", "floor-no-write"),
        default="all",
        help="no-write: without encoding and writing the records; harness: no store at all; "
        "floor: the least a per-reference record costs (class Floor), floor-no-write: without "
        "encoding and writing its records",
    )
    parser.add_argument("--per-turn", type=int, default=16, help="messages per event-loop turn")
    args = parser.parse_args()
    best = float("inf")
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-journal-") as tmp:
            best = min(
                best,
                asyncio.run(
                    run(Path(tmp), args.messages, args.subscribers, args.per_turn, args.part)
                ),
            )
    per_message = best / args.messages * 1e6
    print(
        f"{args.subscribers} subscriber(s): {per_message:.2f} µs per message, "
        f"{per_message / args.subscribers:.2f} µs per reference (queued, sent, completed; "
        f"best of {args.repeat}, {args.messages} messages, part {args.part})"
    )


if __name__ == "__main__":
    main()
