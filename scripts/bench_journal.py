#!/usr/bin/env python3
"""The persistence cost of one reference, without sockets (issue 17): how many µs the journal
calls of one QoS 1 delivery to a persistent session cost, writing the turns' records included.

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_journal.py [--messages 20000]
        [--subscribers 10] [--repeat 5] [--per-turn 16] [--part all|no-write|harness]

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

from edge_broker.broker.journal import NO_JOURNAL, SessionJournal
from edge_broker.broker.message import make_message
from edge_broker.broker.persist_hooks import PersistentJournal
from edge_broker.broker.persistence import REFS, Persistence
from edge_broker.broker.session import Session, new_outgoing
from edge_broker.identity import DEFAULT_TENANT, Identity
from edge_broker.mqtt.packets import NO_PROPERTIES
from edge_broker.store.keyed import KeyedLog


async def run(directory: Path, messages: int, subscribers: int, per_turn: int, part: str) -> float:
    keyed = KeyedLog.open(directory / "broker.log", fsync="none", compact_min_bytes=1 << 40)
    store = Persistence(keyed)
    keyed.hold(REFS, store)
    store._recording = True  # what Persistence.recover ends with, on an empty store
    if part == "no-write":  # the records are made (Persistence._take) but not encoded
        store.keyed.write_flat = lambda ops, count: 0  # type: ignore[method-assign]
    journals: list[SessionJournal] = [
        NO_JOURNAL
        if part == "harness"  # this loop alone, to subtract
        else PersistentJournal(
            store, Session(f"sub{i}", DEFAULT_TENANT, Identity(f"sub{i}", "anonymous"), 4)
        )
        for i in range(subscribers)
    ]
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
        choices=("all", "no-write", "harness"),
        default="all",
        help="no-write: without encoding and writing the records; harness: no store at all",
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
