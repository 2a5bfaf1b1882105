"""The outbound queue on disk: ``<state_dir>/bridge-<name>.log``, one append-only log per bridge
(``edge_broker.store.Log``), self-contained so the broker's own session store can change freely.

Records (CBOR lists):

- ``["m", seq, topic, payload, qos, retain, props]``: a message queued for the remote;
- ``["p", seq, pid]``: it was sent under packet id ``pid`` (resent with DUP after a restart);
- ``["r", seq]``: the remote answered PUBREC (a restart resends PUBREL; if the crash came
  before this record was written, the PUBLISH again with DUP and the same packet id, which the
  remote recognises as the one it holds: still once);
- ``["d", seq]``: done (acknowledged, sent at QoS 0, or dropped by the overflow policy);
- ``["b", [record, ...]]``: the records of one event-loop turn, written as one frame.

Everything queued during one event-loop turn is written as one ``b`` record at the turn's end,
on the event loop (``Log.write``: one ``write`` system call, no thread, no task), and before any
byte goes to a client socket (the broker's write-ahead hook, ``Persistence.before_send``): the
local publisher's PUBACK never leaves before its message's ``m`` record is in the log, so kill -9
cannot lose an acknowledged bridged message. With ``durability = "sync"`` that PUBACK also
waits for the fsync (:meth:`BridgeStore.take_pending`; concurrent turns share one fsync), so a
power cut cannot either. ``p``/``r``/``d`` ride along without their own fsync: losing one after a
crash means a message is sent again (at least once), never lost.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ..store import Log, StoreError
from .queue import Entry

log = logging.getLogger("edge_broker.bridge")

BATCH_BYTES = 1 << 20  # a turn's records beyond this are split over several frames
M_FIELDS = 7  # "m", seq, topic, payload, qos, retain, props


class _Live:
    """The reducer: live messages by sequence number, for recovery and compaction.

    At open the log replays each record (:meth:`apply`). At run time a turn's records are not
    read back: :meth:`written` takes the queue's own :class:`Entry` objects the store kept for
    the turn (keeping the decoded records would hold every topic and payload twice). Only
    messages replayed at open are built from records. Compaction rebuilds the records from
    the entries."""

    def __init__(self) -> None:
        self.messages: dict[int, list[Any]] = {}  # seq → [Entry, frame bytes]
        self.bytes = 0
        self.max_seq = 0

    def apply(self, record: Any, size: int) -> None:
        if not isinstance(record, list) or not record:
            raise StoreError(f"not a bridge queue record: {record!r:.60}")
        kind = record[0]
        if kind == "b":
            items = record[1]
            share = size // max(1, len(items))
            for item in items:
                self.apply(item, share)
            return
        seq = record[1]
        if kind == "m":
            if len(record) != M_FIELDS:
                raise StoreError("bridge message record of the wrong length")
            entry = Entry(seq, record[2], record[3], record[4], record[5], record[6])
            self.messages[seq] = [entry, size]
            self.bytes += size
            if seq > self.max_seq:
                self.max_seq = seq
            return
        live = self.messages.get(seq)
        if live is None:
            return
        if kind == "p":
            live[0].pid = record[2]
        elif kind == "r":
            live[0].released = True
        elif kind == "d":
            del self.messages[seq]
            self.bytes -= live[1]
        else:
            raise StoreError(f"unknown bridge record kind {kind!r}")

    def written(self, count: int, queued: list[Entry], done: list[int], size: int) -> None:
        """What :meth:`apply` makes of a turn's ``b`` record of ``count`` records, from the
        store's own lists: the ``m`` records' entries (``queued``) and the sequence numbers of
        the ``d`` records (``done``); ``p`` and ``r`` records changed those entries already
        (the queue's own objects). One pass each, no record read again."""
        share = size // max(1, count)
        messages = self.messages
        for entry in queued:
            messages[entry.seq] = [entry, share]
        if queued:
            self.bytes += share * len(queued)
            last = queued[-1].seq  # sequence numbers grow: the last is the largest
            if last > self.max_seq:
                self.max_seq = last
        for seq in done:
            live = messages.pop(seq, None)
            if live is not None:
                self.bytes -= live[1]

    def live_bytes(self) -> int:
        return max(0, self.bytes)

    def live_records(self) -> Iterable[Any]:
        records: list[Any] = []
        for seq, (entry, _) in list(self.messages.items()):
            m = ["m", seq, entry.topic, entry.payload, entry.qos, entry.retain, entry.props]
            pid, released = entry.pid, entry.released
            if pid is None and not released:
                records.append(m)
                continue
            batch = [m]
            if pid is not None:
                batch.append(["p", seq, pid])
            if released:
                batch.append(["r", seq])
            records.append(["b", batch])
        return records

    def compacted(self, sizes: Sequence[int]) -> None:
        total = 0
        for live, size in zip(list(self.messages.values()), sizes, strict=False):
            live[1] = size
            total += size
        self.bytes = total

    def entries(self) -> list[Entry]:
        return [self.messages[seq][0] for seq in sorted(self.messages)]


def queue_path(state_dir: Path, name: str) -> Path:
    """The queue log of bridge ``name`` in the broker's state directory."""
    return state_dir / f"bridge-{name}.log"


def read_queue(path: str) -> Log:
    """The queue log opened read-only and replayed (``edge-broker state check``: a bridge log
    is judged by its own reducer, not as a keyed log)."""
    return Log.open(path, _Live(), readonly=True)


class BridgeStore:
    """The durable queue log of one bridge (module docstring)."""

    durable = True

    def __init__(self, path: Path, fsync: str | float) -> None:
        self._live = _Live()
        self.log = Log.open(path, self._live, fsync=fsync)
        if not self.log.report.clean:
            log.warning(
                "bridge queue %s recovered: %s",
                path,
                self.log.report,
                extra={"event": "bridge_store_recovered", "path": str(path)},
            )
        self.last_error: str | None = None
        self._fsync_each = self.log.durability.mode == "always"
        # True once the broker writes this log before its socket writes (Bridges.open): then
        # a PUBACK needs no future unless it waits for an fsync
        self.write_ahead = False
        self._batch: list[Any] = []  # this turn's records, in order
        self._queued: list[Entry] = []  # the entries of its "m" records
        self._done: list[int] = []  # the sequence numbers of its "d" records
        self._batch_bytes = 0
        self._scheduled = False
        self._turn: asyncio.Future[None] | None = None  # what this turn's PUBACKs wait for
        self._owed: asyncio.Future[None] | None = None  # for the next take_pending()

    def recovered(self) -> tuple[list[Entry], int]:
        """The queued messages in order, and the next sequence number."""
        return self._live.entries(), self._live.max_seq + 1

    def _owe(self) -> None:
        """A QoS 1/2 message was queued: the local PUBACK waits for this turn's write (or
        its fsync)."""
        turn = self._turn
        if turn is None:
            turn = self._turn = asyncio.get_running_loop().create_future()
        self._owed = turn

    def queued(self, entry: Entry) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        self._batch.append(
            ["m", entry.seq, entry.topic, entry.payload, entry.qos, entry.retain, entry.props]
        )
        self._queued.append(entry)
        if entry.qos and (self._fsync_each or not self.write_ahead):
            self._owe()
        self._batch_bytes += entry.size
        if self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def flying(self, entry: Entry) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        self._batch.append(["p", entry.seq, entry.pid])
        self._batch_bytes += 16
        if self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def released(self, entry: Entry) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        self._batch.append(["r", entry.seq])
        self._batch_bytes += 8
        if self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def done(self, entry: Entry) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self.flush)
        self._batch.append(["d", entry.seq])
        self._done.append(entry.seq)
        self._batch_bytes += 8
        if self._batch_bytes >= BATCH_BYTES:
            self.flush()

    def take_pending(self) -> asyncio.Future[None] | None:
        """What a local PUBACK must wait for: the fsync (``sync``) or, when the broker does not
        write this log ahead of its sockets, the write of the QoS 1/2 messages queued since the
        last call (None: nothing to wait for)."""
        owed, self._owed = self._owed, None
        return owed

    def flush(self) -> None:
        """Write what this turn queued as one record (the end of the turn, or before the
        broker's socket writes, whichever comes first)."""
        self._scheduled = False
        batch = self._batch
        if not batch:
            return
        queued, done, turn = self._queued, self._done, self._turn
        self._batch, self._queued, self._done, self._batch_bytes, self._turn = [], [], [], 0, None
        try:
            ticket = self.log.write(
                ["b", batch], partial(self._live.written, len(batch), queued, done)
            )
        except StoreError as exc:  # never written: the reducer did not take them
            if self.last_error is None:
                log.error(
                    "bridge queue write failed: %s", exc, extra={"event": "bridge_store_error"}
                )
            self.last_error = str(exc)
            if turn is not None:
                turn.set_exception(exc)
                turn.exception()  # retrieved here: nobody may be waiting for it
            return
        self.last_error = None
        if turn is None:
            return
        synced = self.log.synced(ticket) if self._fsync_each else None
        if synced is None:
            turn.set_result(None)
        else:
            synced.add_done_callback(partial(_settle, turn))

    async def aclose(self) -> None:
        self.flush()
        await self.log.aclose()
        stats = self.log.stats()
        info = {"appends": stats.appends, "fsyncs": stats.fsyncs, "path": str(self.log.path)}
        log.info(  # scripts/bench_bridge.py reads it: messages per fsync
            "bridge queue log %(path)s closed: %(appends)d appends, %(fsyncs)d fsyncs",
            info,
            extra={"event": "bridge_store_closed", **info},
        )


def _settle(turn: asyncio.Future[None], synced: asyncio.Future[None]) -> None:
    """The fsync a turn's PUBACKs waited for is done (or failed)."""
    if turn.done():
        return
    exc = None if synced.cancelled() else synced.exception()
    if exc is not None:
        turn.set_exception(exc)
        turn.exception()
    else:
        turn.set_result(None)


class MemoryStore:
    """Persistence off: the queue lives only in memory (bounded by the queue's limits)."""

    durable = False
    last_error: str | None = None

    def recovered(self) -> tuple[list[Entry], int]:
        return [], 1

    def queued(self, entry: Entry) -> None:
        pass

    def flying(self, entry: Entry) -> None:
        pass

    def released(self, entry: Entry) -> None:
        pass

    def done(self, entry: Entry) -> None:
        pass

    def take_pending(self) -> None:
        return None

    async def aclose(self) -> None:
        pass
