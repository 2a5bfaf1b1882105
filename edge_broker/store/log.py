"""The append-only record log: CBOR records, group commit, durability policy, compaction.

Issue 6 (claim store: "a PUBACK 0x00 is sent only once the claim is durable") and issue 8
(retained messages and sessions). A record is any CBOR-encodable value; what it means is the
``Reducer``'s business: the reducer folds every record, in log order, into the caller's state
(at open and after every successful append) and, for compaction, says which records are live.

Group commit: ``await log.append(record)`` queues the encoded frame; one flusher task per log
takes everything queued, writes it with one ``pwrite`` and one fdatasync in the log's own worker
thread (the event loop never blocks on the disk, and password hashing or other work in the
default executor can never delay a PUBACK), applies the records to the reducer and resolves every
waiting future. While one batch is being fsynced the next one accumulates, so N concurrent
appends cost far fewer than N fsyncs. Appends are applied in the order they were queued.

Compaction starts when dead bytes exceed both ``compact_ratio`` of the file and
``compact_min_bytes``. From the async API it runs beside the appends: under the lock, on the
event loop right after the write that made it due, it takes a snapshot of the live records and
the file size (milliseconds; the loop thread, so a reducer whose owner changes state there reads
it consistently: KeyedLog.hold), then writes and fsyncs the new
file in another thread while appends continue on the old one, and under the lock again copies
the bytes appended meanwhile, fsyncs, renames and fsyncs the directory. Appends wait only for
that last step. The synchronous API and ``compact()`` do the whole compaction under the lock.

The queue of waiting appends is not bounded here: the broker bounds it through MQTT flow
control (receive maximum, inflight limits) and the claim throttles. Use one event loop per log
(the broker's). The synchronous API may be mixed in: every write
takes the same lock, so records reach the file and the reducer in one order.
"""

from __future__ import annotations

import asyncio
import errno
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .durability import Durability
from .errors import StoreError
from .frame import FRAME_OVERHEAD, HEADER_SIZE, MAX_PAYLOAD_LIMIT, Frame, encode_frame
from .health import LogStats, StoreHealth
from .lazy_module import LazyModule
from .logfile import LogFile, RecoveryReport

if TYPE_CHECKING:
    import cbor2
else:  # imported by the first record written or read (lazy_module.py)
    cbor2 = LazyModule("cbor2", globals())

T = TypeVar("T")

DEFAULT_MAX_RECORD_SIZE = 4 << 20
_MAX_BATCH_BYTES = 4 << 20


class Reducer(Protocol):
    """The caller's state, rebuilt from the log. Called with the log's lock held."""

    def apply(self, record: Any, size: int) -> None:
        """Fold one record (its frame is ``size`` bytes). Raise ``StoreError`` to reject it.

        Rejection is for recovery (a damaged or foreign record); appended records are applied
        after they were written, so append only records this method accepts."""

    def live_bytes(self) -> int:
        """Bytes of frames that still matter (the rest is dead and compaction drops it)."""

    def live_records(self) -> Iterable[Any]:
        """Records that rebuild the current state from nothing, for compaction: a snapshot
        taken now, under the lock (on the event loop for a compaction beside appends), and
        consumed later outside it while newer records are applied (so it must not read the
        live state, nor share mutable objects with it)."""

    def compacted(self, sizes: Sequence[int]) -> None:
        """A compaction wrote the last ``live_records()`` (then the records appended since):
        the frame size of each of them, in order."""


@dataclass(frozen=True, slots=True)
class _Pending:
    frame: bytes
    future: asyncio.Future[None]
    durable: bool


