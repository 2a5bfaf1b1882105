"""Persistent sessions and retained messages on the append-only log (issues 8 and 17).

One :class:`~edge_broker.store.KeyedLog` file, ``<state_dir>/broker.log``, with tables:

- ``s``: session key → session record (tenant, identity, protocol level, expiry interval, expiry
  deadline while offline, pending delayed will, the connected client's will, subscriptions with
  options and identifiers, next packet id, owning principal); only sessions that outlive their
  connection. A record without an owner (older state) gets ``ownership.owner_of_restored``.
- ``msg``: message id → a QoS 1/2 message held by persistent sessions, stored once however many
  hold it; ``ref``: reference id → ``[session key, message id, qos, retain, packet id or None,
  released, subscription ids (None, one id or a list)]``, one per session holding it, queued
  (no packet id) or in flight (rows of format 2, ``[…, released, *subscription ids]``, and
  earlier, ``[…, retain, [subscription ids], packet id, released]``, are read as well).
  A message is deleted with its last reference (counted in ``_messages``). The references of
  a turn are written as batched ops (one per kind: new rows, packet ids, releases, deletes;
  store/keyed.py), and after recovery the journals hold them instead of the store's index
  (``KeyedLog.hold``; compaction reads :meth:`Persistence.held_rows`).
- ``q``: ``session key NUL packet id`` → incoming QoS 2 awaiting PUBREL (exactly once).
- ``r``: ``tenant NUL topic`` → retained message (``$`` topics such as ``$SYS`` are not stored).
- ``meta``: ``format`` → 3. Format 2 loads as it is; format 1 (tables ``m``/``f``: a whole
  message per session) is migrated at start (:meth:`Persistence._migrate`).

The session and delivery code report changes through ``session.journal`` (broker/journal.py;
persist_hooks.py for persistent sessions); they become ops collected during an event-loop
turn and written as one record at its end, before the turn's output goes to any socket
(``Broker._flush`` → :meth:`Persistence.before_send`): nothing leaves on a socket that the log
does not already hold. Acknowledgements that depend on stored state go through
:meth:`Persistence.acknowledge`: right after that write (``none``/``interval``), or after its
fsync (``sync``: group-committed across clients, never blocking writes). When a write fails
(disk full, read-only, I/O error), the publish is refused (handle_publish.py) and ``healthy``
turns false until a probe written on the broker tick succeeds again;
``$SYS/broker/store/healthy`` shows it. docs/persistence.md has the guarantees.

Recovery (:meth:`Persistence.recover`) replays the log (a torn tail is truncated and reported),
drops expired sessions and messages, restores subscriptions into the topic spaces, sessions
into ``broker.sessions`` (so reload re-checks them) and their queues and in-flight windows,
then the broker serves. A session whose client was connected at the crash is treated as
disconnected at start: its expiry starts then and its will (if any) follows its delay.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import Config
from ..mqtt.packets import Will
from ..store import Delete, KeyedLog, Op, Put, StoreError, StoreHealth
from ..store.damage import damage_hint, open_or_set_aside
from ..store.errors import StoreOpenError
from ..store.gcpause import fewer_young_collections
from ..store.keyed import RAW_DELETE, RAW_DELETES, RAW_PUT, RAW_ROWS, RAW_SET, RAW_SETS
from .awaiting import all_of
from .journal import NO_JOURNAL
from .message import Message
from .ownership import owner_of_restored, principal_from_record
from .persist_codec import (
    RecordError,
    decode_identity,
    decode_message,
    decode_outgoing,
    decode_will,
    encode_identity,
    encode_message,
    encode_will,
    now_pair,
    to_mono,
    to_wall,
)
from .persist_hooks import PersistentJournal, Ref
from .retained import MemoryRetainedStore
from .session import NEVER_EXPIRES, Inflight, Outgoing, Session, SubscriptionEntry, client_id_of

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger("edge_broker.persistence")

BROKER_LOG = "broker.log"
SESSIONS, QOS2, RETAINED, META = "s", "q", "r", "meta"
MESSAGES, REFS = "msg", "ref"  # each message once; queued/in-flight references to it
REF_PID, REF_RELEASED = 4, 5  # positions in a reference row, changed by RAW_SET(S)
REF_WIDTH = 7  # fields of a reference row written by this build (RAW_ROWS, compaction)
BATCH_ROWS = 4096  # references per batched op: a turn's refs become ops of at most this many
OLD_MESSAGES, OLD_FLIGHT = "m", "f"  # the previous format (a message per session), migrated
FORMAT = 3  # 3: batched reference ops (kinds 9-11) and a 7-field reference row; 2 is read
CHUNK_BYTES = 1 << 20  # ops of one commit beyond this are split into several records
FSYNC = {"sync": "always", "none": "never"}
# Compact once three quarters of the file are dead (the file is 4x its live records): a queue
# backlog churns references fast, and each compaction re-encodes every live record, so at 1/2
# compactions cost as much CPU as the messages themselves (bench_persistence, 10 subscribers).
COMPACT_RATIO = 0.75


_NO_ENTRY: list[Any] = [0, 0, None]  # Persistence._last before any message (matches none)


def log_path(config: Config) -> Path:
    from ..claims.runtime import state_dir  # one place decides the state directory

    return state_dir(config) / BROKER_LOG


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
        self._ticket = 0  # the log ticket of the last record written
        self._acks: list[Callable[[StoreError | None], None]] = []  # waiting for this turn
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
                rows.append((ref[1], _ref_row(cid, ref, None, False)))
            released = journal.released_pids
            for pid, ref in journal.flight.items():
                rows.append((ref[1], _ref_row(cid, ref, pid, pid in released)))
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
        for chunk, size, n in _flat_chunks(ops) if large else ((ops, weight, count),):
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
        return self.in_order(conn, turn if also is None else all_of(turn, also), done, limit)

    def _schedule(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().call_soon(self._background)

    def before_send(self) -> None:
        """The broker writes to its sockets next (``Broker._flush``): store what is
        collected first, then acknowledge what waited for it."""
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
    ) -> Awaitable[None] | None:
        """Call ``done(error)`` once ``stored`` finished and every earlier ``done`` of ``conn``
        ran, so acknowledgements leave in the order the packets came (MQTT 5 §4.6) while the
        connection keeps reading: one group commit then covers many of its publishes. Returns
        an awaitable (the connection stops reading until it is done) once ``limit`` wait."""
        previous, waiting = self._chains.get(conn, (None, 0))
        if stored is None and previous is None:
            done(None)
            return None
        task = asyncio.get_running_loop().create_task(self._in_order(conn, previous, stored, done))
        self._chains[conn] = (task, waiting + 1)
        return task if waiting + 1 >= limit else None

    async def _in_order(
        self,
        conn: object,
        previous: asyncio.Task[None] | None,
        stored: Awaitable[None] | None,
        done: Callable[[StoreError | None], None],
    ) -> None:
        error: StoreError | None = None
        if stored is not None:
            try:
                await stored
            except StoreError as exc:
                error = exc
        if previous is not None:
            await asyncio.shield(previous)
        try:
            done(error)
        except Exception:
            log.exception("acknowledging a stored message failed")
        task, waiting = self._chains[conn]
        if task is asyncio.current_task():
            del self._chains[conn]
        else:
            self._chains[conn] = (task, waiting - 1)

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

    # -- recovery ---------------------------------------------------------------------------

    def recover(self, broker: Broker) -> None:
        """Load retained messages and sessions into ``broker`` (module docstring)."""
        started = time.perf_counter()  # how long recovery took, for the log line
        report = self.keyed.report
        if not report.clean:
            log.warning(
                f"broker store recovery: {report}",
                extra={
                    "event": "store_recovery",
                    "path": self.keyed.path,
                    "bytes_dropped": report.bytes_dropped,
                    "tail_bytes_dropped": report.tail_bytes_dropped,
                },
            )
        now_mono, now_wall = now_pair(self.clock)
        drop: list[Op] = []
        retained = self._recover_retained(broker, now_mono, now_wall, drop)
        sessions = self._recover_sessions(broker, now_mono, now_wall, drop)
        messages = self._recover_messages(sessions, now_mono, now_wall, drop)
        for key, _ in self.keyed.iter_items(QOS2):
            cid, _, pid = str(key).rpartition("\x00")  # the session key may hold a U+0000 too
            session = sessions.get(cid)
            if session is None or not pid.isdigit():
                drop.append(Delete(QOS2, key))
            else:
                session.qos2_incoming.add(int(pid))
        for session in sessions.values():
            broker.restore_session(session)
        if drop:
            try:
                self.keyed.commit_sync(drop, split_to_fit=True)
            except StoreError as exc:
                self._failed(exc)
        # From here the journals hold the references; the index keeps no copy of them, and
        # compaction asks held_rows (issue 17: a copy per reference cost as much as its ops).
        self.keyed.hold(REFS, self)
        self._recording = True
        log.info(
            f"broker store {self.keyed.path}: {len(sessions)} sessions, {messages} queued "
            f"messages, {retained} retained messages restored in "
            f"{time.perf_counter() - started:.3f} s ({len(drop)} expired or unusable records "
            "dropped)",
            extra={
                "event": "store_loaded",
                "path": self.keyed.path,
                "sessions": len(sessions),
                "messages": messages,
                "retained": retained,
                "dropped": len(drop),
            },
        )

    def _recover_retained(
        self, broker: Broker, now_mono: float, now_wall: float, drop: list[Op]
    ) -> int:
        count = 0
        for key, raw in self.keyed.iter_items(RETAINED):
            tenant, _, topic = str(key).partition("\x00")
            try:
                message = decode_message(raw, f"retained {topic!r}", now_mono, now_wall)
            except RecordError as exc:
                log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
                drop.append(Delete(RETAINED, key))
                continue
            if message.expired(now_mono) or not topic:
                drop.append(Delete(RETAINED, key))
                continue
            broker.topic_space(tenant).retained.set(message)
            count += 1
        return count

    def _recover_sessions(
        self, broker: Broker, now_mono: float, now_wall: float, drop: list[Op]
    ) -> dict[str, Session]:
        from ..matching.subscription_patterns import subscription_pattern

        sessions: dict[str, Session] = {}
        for key, raw in self.keyed.iter_items(SESSIONS):
            cid = str(key)
            try:
                session, live_will = _decode_session(cid, raw, now_mono, now_wall)
            except (RecordError, TypeError, ValueError) as exc:
                log.warning(
                    f"broker store: session {cid!r}: {exc}; dropped",
                    extra={"event": "store_record"},
                )
                drop.append(Delete(SESSIONS, key))
                continue
            if session.expires_at is None and session.expiry_interval != NEVER_EXPIRES:
                session.expires_at = now_mono + session.expiry_interval  # was online at the crash
            if live_will is not None and session.will is None:
                delay = live_will.properties.will_delay_interval or 0
                session.will = live_will
                session.will_at = now_mono + min(delay, session.expiry_interval)
            if session.expires_at is not None and session.expires_at <= now_mono:
                drop.append(Delete(SESSIONS, key))
                if session.will is not None:
                    broker.publish_will(session, session.will)
                continue
            space = broker.topic_space(session.tenant)
            for topic_filter, entry in list(session.subscriptions.items()):
                try:
                    _, inner, pattern = subscription_pattern(
                        topic_filter, broker.separator, session.identity.subscription_patterns
                    )
                except Exception as exc:  # a rule the running config no longer accepts
                    log.warning(
                        f"broker store: subscription {topic_filter!r} of {cid!r} dropped: {exc}",
                        extra={"event": "store_record"},
                    )
                    del session.subscriptions[topic_filter]
                    continue
                space.subscribe(entry, inner, pattern)
            self._tracked[cid] = session
            session.journal = PersistentJournal(self, session)
            sessions[cid] = session
        return sessions

    def _recover_messages(
        self, sessions: dict[str, Session], now_mono: float, now_wall: float, drop: list[Op]
    ) -> int:
        messages: dict[int, Message] = {}
        highest = 0
        for key, raw in self.keyed.iter_items(MESSAGES):
            if not isinstance(key, int):
                drop.append(Delete(MESSAGES, key))
                continue
            highest = max(highest, key)
            try:
                messages[key] = decode_message(raw, f"message {key}", now_mono, now_wall)
            except RecordError as exc:
                log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
                drop.append(Delete(MESSAGES, key))
        count = 0
        refs = [(key, raw) for key, raw in self.keyed.iter_items(REFS) if isinstance(key, int)]
        drop.extend(
            Delete(REFS, key) for key, _ in self.keyed.iter_items(REFS) if not isinstance(key, int)
        )
        for key, raw in sorted(refs, key=lambda item: item[0]):
            highest = max(highest, key)
            ref = _decode_ref(raw)
            session = None if ref is None else sessions.get(ref[0])
            message = None if ref is None else messages.get(ref[1])
            if ref is None:
                log.warning(
                    f"broker store: reference {key} {raw!r:.80} does not decode; dropped",
                    extra={"event": "store_record"},
                )
            if session is None or message is None or message.expired(now_mono):
                drop.append(Delete(REFS, key))
                continue
            assert ref is not None
            cid, message_id, qos, retain, sub_ids, pid, released = ref
            restored = self._restore(
                session, key, Outgoing(message, qos, retain, sub_ids), pid, released, message_id
            )
            if isinstance(raw[4], list) or (restored is None and (pid is not None or released)):
                # RAW_SET changes a row in place (ref_sent, ref_released): rows of the old
                # shape, and queued rows still naming a packet id, are written as it expects.
                row = [cid, message_id, qos, retain, restored, released and restored is not None]
                drop.append(Put(REFS, key, [*row, *sub_ids]))
            count += 1
        for message_id, message in messages.items():  # no reference left (all expired)
            if id(message) not in self._messages:
                drop.append(Delete(MESSAGES, message_id))
        self._seq = highest + 1
        return count + self._migrate(sessions, now_mono, now_wall, drop)

    def _restore(
        self,
        session: Session,
        seq: int,
        outgoing: Outgoing,
        pid: int | None,
        released: bool,
        message_id: int,
    ) -> int | None:
        """Recovery: reference ``seq`` back in flight under ``pid`` (the packet id the client
        saw) or in the queue; returns the packet id it is in flight under."""
        journal = session.journal
        assert isinstance(journal, PersistentJournal)
        ref = (outgoing, seq, self._hold(outgoing.message, message_id), -1, 0)
        if pid is not None and 0 < pid <= 65535 and pid not in session.inflight:
            item = Inflight(outgoing)
            item.released = released
            session.inflight[pid] = item
            journal.flight[pid] = ref
            if released:
                journal.released_pids.add(pid)
            # The counter goes on after the newest id in flight (reference order is
            # assignment order), never back to one the client may still hold.
            session.next_packet_id = pid % 65535 + 1
            return pid
        session.queue.append(outgoing)
        session.queued_bytes += outgoing.message.size
        journal.waiting.append(ref)
        return None

    def _migrate(
        self, sessions: dict[str, Session], now_mono: float, now_wall: float, drop: list[Op]
    ) -> int:
        """A store of the previous format (tables ``m``: a whole message per session and
        ``f``: its packet id) becomes references to messages stored once; each message's
        conversion is one atomic record, so a crash midway resumes at the next start."""
        if not (self.keyed.has_table(OLD_MESSAGES) or self.keyed.has_table(OLD_FLIGHT)):
            if self.keyed.lookup(META, "format") != FORMAT:
                drop.append(Put(META, "format", FORMAT))
            return 0
        flights = self.keyed.rows(OLD_FLIGHT)
        groups: list[list[Op]] = []
        count = 0
        for key, raw in self.keyed.iter_items(OLD_MESSAGES):
            old: list[Op] = [Delete(OLD_MESSAGES, key)]
            flight = flights.pop(key, None)
            if flight is not None:
                old.append(Delete(OLD_FLIGHT, key))
            try:
                cid, outgoing = decode_outgoing(raw, f"message {key!r}", now_mono, now_wall)
            except RecordError as exc:
                log.warning(f"broker store: {exc}; dropped", extra={"event": "store_record"})
                groups.append(old)
                continue
            session = sessions.get(cid)
            if session is None or outgoing.message.expired(now_mono):
                groups.append(old)
                continue
            pid, released = None, False
            if isinstance(flight, list) and len(flight) == 2 and isinstance(flight[0], int):
                pid, released = flight[0], bool(flight[1])
            seq, message_id = self._seq, self._seq + 1
            self._seq += 2
            pid = self._restore(session, seq, outgoing, pid, released, message_id)
            groups.append(
                [
                    Put(MESSAGES, message_id, encode_message(outgoing.message, now_mono, now_wall)),
                    Put(
                        REFS,
                        seq,
                        [
                            cid,
                            message_id,
                            outgoing.qos,
                            outgoing.retain,
                            pid,
                            released and pid is not None,
                            *outgoing.sub_ids,
                        ],
                    ),
                    *old,
                ]
            )
            count += 1
        groups.extend([Delete(OLD_FLIGHT, key)] for key in flights)
        groups.append([Put(META, "format", FORMAT)])
        record: list[Op] = []
        try:
            for group in groups:
                if record and _weight(record) + _weight(group) > CHUNK_BYTES:
                    self.keyed.commit_sync(record)
                    record = []
                record.extend(group)
            if record:
                self.keyed.commit_sync(record)
        except StoreError as exc:
            self._failed(exc)
            log.error(
                f"broker store: migrating the previous format failed: {exc}; it is "
                "retried at the next start",
                extra={"event": "store_migration"},
            )
            return count
        log.warning(
            f"broker store {self.keyed.path}: migrated {count} queued messages from "
            "the previous format (one record per session) to messages stored once",
            extra={"event": "store_migration", "messages": count},
        )
        return count


def _ref_row(cid: str, ref: Ref, pid: int | None, released: bool) -> list[Any]:
    """A reference row as this build writes it (REF_WIDTH fields; see put_ref)."""
    outgoing = ref[0]
    sub_ids = outgoing.sub_ids
    return [
        cid,
        ref[2][0],
        outgoing.qos,
        outgoing.retain,
        pid,
        released,
        None if not sub_ids else sub_ids[0] if len(sub_ids) == 1 else list(sub_ids),
    ]


def _first(item: tuple[Any, Any]) -> Any:
    return item[0]


def _decode_ref(raw: Any) -> tuple[str, int, int, bool, tuple[int, ...], int | None, bool] | None:
    """``[session key, message id, qos, retain, packet id or None, released, sub ids]`` with
    the subscription ids ``None``, one id or a list (format 3), ``[…, released, *sub ids]``
    (format 2), or ``[…, retain, [sub ids], packet id or None, released]`` (earlier)."""
    if not isinstance(raw, list) or len(raw) < 6:
        return None
    if isinstance(raw[4], list):
        if len(raw) != 7:
            return None
        cid, message_id, qos, retain, sub_ids, pid, released = raw
    else:
        cid, message_id, qos, retain, pid, released = raw[:6]
        sub_ids = raw[6:]
        if len(sub_ids) == 1 and (sub_ids[0] is None or isinstance(sub_ids[0], list)):
            sub_ids = sub_ids[0] or []
    if (
        not isinstance(cid, str)
        or not isinstance(message_id, int)
        or qos not in (1, 2)
        or not all(type(i) is int for i in sub_ids)
        or not (pid is None or type(pid) is int)
    ):
        return None
    return cid, message_id, qos, bool(retain), tuple(sub_ids), pid, bool(released)


def _decode_session(
    cid: str, raw: Any, now_mono: float, now_wall: float
) -> tuple[Session, Will | None]:
    what = f"session {cid!r}"
    if isinstance(raw, list | tuple) and len(raw) == 10:
        raw = [*raw, None]  # written before sessions recorded their owner (issue 15)
    (
        tenant,
        identity_raw,
        level,
        expiry,
        expires,
        will_raw,
        will_at,
        live_raw,
        subs,
        next_pid,
        owner_raw,
    ) = raw
    identity = decode_identity(identity_raw, what)
    if not isinstance(tenant, str) or level not in (3, 4, 5) or not isinstance(expiry, int):
        raise RecordError(f"{what}: tenant/protocol level/expiry have the wrong types")
    session = Session(client_id_of(cid), tenant, identity, level)
    if session.key != cid:
        raise RecordError(f"{what}: the record's tenant {tenant!r} does not match its key")
    session.owner = principal_from_record(owner_raw) or owner_of_restored(identity)
    session.expiry_interval = expiry
    session.expires_at = to_mono(expires, now_mono, now_wall)
    session.will = None if will_raw is None else decode_will(will_raw, what)
    session.will_at = to_mono(will_at, now_mono, now_wall)
    session.next_packet_id = next_pid if isinstance(next_pid, int) and 0 < next_pid <= 65535 else 1
    for sub in subs:
        topic_filter, qos, no_local, rap, rh, sub_id, share_group, recheck = sub
        if not isinstance(topic_filter, str) or qos not in (0, 1, 2):
            raise RecordError(f"{what}: subscription {sub!r:.80} has the wrong types")
        session.subscriptions[topic_filter] = SubscriptionEntry(
            session,
            topic_filter,
            qos,
            bool(no_local),
            bool(rap),
            int(rh),
            sub_id if isinstance(sub_id, int) else None,
            share_group if isinstance(share_group, str) else None,
            bool(recheck),
        )
    live_will = None if live_raw is None else decode_will(live_raw, what)
    return session, live_will


def _op_weight(op: Op) -> int:
    """About the bytes ``op`` takes in a record (payloads dominate)."""
    if isinstance(op, Put) and op.table in (MESSAGES, RETAINED):
        return 64 + len(op.value[1])
    return 64


def _flat_chunks(ops: list[Any]) -> Iterator[tuple[list[Any], int, int]]:
    """Flat ops (``Persistence._ops``) in chunks of about ``CHUNK_BYTES`` each, with their
    weight and op count."""
    start = i = size = count = 0
    end = len(ops)
    while i < end:
        kind = ops[i]
        width = _FLAT_WIDTH[kind]
        weight = 64
        if kind == RAW_PUT and ops[i + 1] in (MESSAGES, RETAINED):
            weight += len(ops[i + 3][1])
        elif kind >= RAW_ROWS:  # batched: its list of rows is its last field
            weight += 4 * len(ops[i + width - 1])
        if count and size + weight > CHUNK_BYTES:
            yield ops[start:i], size, count
            start, size, count = i, 0, 0
        i += width
        size += weight
        count += 1
    if count:
        yield ops[start:], size, count


_FLAT_WIDTH = {RAW_PUT: 4, RAW_DELETE: 3, RAW_SET: 5, RAW_ROWS: 4, RAW_SETS: 4, RAW_DELETES: 3}


def _weight(ops: list[Op]) -> int:
    return sum(_op_weight(op) for op in ops)


class PersistentRetainedStore(MemoryRetainedStore):
    """Retained messages of one topic space, written through to the log (``$`` topics not)."""

    __slots__ = ("_store", "_tenant")

    def __init__(self, store: Persistence, tenant: str, separator: str = "/") -> None:
        super().__init__(separator)
        self._store = store
        self._tenant = tenant

    def set(self, message: Message) -> None:
        super().set(message)
        if message.topic[:1] != "$":
            self._store.retained_set(self._tenant, message)

    def delete(self, topic: str) -> None:
        before = len(self)
        super().delete(topic)
        if len(self) != before and topic[:1] != "$":
            self._store.retained_delete(self._tenant, topic)
