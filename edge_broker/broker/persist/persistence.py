"""Persistent sessions and retained messages on the append-only log (issues 8 and 17): the
changes of a turn, written ahead of its output.

The tables and their rows are in tables.py, the start in recovery.py and migrations.py. The
session and delivery code report changes through ``session.journal`` (broker/journal.py;
hooks.py for persistent sessions); they become ops collected during an event-loop turn and
written as one record at its end, before the turn's output goes to any socket
(``Broker._flush`` → :meth:`Persistence.before_send`): nothing leaves on a socket that the log
does not already hold. Acknowledgements that depend on stored state go through
:meth:`Persistence.acknowledge`: right after that write (``none``/``interval``), or after its
fsync (``sync``: group-committed across clients, never blocking writes). When a write fails
(disk full, read-only, I/O error), the publish is refused (handle_publish.py) and ``healthy``
turns false until a probe written on the broker tick succeeds again;
``$SYS/broker/store/healthy`` shows it. docs/persistence.md has the guarantees.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from ...config import Config
from ...store import KeyedLog, Put, StoreError, StoreHealth
from ...store.damage import damage_hint, open_or_set_aside
from ...store.errors import StoreOpenError
from ...store.gcpause import fewer_young_collections
from ...store.keyed import RAW_DELETE, RAW_DELETES, RAW_PUT, RAW_ROWS, RAW_SETS
from ..awaiting import all_of
from ..journal import NO_JOURNAL
from ..message import Message
from ..session import Outgoing, Session
from .codec import (
    encode_identity,
    encode_message,
    encode_will,
    now_pair,
    to_wall,
)
from .hooks import PersistentJournal
from .tables import (
    BATCH_ROWS,
    CHUNK_BYTES,
    MESSAGES,
    META,
    QOS2,
    REF_PID,
    REF_RELEASED,
    REF_WIDTH,
    REFS,
    RETAINED,
    SESSIONS,
    Ref,
    flat_chunks,
    log_path,
    ref_row,
)

log = logging.getLogger("edge_broker.persistence")


FSYNC = {"sync": "always", "none": "never"}
# Compact once three quarters of the file are dead (the file is 4x its live records): a queue
# backlog churns references fast, and each compaction re-encodes every live record, so at 1/2
# compactions cost as much CPU as the messages themselves (bench_persistence, 10 subscribers).
COMPACT_RATIO = 0.75


_NO_ENTRY: list[Any] = [0, 0, None]  # Persistence._last before any message (matches none)


class Persistence:
    """The broker's persistent state; hangs off ``Broker.persistence``."""

    def __init__(self, keyed: KeyedLog, clock: Callable[[], float] = time.monotonic) -> None:
        self.keyed = keyed
        self.clock = clock  # Broker.clock: deadlines in memory are on it (persist_codec.py)
        self.healthy = True
        self.last_error: str | None = None
        self.refused = 0  # QoS >= 1 publishes refused because they could not be stored
        # The ops of this turn laid one after another (KeyedLog.write_flat): ``RAW_PUT, table,
        # key, value`` or ``RAW_DELETE, table, key``; ``_count`` of them.
        self._ops: list[Any] = []
        self._count = 0
        self._ops_bytes = 0
        self._dirty: dict[str, Session] = {}
        # The references of this turn, each kind one batched op at the end of the turn
        # (store/keyed.py RAW_ROWS/RAW_SETS/RAW_DELETES): per reference and step the hot path
        # appends a few scalars to a list, and the record holds one op per kind, not one per
        # subscriber. New rows: ``reference, *row`` (REF_WIDTH fields); into flight:
        # ``reference, packet id``; released (QoS 2): ``reference, True``; gone: ``reference``.
        self._new_refs: list[Any] = []
        self._batch_no = 0  # which _new_refs list is this turn's (Ref: a row not written yet)
        self._moved: list[Any] = []
        self._released: list[Any] = []
        self._gone: list[int] = []
        # id(message) -> [message id, references, message]: each stored message once.
        self._messages: dict[int, list[Any]] = {}
        self._last: list[Any] = _NO_ENTRY  # the entry put_ref used last (a fan-out's message)
        self._live_refs = 0  # references held by tracked sessions (compaction's estimate)
        self._tracked: dict[str, Session] = {}
        self._seq = 1
        self._scheduled = False
        self._recording = False
        self._probe: asyncio.Task[None] | None = None
        self._probe_bytes = 0  # the probe writes as much as the largest failed write
        self._chains: dict[object, tuple[asyncio.Task[None], int]] = {}  # see in_order
        self._groups: dict[object, _Group] = {}  # each connection's newest open group (in_order)
        self._ticket = 0  # the log ticket of the last record written
        self._acks: list[Callable[[StoreError | None], None]] = []  # waiting for this turn
        # other logs written ahead of the sockets too (durable bridge queues, bridge/store.py)
        self.write_ahead_hooks: list[Callable[[], None]] = []
        self._turn: asyncio.Future[None] | None = None  # this turn's record stored (sync)
        self._fsync_each = keyed.log.durability.mode == "always"

    @classmethod
    def open(cls, config: Config, clock: Callable[[], float] = time.monotonic) -> Persistence:
        path = log_path(config)
        settings = config.persistence
        fsync: str | float = FSYNC.get(settings.durability, settings.interval_ms / 1000.0)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreOpenError(
                f"cannot create the state directory {str(path.parent)!r}: {exc.strerror}; set "
                "[persistence] state_dir or $EDGE_BROKER_STATE_DIR to a writable directory"
            ) from exc

        def opener() -> KeyedLog:
            return KeyedLog.open(
                path,
                fsync=fsync,
                encoded_values=False,
                compact_ratio=COMPACT_RATIO,
                compact_min_bytes=settings.compact_min_bytes,
            )

        try:
            keyed = open_or_set_aside(path, opener, settings.on_damage, log)
        except (StoreError, OSError) as exc:
            raise StoreOpenError(
                f"cannot open the broker store {str(path)!r}: {exc}; check that no other broker "
                "uses it and that the directory is writable, or set [persistence] state_dir"
                + damage_hint(path)
            ) from exc
        fewer_young_collections()  # the store keeps state per queued message (gcpause.py)
        return cls(keyed, clock)

    # -- recording (called by persist_hooks and the broker) ----------------------------------

    def _add(self, op: tuple[Any, ...], size: int = 64) -> None:
        if not self._recording:
            return
        self._ops += op
        self._count += 1
        self._ops_bytes += size
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._background)

    def put_ref(self, cid: str, outgoing: Outgoing, pid: int | None = None) -> Ref:
        """A new reference of session ``cid`` to ``outgoing``'s message (stored with its
        first reference); queued, or in flight under ``pid``. The per-delivery path: a row's
        scalars appended to this turn's batched op (``_new_refs``); the subscription ids are
        one field (``None``, one id, or a list of them: no array for the common case)."""
        message = outgoing.message
        # A publish's fan-out asks for the same message once per session in a row.
        entry = self._last if message is self._last[2] else self._messages.get(id(message))
        seq = self._seq
        if entry is None:
            self._seq = seq + 2
            entry = self._messages[id(message)] = [seq + 1, 0, message]
            if self._recording:
                if message.expires_at is None:  # no deadline to convert: no clock is read
                    now_mono = now_wall = 0.0
                else:
                    now_mono, now_wall = now_pair(self.clock)
                self._ops += (
                    RAW_PUT,
                    MESSAGES,
                    seq + 1,
                    encode_message(message, now_mono, now_wall),
                )
                self._count += 1
                self._ops_bytes += message.size
        else:
            self._seq = seq + 1
        self._last = entry
        entry[1] += 1
        self._live_refs += 1
        if not self._recording:
            return (outgoing, seq, entry, -1, 0)
        rows = self._new_refs
        where = len(rows) + 1 + REF_PID  # the packet id's place, for ref_sent in this turn
        sub_ids = outgoing.sub_ids
        rows += (
            seq,
            cid,
            entry[0],
            outgoing.qos,
            outgoing.retain,
            pid,
            False,
            None if not sub_ids else sub_ids[0] if len(sub_ids) == 1 else list(sub_ids),
        )
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._background)
        return (outgoing, seq, entry, self._batch_no, where)

    def ref_sent(self, ref: Ref, pid: int) -> None:
        """The queued reference ``ref`` went into flight under ``pid``. Queued in this turn
        (the common case: queued, then drained), its row is not written yet and gets the
        packet id in place; else one pair of the turn's RAW_SETS op, not the row again (a
        queued row holds ``released`` false, and recovery rewrites any row that would not:
        :meth:`_recover_messages`)."""
        if ref[3] == self._batch_no:
            self._new_refs[ref[4]] = pid
        elif self._recording:
            self._moved += (ref[1], pid)
            if not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._background)

    def ref_released(self, seq: int) -> None:
        """QoS 2: the reference ``seq`` in flight got its PUBREC (PUBREL goes next)."""
        if self._recording:
            self._released += (seq, True)
            self._schedule()

    def delete_ref(self, ref: Ref) -> None:
        """The reference ``ref`` is gone; its message too when it was the last one (the
        message row's delete goes first in the record: a crash between two chunks of a large
        record leaves references to a missing message, which recovery drops)."""
        self._live_refs -= 1
        if self._recording:
            self._gone.append(ref[1])
            if not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._background)
        entry = ref[2]
        entry[1] -= 1
        if entry[1] <= 0 and self._messages.get(id(entry[2])) is entry:
            del self._messages[id(entry[2])]
            if self._last is entry:
                self._last = _NO_ENTRY
            self._add((RAW_DELETE, MESSAGES, entry[0]))

    def put_qos2(self, client_id: str, pid: int) -> None:
        self._add((RAW_PUT, QOS2, f"{client_id}\x00{pid}", 1))

    def delete_qos2(self, client_id: str, pid: int) -> None:
        self._add((RAW_DELETE, QOS2, f"{client_id}\x00{pid}"))

    def session_changed(self, session: Session) -> None:
        if self._tracked.get(session.key) is session:
            self._dirty[session.key] = session
            if self._recording and not self._scheduled:
                self._scheduled = True
                asyncio.get_running_loop().call_soon(self._background)

    def _hold(self, message: Message, message_id: int) -> list[Any]:
        """Recovery: count a reference to ``message`` (stored as ``message_id``); its entry."""
        entry = self._messages.get(id(message))
        if entry is None:
            entry = self._messages[id(message)] = [message_id, 0, message]
        entry[1] += 1
        self._live_refs += 1
        return entry

    # -- the reference table, held here (KeyedLog.hold) ---------------------------------------

    def __len__(self) -> int:
        return self._live_refs

    def held_rows(self) -> list[tuple[Any, Any]]:
        """Compaction: every live reference row, as the file holds it after the last write
        (called on the event loop right after a write: KeyedLog.HeldRows), in reference
        order (the queue order)."""
        rows: list[tuple[Any, Any]] = []
        for cid, session in self._tracked.items():
            journal = session.journal
            if not isinstance(journal, PersistentJournal):
                continue
            for ref in journal.waiting:
                rows.append((ref[1], ref_row(cid, ref, None, False)))
            released = journal.released_pids
            for pid, ref in journal.flight.items():
                rows.append((ref[1], ref_row(cid, ref, pid, pid in released)))
        rows.sort(key=_first)
        return rows

    def retained_set(self, tenant: str, message: Message) -> None:
        now_mono, now_wall = now_pair(self.clock)
        self._add(
            (
                RAW_PUT,
                RETAINED,
                f"{tenant}\x00{message.topic}",
                encode_message(message, now_mono, now_wall),
            ),
            message.size,
        )

    def retained_delete(self, tenant: str, topic: str) -> None:
        self._add((RAW_DELETE, RETAINED, f"{tenant}\x00{topic}"))

    # -- sessions ---------------------------------------------------------------------------

    def tracks(self, session: Session) -> bool:
        return self._tracked.get(session.key) is session

    def adopt(self, session: Session) -> None:
        """``session`` outlives its connection from now on: store it and everything it holds."""
        if self.tracks(session):
            self.session_changed(session)
            return
        cid = session.key  # (tenant, client id): broker/session.py session_key
        self._tracked[cid] = session
        journal = PersistentJournal(self, session)
        # in flight first: sent before anything still queued (reference order), and sent()
        # then finds nothing queued to look through
        for pid, item in session.inflight.items():
            journal.sent(pid, item.outgoing)
            if item.released:
                journal.released(pid)
        for outgoing in session.queue:
            journal.queued(outgoing)
        for pid in session.qos2_incoming:
            journal.qos2_received(pid)
        session.journal = journal
        self.session_changed(session)

    def forget(self, session: Session) -> None:
        """The session ended: delete its record, messages and QoS 2 state."""
        cid = session.key
        if self._tracked.get(cid) is not session:
            return
        journal = session.journal
        if isinstance(journal, PersistentJournal):
            for ref in journal.references():
                self.delete_ref(ref)
        for pid in session.qos2_incoming:
            self.delete_qos2(cid, pid)
        self._tracked.pop(cid, None)
        self._dirty.pop(cid, None)
        session.journal = NO_JOURNAL
        self._add((RAW_DELETE, SESSIONS, cid))

    def _session_record(self, session: Session, now_mono: float, now_wall: float) -> list[Any]:
        conn = session.connection
        live_will = conn.will if conn is not None else None
        subs = [
            [
                e.topic_filter,
                e.qos,
                e.no_local,
                e.retain_as_published,
                e.retain_handling,
                e.subscription_id,
                e.share_group,
                e.recheck,
            ]
            for e in session.subscriptions.values()
        ]
        return [
            session.tenant,
            encode_identity(session.identity),
            session.protocol_level,
            session.expiry_interval,
            to_wall(session.expires_at, now_mono, now_wall),
            None if session.will is None else encode_will(session.will),
            to_wall(session.will_at, now_mono, now_wall),
            None if live_will is None else encode_will(live_will),
            subs,
            session.next_packet_id,
            None if session.owner is None else session.owner.to_record(),
        ]

    # -- committing ------------------------------------------------------------------------

    def _take(self) -> tuple[list[Any], int]:
        if self._new_refs:
            self._batch(RAW_ROWS, REF_WIDTH, self._new_refs, REF_WIDTH + 1)
            self._new_refs = []  # handed to the log: never changed again (ref_sent)
            self._batch_no += 1
        if self._moved:
            self._batch(RAW_SETS, REF_PID, self._moved, 2)
            self._moved = []
        if self._released:
            self._batch(RAW_SETS, REF_RELEASED, self._released, 2)
            self._released = []
        if self._gone:
            self._batch(RAW_DELETES, None, self._gone, 1)
            self._gone = []
        if self._dirty:
            now_mono, now_wall = now_pair(self.clock)
            for cid, session in self._dirty.items():
                self._ops += (
                    RAW_PUT,
                    SESSIONS,
                    cid,
                    self._session_record(session, now_mono, now_wall),
                )
                self._count += 1
            self._dirty.clear()
        ops, count = self._ops, self._count
        self._ops, self._count, self._ops_bytes = [], 0, 0
        return ops, count

    def _batch(self, kind: int, extra: int | None, items: list[Any], stride: int) -> None:
        """One batched op of table ``ref`` (``BATCH_ROWS`` rows at most, so that a large turn
        still splits into records of about ``CHUNK_BYTES``), in the order new rows, packet
        ids, releases, deletes: a reference's steps within one turn go in that order too."""
        step = BATCH_ROWS * stride
        for start in range(0, len(items), step):
            part = items if len(items) <= step else items[start : start + step]
            if extra is None:
                self._ops += (kind, REFS, part)
            else:
                self._ops += (kind, REFS, extra, part)
            self._count += 1

    def pending(self) -> bool:
        return bool(
            self._ops
            or self._dirty
            or self._new_refs
            or self._moved
            or self._released
            or self._gone
        )

    def write_ahead(self) -> int:
        """Write every change collected so far to the OS now, as one record (more only past
        ``CHUNK_BYTES``), and return the log ticket of the last one. The broker calls this
        before it writes to any socket (``Broker._flush``) and :meth:`commit` before an
        acknowledgement: nothing leaves on a socket that the log does not already hold
        (issue 17). Raises ``StoreError`` when it could not be written."""
        if not self.pending():
            return self._ticket
        # the reference ops' weight from their lengths (a row's 8 scalars about 32 bytes, a
        # packet id or release pair 16, a delete 8): nothing counted per reference on the way
        weight = (
            self._ops_bytes
            + 4 * len(self._new_refs)
            + 8 * (len(self._moved) + len(self._released) + len(self._gone))
        )
        ops, count = self._take()
        large = weight > CHUNK_BYTES // 2
        for chunk, size, n in flat_chunks(ops) if large else ((ops, weight, count),):
            try:
                self._ticket = self.keyed.write_flat(chunk, n)
            except StoreError as exc:
                self._failed(exc, size)
                raise
        return self._ticket

    def acknowledge(
        self,
        conn: object,
        done: Callable[[StoreError | None], None],
        limit: int,
        also: Awaitable[None] | None = None,
    ) -> Awaitable[None] | None:
        """Call ``done(error)`` once every change collected so far is stored as the
        durability mode promises (``error``: it could not be), in the order ``conn``'s packets
        came. With ``none``/``interval`` the changes of one event-loop turn are written as one
        record at its end, before any socket write, and ``done`` runs right after: no task, no
        future. With ``sync`` ``done`` waits for the fsync (:meth:`in_order`); an awaitable is
        returned when ``conn`` should stop reading (``limit`` acknowledgements waiting).
        ``also``: a further write the acknowledgement waits for, in any mode (a durable bridge
        queue's log, bridge/service.py); its error refuses the publish like the store's."""
        chained = conn in self._chains or also is not None
        if not chained and not self.pending():
            done(None)  # nothing to store (and nothing of this turn is waiting: see _acks)
            return None
        if not chained and not self._fsync_each:
            self._acks.append(done)
            self._schedule()
            return None
        turn = self._turn
        if turn is None:
            turn = self._turn = asyncio.get_running_loop().create_future()
            self._schedule()
        return self.in_order(conn, turn, done, limit, also)

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._background)

    def before_send(self) -> None:
        """The broker writes to its sockets next (``Broker._flush``): store what is
        collected first, then acknowledge what waited for it."""
        for hook in self.write_ahead_hooks:
            hook()
        if self._scheduled:
            self._background()

    def _background(self) -> None:
        """The end of an event-loop turn: one record for every change of the turn, then the
        acknowledgements that waited for it (a failed write is reported through ``healthy``
        and refuses them)."""
        self._scheduled = False
        error: StoreError | None = None
        try:
            ticket = self.write_ahead()
        except StoreError as exc:
            error, ticket = exc, 0
        acks, self._acks = self._acks, []
        for done in acks:
            try:
                done(error)
            except Exception:
                log.exception("acknowledging a stored message failed")
        turn, self._turn = self._turn, None
        if turn is None:
            return
        if error is not None:
            turn.set_exception(error)
            return
        synced = self.keyed.log.synced(ticket) if self._fsync_each else None
        if synced is None:
            turn.set_result(None)
            return
        synced.add_done_callback(partial(self._synced, turn))

    def _synced(self, turn: asyncio.Future[None], synced: asyncio.Future[None]) -> None:
        exc = None if synced.cancelled() else synced.exception()
        if isinstance(exc, StoreError):
            self._failed(exc)
            turn.set_exception(exc)
        elif exc is not None:
            turn.set_exception(exc)
        else:
            turn.set_result(None)

    def _failed(self, exc: StoreError, size: int = 0) -> None:
        self._probe_bytes = max(self._probe_bytes, min(size, CHUNK_BYTES))
        if self.healthy:
            log.error(
                f"broker store write failed: {exc}; QoS 1/2 publishes that need storing "
                "are refused until it can write again",
                extra={"event": "store_unhealthy", "path": self.keyed.path, "errno": exc.errno},
            )
        self.healthy = False
        self.last_error = str(exc)

    def _recovered(self) -> None:
        self.healthy = True
        self._probe_bytes = 0
        self.last_error = None
        for session in self._tracked.values():  # records that failed to save are written again
            self.session_changed(session)
        log.warning(
            "broker store writes again; sessions re-saved",
            extra={"event": "store_healthy", "path": self.keyed.path},
        )

    def tick(self) -> None:
        """Broker tick: while unhealthy, try a small durable write; re-save sessions after."""
        if self.healthy or (self._probe is not None and not self._probe.done()):
            return
        self._probe = asyncio.get_running_loop().create_task(self._try_probe())

    async def _try_probe(self) -> None:
        try:
            # Healthy again once a write as large as the one that failed fits.
            self.keyed.write([Put(META, "probe", bytes(self._probe_bytes))])
            synced = self.keyed.log.synced(self.keyed.write([Put(META, "probe", time.time())]))
            if synced is not None:
                await synced
        except StoreError as exc:
            self.last_error = str(exc)
            self._probe = None
            return
        self._probe = None
        self._recovered()

    def in_order(
        self,
        conn: object,
        stored: Awaitable[None] | None,
        done: Callable[[StoreError | None], None],
        limit: int,
        also: Awaitable[None] | None = None,
    ) -> Awaitable[None] | None:
        """Call ``done(error)`` once ``stored`` (and ``also``) finished and every earlier
        ``done`` of ``conn`` ran, so acknowledgements leave in the order the packets came
        (MQTT 5 §4.6) while the connection keeps reading: one group commit then covers many of
        its publishes. The publishes of one turn wait for the same things: they share one
        task (a group), not one each. Returns an awaitable (the connection stops reading until
        it is done) once ``limit`` wait."""
        previous, waiting = self._chains.get(conn, (None, 0))
        if stored is None and also is None and previous is None:
            done(None)
            return None
        group = self._groups.get(conn)
        if group is not None and group.stored is stored and group.also is also:
            group.dones.append(done)  # its task has not called them yet (it closes it first)
            task = group.task
            assert task is not None
        else:
            group = self._groups[conn] = _Group(stored, also, done)
            task = asyncio.get_running_loop().create_task(self._in_order(conn, previous, group))
            group.task = task
        self._chains[conn] = (task, waiting + 1)
        return task if waiting + 1 >= limit else None

    async def _in_order(
        self, conn: object, previous: asyncio.Task[None] | None, group: _Group
    ) -> None:
        error: StoreError | None = None
        stored, also = group.stored, group.also
        if also is not None:
            stored = also if stored is None else all_of(stored, also)
        if stored is not None:
            try:
                await stored
            except StoreError as exc:
                error = exc
        if previous is not None:
            await asyncio.shield(previous)
        if self._groups.get(conn) is group:
            del self._groups[conn]  # closed: later publishes start a group of their own
        for done in group.dones:
            try:
                done(error)
            except Exception:
                log.exception("acknowledging a stored message failed")
        task, waiting = self._chains[conn]
        if task is asyncio.current_task():
            del self._chains[conn]
        else:
            self._chains[conn] = (task, waiting - len(group.dones))

    def refusal(self, exc: BaseException) -> tuple[int, str]:
        """Reason code and Reason String for a publish that could not be stored."""
        self.refused += 1
        full = isinstance(exc, StoreError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)
        code = 0x97 if full else 0x80
        why = "the broker's disk is full" if full else "the broker cannot write its store"
        return code, f"not stored: {why}; the message was not accepted"

    def health(self) -> StoreHealth:
        return self.keyed.health()

    async def aclose(self) -> None:
        self._background()
        await self.keyed.aclose()
        stats = self.keyed.stats()
        log.info(
            f"broker store closed: {stats.appends} appends, {stats.fsyncs} fsyncs, "
            f"{stats.compactions} compactions",
            extra={
                "event": "store_closed",
                "path": self.keyed.path,
                "appends": stats.appends,
                "fsyncs": stats.fsyncs,
                "compactions": stats.compactions,
            },
        )


def _first(item: tuple[Any, Any]) -> Any:
    return item[0]


class _Group:
    """Acknowledgements of one connection waiting for the same store write(s)
    (:meth:`Persistence.in_order`), called in order by one task."""

    __slots__ = ("stored", "also", "dones", "task")

    def __init__(
        self,
        stored: Awaitable[None] | None,
        also: Awaitable[None] | None,
        done: Callable[[StoreError | None], None],
    ) -> None:
        self.stored = stored
        self.also = also
        self.dones = [done]
        self.task: asyncio.Task[None] | None = None