class Log:
    """An open record log. Build it with :meth:`open`; one writer per file (``.lock``)."""

    def __init__(
        self,
        file: LogFile,
        report: RecoveryReport,
        reducer: Reducer,
        durability: Durability,
        max_record_size: int,
        compact_ratio: float,
        compact_min_bytes: int,
    ) -> None:
        self.report = report
        self.durability = durability
        self.max_record_size = max_record_size
        self.compact_ratio = compact_ratio
        self.compact_min_bytes = compact_min_bytes
        self._file = file
        self._reducer = reducer
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._flusher: asyncio.Task[None] | None = None
        self._sync_timer: asyncio.TimerHandle | None = None
        self._sync_task: asyncio.Task[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._appends = 0
        self._batches = 0
        self._compactions = 0
        self._compaction_error: StoreError | None = None
        self._compaction_retry_size = 0
        self._compaction_lock = threading.Lock()  # one compaction at a time; taken before _lock
        self._compaction_task: asyncio.Task[None] | None = None
        self._closed = False
        # Write-ahead API (issue 17): tickets count the records written by ``write``.
        self._written = 0
        self._synced_ticket = 0
        self._sync_waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._fsyncer: asyncio.Task[None] | None = None
        self._wa_timer: asyncio.TimerHandle | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        reducer: Reducer,
        *,
        fsync: Durability | str | float = "always",
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        readonly: bool = False,
        compact_ratio: float = 0.5,
        compact_min_bytes: int = 1 << 20,
    ) -> Log:
        """Open or create the log at ``path`` and replay it into ``reducer``.

        ``report`` on the result says what recovery kept and dropped; log it when not clean.
        """
        durability = Durability.parse(fsync)
        if not 1 <= max_record_size <= MAX_PAYLOAD_LIMIT:
            raise StoreError(f"max_record_size {max_record_size} must be 1..{MAX_PAYLOAD_LIMIT}")
        if not 0.0 < compact_ratio < 1.0:
            raise StoreError(f"compact_ratio {compact_ratio} must be between 0 and 1")

        def apply(frame: Frame) -> str | None:
            try:
                record = cbor2.loads(frame.payload)
            except (cbor2.CBORDecodeError, ValueError, TypeError) as exc:
                return f"undecodable CBOR ({exc})"
            try:
                reducer.apply(record, frame.size)
            except StoreError as exc:
                return exc.message
            return None

        # Read leniently: records stored under a larger limit than today's stay readable.
        read_limit = max(max_record_size, DEFAULT_MAX_RECORD_SIZE)
        file, report = LogFile.open(path, apply, max_payload=read_limit, readonly=readonly)
        return cls(
            file, report, reducer, durability, max_record_size, compact_ratio, compact_min_bytes
        )

    @property
    def path(self) -> str:
        return self._file.path

    @property
    def healthy(self) -> bool:
        return self._file.healthy

    @property
    def unsynced(self) -> bool:
        """True while written records wait for fsync (interval and never policies)."""
        return self._file.unsynced

    def health(self) -> StoreHealth:
        error = self._file.last_error
        compaction = self._compaction_error
        return StoreHealth(
            self.path,
            error is None,
            None if error is None else str(error),
            None if error is None else error.errno,
            None if compaction is None else str(compaction),
        )

    def stats(self) -> LogStats:
        return LogStats(
            self._appends,
            self._batches,
            self._file.fsyncs,
            self._file.bytes_written,
            self._file.write_failures,
            self._compactions,
            self._file.size,
            self._reducer.live_bytes(),
        )

    def encode(self, record: Any, *, check_size: bool = True) -> bytes:
        """The frame of ``record``; ``StoreError`` when it cannot be encoded or is too large."""
        try:
            payload = cbor2.dumps(record)
        except (cbor2.CBOREncodeError, TypeError, ValueError) as exc:
            raise StoreError(f"record cannot be encoded as CBOR: {exc}", path=self.path) from exc
        if check_size and len(payload) > self.max_record_size:
            raise StoreError(
                f"record of {len(payload)} bytes exceeds max_record_size {self.max_record_size}; "
                "store less per record or raise the store's max_record_size",
                path=self.path,
            )
        return encode_frame(payload)

    # -- synchronous API (CLI, tests, TinyDB) -------------------------------------------------

    def append_sync(self, record: Any, *, durable: bool = True) -> None:
        """Append one record and return once the durability policy is met (blocks on fsync).

        ``durable=False`` returns after the write, without fsync, whatever the policy: for
        records that may be lost on power failure (QoS 0 state); a later durable append or
        close fsyncs them too.
        """
        self._check_open()
        frame = self.encode(record)
        with self._lock:
            self._write_locked([frame], durable)
        if self.compaction_due() and self._compaction_lock.acquire(blocking=False):
            try:
                with self._lock:
                    if not self._closed:
                        self._compact_if_due_locked()
            finally:
                self._compaction_lock.release()

    def sync(self) -> None:
        """fsync now (interval and never policies); a no-op when nothing is unsynced."""
        with self._lock:
            if self._file.unsynced:
                self._file.sync()

    def compact(self) -> None:
        """Rewrite the live records to a new file now, whatever the dead-byte ratio."""
        self._check_open()
        with self._compaction_lock, self._lock:
            self._compact_locked()

    def compaction_due(self) -> bool:
        dead = self._file.size - HEADER_SIZE - self._reducer.live_bytes()
        return (
            dead >= self.compact_min_bytes
            and dead >= self.compact_ratio * (self._file.size - HEADER_SIZE)
            and self._file.size >= self._compaction_retry_size
        )

    def close(self) -> None:
        """fsync and close. Call :meth:`aclose` instead while async appends may be queued."""
        if self._closed:
            return
        if self._pending:
            raise StoreError(
                f"{len(self._pending)} appends are still queued; await aclose() instead",
                path=self.path,
            )
        self._closed = True
        if self._sync_timer is not None:
            self._sync_timer.cancel()
        with self._lock:
            self._file.close()
        if self._executor is not None:
            self._executor.shutdown(wait=False)  # idle: every job took the lock above

    # -- asynchronous API (the broker) ---------------------------------------------------------

    async def append(self, record: Any, *, durable: bool = True) -> None:
        """Append ``record``; return once the policy is met (after fsync for ``always``).

        Raises ``StoreError`` (``durable=False``) when the record was not stored: too large,
        not encodable, or the write/fsync failed (disk full, read-only, I/O error).
        ``durable=False`` asks for no fsync on this record's account (see ``append_sync``); it
        shares the batch, so it returns at the same time as durable records written with it.
        """
        self._check_open()
        frame = self.encode(record)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._pending.append(_Pending(frame, future, durable))
        flusher = self._flusher
        if flusher is None or flusher.done() or flusher.get_loop() is not loop:
            self._flusher = loop.create_task(self._flush_pending())
        await future

    async def flush(self) -> None:
        """Wait until every queued append is written, then fsync."""
        flusher = self._flusher
        if flusher is not None and not flusher.done():
            await asyncio.shield(flusher)
        if not self._closed and not self._file.readonly:
            await self._in_worker(self.sync)

    async def aclose(self) -> None:
        """Finish queued appends, fsync and close."""
        if self._closed:
            return
        await self.flush()
        if self._wa_timer is not None:
            self._wa_timer.cancel()
            self._wa_timer = None
        for task in (self._sync_task, self._compaction_task, self._fsyncer):
            if task is not None:
                await task  # a compaction finishes its work rather than leave a thread behind
        self.close()

    # -- write-ahead API (the broker's state: issue 17) ---------------------------------------

    def write(self, record: Any, applied: Callable[[int], None] | None = None) -> int:
        """Write ``record`` to the OS now, on the caller's thread, and apply it; no fsync.

        The broker calls this before any byte that depends on the record goes to a socket
        ("nothing leaves that the log does not hold"): a kill -9 of the process cannot lose it
        (the page cache survives the process). Never waits for an fsync: fsyncs run on a
        duplicate of the file descriptor outside the write lock (:meth:`synced`). Returns a
        ticket for :meth:`synced`; raises ``StoreError`` when it could not be written.

        ``applied(frame size)``, when given, folds the record into the state instead of the
        reducer reading it back from the frame: for a caller that hands over records it built
        itself and never mutates (KeyedLog.write), it saves decoding every record again.
        """
        self._check_open()
        frame = self.encode(record)
        with self._lock:
            self._check_open()
            self._file.append(frame, sync=False)
            self._batches += 1
            self._appends += 1
            if applied is not None:
                applied(len(frame))
            else:
                self._reducer.apply(cbor2.loads(memoryview(frame)[FRAME_OVERHEAD:]), len(frame))
            self._written += 1
            ticket = self._written
        if self.durability.mode == "interval" and self._wa_timer is None:
            loop = asyncio.get_running_loop()
            delay = max(0.0, self._file.last_sync + self.durability.interval - time.monotonic())
            self._wa_timer = loop.call_later(delay, self._interval_fsync)
        if self._compaction_task is None or self._compaction_task.done():
            self._start_compaction_if_due()
        return ticket

    def synced(self, ticket: int) -> asyncio.Future[None] | None:
        """A future done once every record up to ``ticket`` is fsynced (``None`` when it is
        already). Concurrent waiters share one fsync; records written while it runs wait for
        the next one (group commit). Raises ``StoreError`` through the future on failure."""
        if ticket <= self._synced_ticket:
            return None
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        self._sync_waiters.append((ticket, future))
        self._kick_fsync()
        return future

    def _kick_fsync(self) -> None:
        fsyncer = self._fsyncer
        if fsyncer is None or fsyncer.done():
            self._fsyncer = asyncio.get_running_loop().create_task(self._fsync_written())

    def _interval_fsync(self) -> None:
        self._wa_timer = None
        if not self._closed and self._written > self._synced_ticket:
            self._kick_fsync()

    async def _fsync_written(self) -> None:
        while True:
            target = self._written
            error: StoreError | None = None
            if target > self._synced_ticket and not self._closed:
                try:
                    await self._in_worker(self._fsync_beside_writes, target)
                except StoreError as exc:
                    error = exc
                else:
                    self._synced_ticket = max(self._synced_ticket, target)
            waiting: list[tuple[int, asyncio.Future[None]]] = []
            for ticket, future in self._sync_waiters:
                if future.done():
                    continue
                if ticket > target:
                    waiting.append((ticket, future))
                elif error is not None:
                    future.set_exception(
                        StoreError(error.message, path=error.path, errno=error.errno)
                    )
                else:
                    future.set_result(None)
            self._sync_waiters = waiting
            if not waiting:
                return

    def _fsync_beside_writes(self, target: int) -> None:
        """fdatasync a duplicate of the descriptor without the write lock, so writes go on
        meanwhile. A compaction switching files in between is harmless: it fsynced the new
        file with everything written before the switch."""
        with self._lock:
            self._check_open()
            fd = self._file.dup_fd()
        try:
            self._file.fsync_fd(fd)
        finally:
            os.close(fd)
        with self._lock:
            if self._written == target:
                self._file.unsynced = False

    async def _flush_pending(self) -> None:
        while self._pending:
            batch = self._take_batch()
            frames = [item.frame for item in batch]
            durable = any(item.durable for item in batch)
            try:
                outcomes = await self._in_worker(self._write_batch, frames, durable)
            except BaseException as exc:
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(
                            StoreError(f"the append was interrupted: {exc!r}", path=self.path)
                        )
                raise
            for item, outcome in zip(batch, outcomes, strict=True):
                future = item.future
                if future.done():
                    continue
                if outcome is None:
                    future.set_result(None)
                else:  # one exception object per waiter: tracebacks must not pile up
                    future.set_exception(
                        StoreError(outcome.message, path=outcome.path, errno=outcome.errno)
                    )
            self._start_compaction_if_due()
        self._schedule_interval_sync()

    async def _in_worker(self, function: Callable[..., T], *args: Any) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"store:{self.path}")
        return await asyncio.get_running_loop().run_in_executor(self._executor, function, *args)

    def _take_batch(self) -> list[_Pending]:
        size = 0
        count = 0
        for item in self._pending:
            if count and size + len(item.frame) > _MAX_BATCH_BYTES:
                break
            size += len(item.frame)
            count += 1
        batch, self._pending = self._pending[:count], self._pending[count:]
        return batch

    def _write_batch(self, frames: list[bytes], durable: bool) -> list[StoreError | None]:
        """Write a batch; the outcome of each record (``None`` when stored)."""
        with self._lock:
            try:
                self._check_open()
                self._write_locked(frames, durable)
                return [None] * len(frames)
            except StoreError as exc:
                if len(frames) == 1 or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    return [exc] * len(frames)
            # Near a full disk a smaller write may still fit: store what fits, one by one.
            outcomes: list[StoreError | None] = []
            for frame in frames:
                try:
                    self._write_locked([frame], durable)
                    outcomes.append(None)
                except StoreError as exc:
                    outcomes.append(exc)
            return outcomes

    def _start_compaction_if_due(self) -> None:
        task = self._compaction_task
        if self._closed or not self.compaction_due() or (task is not None and not task.done()):
            return
        # The snapshot is taken here, on the thread that writes, right after its write: a
        # reducer whose state lives partly with its owner (KeyedLog.hold) is read where the
        # owner changes it, never from the worker thread.
        with self._lock:
            records = self._reducer.live_records()
            tail_from, compactions = self._file.size, self._compactions
        self._compaction_task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(self._compact_beside_appends, records, tail_from, compactions)
        )

    def _compact_beside_appends(
        self, records: Iterable[Any], tail_from: int, compactions: int
    ) -> None:
        """Compaction that holds the lock only to switch files (module doc); ``records`` is
        the snapshot taken when the file was ``tail_from`` bytes long, after ``compactions``
        compactions (another one since, and it is stale: nothing is done)."""
        if not self._compaction_lock.acquire(blocking=False):
            return
        try:
            with self._lock:
                if self._closed or self._compactions != compactions:
                    return
            sizes: list[int] = []
            try:
                rewrite = self._file.start_rewrite(self._frames(records, sizes))
            except StoreError as exc:
                self._compaction_failed(exc)
                return
            with self._lock:
                if self._closed:
                    self._file.abort_rewrite(rewrite)
                    return
                try:
                    self._file.finish_rewrite(rewrite, tail_from)
                except StoreError as exc:
                    self._compaction_failed(exc)
                    return
                self._compaction_done(sizes)
        finally:
            self._compaction_lock.release()

    def _schedule_interval_sync(self) -> None:
        if self.durability.mode != "interval" or self._sync_timer is not None:
            return
        if self._closed or not self._file.unsynced:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, self._file.last_sync + self.durability.interval - time.monotonic())
        self._sync_timer = loop.call_later(delay, self._interval_sync)

    def _interval_sync(self) -> None:
        self._sync_timer = None
        if self._closed:
            return
        self._sync_task = asyncio.get_running_loop().create_task(
            self._in_worker(self._sync_quietly)
        )

    def _sync_quietly(self) -> None:
        # A failed interval fsync is reported through health(); nobody awaits it.
        try:
            if not self._closed:
                self.sync()
        except StoreError:
            pass

    # -- under the lock --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the log is closed", path=self.path)

    def _write_locked(self, frames: list[bytes], durable: bool) -> None:
        mode = self.durability.mode
        sync = (durable and mode == "always") or (
            mode == "interval"
            and time.monotonic() - self._file.last_sync >= self.durability.interval
        )
        self._file.append(b"".join(frames), sync=sync)
        self._batches += 1
        self._appends += len(frames)
        for frame in frames:
            # The reducer gets the record decoded from what was written, not the caller's
            # object: a caller mutating its value later cannot change the state, and values
            # read now equal values read after a reopen (tuples come back as lists, and so on).
            self._reducer.apply(cbor2.loads(memoryview(frame)[FRAME_OVERHEAD:]), len(frame))

    def _compact_if_due_locked(self) -> None:
        if not self.compaction_due():
            return
        try:
            self._compact_locked()
        except StoreError as exc:
            self._compaction_failed(exc)

    def _compact_locked(self) -> None:
        sizes: list[int] = []
        self._file.rewrite(self._frames(self._reducer.live_records(), sizes))
        self._compaction_done(sizes)

    def _frames(self, records: Iterable[Any], sizes: list[int]) -> Iterator[bytes]:
        # Streamed: the encoded frames never all sit in memory at once.
        for record in records:
            frame = self.encode(record, check_size=False)  # stored before: keep it
            sizes.append(len(frame))
            yield frame

    def _compaction_done(self, sizes: list[int]) -> None:
        self._reducer.compacted(sizes)
        self._compactions += 1
        self._compaction_error = None
        self._compaction_retry_size = 0

    def _compaction_failed(self, error: StoreError) -> None:
        # The appends that triggered it are stored; retry once the file grew some more.
        self._compaction_error = error
        self._compaction_retry_size = self._file.size + self.compact_min_bytes
