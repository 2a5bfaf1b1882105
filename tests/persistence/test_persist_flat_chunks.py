"""A turn whose changes exceed ``CHUNK_BYTES`` is written as several flat records, each op in
exactly one of them, in order (issue 17: the per-turn record is one flat array of ops)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from edge_broker.broker.message import Message
from edge_broker.broker.persist.persistence import Persistence
from edge_broker.broker.persist.tables import CHUNK_BYTES, flat_chunks
from edge_broker.broker.session import Outgoing
from edge_broker.store import KeyedLog
from edge_broker.store.keyed import RAW_DELETE, RAW_PUT


def test_flat_chunks_split_by_weight_and_keep_every_op_once_in_order() -> None:
    big = ["t", b"p" * (CHUNK_BYTES // 3), 1, False, None, None, None]
    flat = []
    for i in range(7):
        flat += [RAW_PUT, "msg", i, big, RAW_PUT, "ref", 100 + i, ["c", i, 1, False, None, False]]
        flat += [RAW_DELETE, "ref", 50 + i]
    chunks = list(flat_chunks(flat))
    assert len(chunks) >= 3
    assert [x for chunk, _, _ in chunks for x in chunk] == flat
    assert sum(n for _, _, n in chunks) == 21
    for chunk, weight, n in chunks:
        assert weight <= CHUNK_BYTES or n == 1
        assert chunk[0] in (RAW_PUT, RAW_DELETE)  # a chunk starts at an op


def test_a_large_turn_is_stored_as_several_records_and_replays_whole(tmp_path: Path) -> None:
    path = tmp_path / "broker.log"

    async def run() -> int:
        keyed = KeyedLog.open(path, fsync="never")
        store = Persistence(keyed)
        store._recording = True
        before = keyed.stats().appends
        for i in range(5):
            message = Message(f"big/{i}", bytes([i]) * (CHUNK_BYTES // 3), 1, False)
            store.put_ref("big-sub", Outgoing(message, 1, False, (3,)))
        store.write_ahead()
        written = keyed.stats().appends - before
        await keyed.aclose()
        return written

    assert asyncio.run(run()) >= 2  # one record would exceed CHUNK_BYTES
    again = KeyedLog.open(path, fsync="never")
    assert sorted(row[1][0] for row in again.rows("msg").items()) == [f"big/{i}" for i in range(5)]
    refs = again.rows("ref")
    assert len(refs) == 5 and all(row[0] == "big-sub" and row[6:] == [3] for row in refs.values())
    again.close()
