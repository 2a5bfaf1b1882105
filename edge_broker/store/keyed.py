"""Keyed tables on the log: put / delete / get with last-write-wins (issue 6, issue 8).

One ``KeyedLog`` is one file holding any number of named tables; the index (table → key →
value) lives in memory and is rebuilt at open by replaying the log. Each subsystem opens its own
file (``claims.log``, ``retained.log``, ``sessions.log``): a fault or a compaction in one does
not stall the others, and each file's live set stays small enough to compact quickly. Inside a
file, tables namespace the records (e.g. ``claims`` and ``quarantine``).

Records (CBOR arrays): ``[1, table, key, value]`` put, ``[2, table, key]`` delete (a
tombstone), ``[3, table]`` create an empty table, ``[4, table]`` drop a table and all its keys,
``[5, [op, ...]]`` several ops in one frame, so they are stored all or nothing, ``[6, table, key,
bytes]`` a put whose value is embedded CBOR (``encoded_values``), ``[7, [op fields, ...]]`` a
flat batch (below), ``[8, table, key, position, item]`` set one item of a stored array value
(nothing if the key or the position is gone). Inside a flat batch only, three *batched* ops
stand for many rows of one table each: ``9, table, width, [key, field 1 … field width, key,
…]`` puts rows of ``width`` fields, ``10, table, position, [key, item, key, item, …]`` sets
one item of each row, ``11, table, [key, …]`` deletes keys (the broker's per-turn references:
one op per turn whatever the number of subscribers, no array per row). Compaction writes
one create per table and one put per live key; tombstones and dropped tables disappear.
Tables and keys iterate in first-insertion order (a dict's: re-putting a key keeps its place, a
delete and put moves it to the end), and reopen and compaction keep that order, so a session's
queue can rely on it.

A *held* table (:meth:`KeyedLog.hold`) is kept by its owner instead of the index: after the
owner read it at start, writes to it go to the file only, and compaction asks the owner for
its live rows (:class:`HeldRows`). The broker's references are one (broker/persist/): it
holds each in its sessions' journals already, and a second copy in the index cost a tuple, a
dict entry and a row copy per reference per step.

Keys are ``str``, ``int`` or ``bytes``. Values are any CBOR value. The index holds the value
decoded from the bytes written (a tuple reads back as a list, before and after a reopen, and the
caller may reuse its object); ``get`` returns that stored object itself, so treat it as
read-only (with ``encoded_values``, every read decodes a fresh copy instead).

The index only ever shows data the log has written: with ``fsync="always"`` a value you can read
is a value that is durable. The log's worker thread applies a written batch key by key, so a
reader on the event loop may glimpse a batch half applied for an instant; the file never holds
half a batch, and the awaiting writer resumes only once all of it is applied.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast

from .durability import Durability
from .errors import StoreError
from .gcpause import gc_paused
from .health import LogStats, StoreHealth
from .lazy_module import LazyModule
from .log import DEFAULT_MAX_RECORD_SIZE, Log
from .logfile import RecoveryReport

if TYPE_CHECKING:
    import cbor2
else:  # imported by the first record written or read (lazy_module.py)
    cbor2 = LazyModule("cbor2", globals())

Key = str | int | bytes

_PUT, _DELETE, _CREATE, _DROP, _BATCH, _PUT_ENCODED, _FLAT, _SET = 1, 2, 3, 4, 5, 6, 7, 8
_ROWS, _SETS, _DELETES = 9, 10, 11  # batched ops, in flat batches only (module docstring)
# ``[RAW_PUT, table, key, value]``, ``[RAW_DELETE, table, key]``, ``[RAW_SET, table, key,
# position, item]``: the last changes one item of an array value without writing the array
# again (a queued message going into flight sets its packet id: five scalars to encode instead
# of a whole row, and no array, which cbor2 checks against Mapping at about 0.4 µs each).
RAW_PUT, RAW_DELETE, RAW_SET = _PUT, _DELETE, _SET
# ``RAW_ROWS, table, width, [key, fields…]``, ``RAW_SETS, table, position, [key, item, …]``,
# ``RAW_DELETES, table, [key, …]``: many rows of one table in one op (module docstring).
RAW_ROWS, RAW_SETS, RAW_DELETES = _ROWS, _SETS, _DELETES
# fields of each op kind a flat batch may hold
_WIDTH = {_PUT: 4, _DELETE: 3, _SET: 5, _ROWS: 4, _SETS: 4, _DELETES: 3}
# A flat batch, ``[_FLAT, [RAW_PUT, table, key, value, RAW_DELETE, table, key, ...]]``: the
# ops of a batch one after another in one array (:meth:`KeyedLog.write_flat`). The broker's
# per-turn record holds a few ops per delivery; an array per op costs an allocation and, in
# cbor2's encoder, about 0.4 µs (a Mapping check per container), as much as the op's data.

# An index entry: (value, frame bytes it accounts for, whether value is still CBOR-encoded).
_Entry = tuple[Any, int, bool]


@dataclass(frozen=True, slots=True)
class Put:
    table: str
    key: Key
    value: Any


@dataclass(frozen=True, slots=True)
class Delete:
    table: str
    key: Key


@dataclass(frozen=True, slots=True)
class CreateTable:
    table: str


@dataclass(frozen=True, slots=True)
class DropTable:
    table: str


Op = Put | Delete | CreateTable | DropTable


class HeldRows(Protocol):
    """The live rows of a held table, kept by its owner (:meth:`KeyedLog.hold`)."""

    def __len__(self) -> int:
        """How many rows are live now (compaction's estimate of their bytes)."""

    def held_rows(self) -> list[tuple[Key, Any]]:
        """A snapshot of the rows as the file holds them after the last write, in key order,
        sharing no mutable object with the owner's state. Called under the log's lock on the
        thread that writes (the event loop: :meth:`KeyedLog.write_flat`), so the owner's state
        cannot change meanwhile."""


def _check_name(table: object) -> str:
    if not isinstance(table, str) or not table:
        raise StoreError(f"table name {table!r} must be a non-empty string")
    return table


_KEY_TYPES = frozenset((str, int, bytes))

# the tables a TinyDB on the log (tinydb_storage.LogStorage) keeps, by this prefix; here, so
# that naming them does not import TinyDB (issue 32: fresh RSS)
TINYDB_PREFIX = "tinydb:"


def _check_key(key: object) -> Key:
    if type(key) not in _KEY_TYPES:  # exact types: bool (an int subclass) is not a key
        raise StoreError(f"key {key!r} has type {type(key).__name__}; use str, int or bytes")
    return cast(Key, key)


def _encode_op(op: Op, encoded_values: bool) -> list[Any]:
    table = _check_name(op.table)
    if isinstance(op, Put):
        if not encoded_values:
            return [_PUT, table, _check_key(op.key), op.value]
        try:
            value = cbor2.dumps(op.value)
        except (cbor2.CBOREncodeError, TypeError, ValueError) as exc:
            raise StoreError(f"value cannot be encoded as CBOR: {exc}") from exc
        return [_PUT_ENCODED, table, _check_key(op.key), value]
    if isinstance(op, Delete):
        return [_DELETE, table, _check_key(op.key)]
    if isinstance(op, CreateTable):
        return [_CREATE, table]
    return [_DROP, table]


class KeyedLog:
    """Named tables of key → value on one log file; also the log's ``Reducer``."""

    def __init__(self, encoded_values: bool = False) -> None:
        self._tables: dict[str, dict[Key, _Entry]] = {}
        self._encoded_values = encoded_values
        self._snapshot: list[tuple[str, dict[Key, _Entry], dict[Key, _Entry]]] = []
        self._live_bytes = 0
        # Held tables (hold): their owner, and the frame bytes one row takes (an estimate,
        # measured again at each compaction).
        self._held: dict[str, HeldRows] = {}
        self._row_bytes: dict[str, int] = {}
        self._held_snapshot: list[tuple[str, list[tuple[Key, Any]]]] = []
        self._log: Log | None = None
        self.version = 0  # bumped by every applied record, so views can cache what they read

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        fsync: Durability | str | float = "always",
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
        readonly: bool = False,
        compact_ratio: float = 0.5,
        compact_min_bytes: int = 1 << 20,
        encoded_values: bool = False,
    ) -> KeyedLog:
        """Open or create ``path``; ``report`` says what recovery kept and dropped.

        ``encoded_values`` writes each value as embedded CBOR bytes and keeps it encoded in
        memory, decoding on every read: about 40% of the memory of decoded values, for about
        4 µs per read, and each read returns a fresh object. (Each value is still decoded once
        when applied, to check it, so the open is not slower, nor much faster.) For stores
        that are read mostly once at start (claims, queued messages). A file may hold both
        kinds; the option only decides how new puts are written.
        """
        keyed = cls(encoded_values)
        keyed._log = Log.open(
            path,
            keyed,
            fsync=fsync,
            max_record_size=max_record_size,
            readonly=readonly,
            compact_ratio=compact_ratio,
            compact_min_bytes=compact_min_bytes,
        )
        return keyed

    @property
    def log(self) -> Log:
        if self._log is None:
            raise StoreError("KeyedLog used before open(); call KeyedLog.open(path)")
        return self._log

    @property
    def report(self) -> RecoveryReport:
        return self.log.report

    @property
    def path(self) -> str:
        return self.log.path

    def health(self) -> StoreHealth:
        return self.log.health()

    def stats(self) -> LogStats:
        return self.log.stats()

    # -- reading ---------------------------------------------------------------------------------

    def table(self, name: str) -> Table:
        """A handle on table ``name`` (it need not exist yet; a put creates it)."""
        return Table(self, _check_name(name))

    def tables(self) -> list[str]:
        return list(self._tables)

    def has_table(self, name: str) -> bool:
        return name in self._tables

    def rows(self, name: str) -> dict[Key, Any]:
        """A new dict of table ``name`` (empty when it does not exist)."""
        # list() first: the flusher thread may add keys while this runs.
        return {key: _value(entry) for key, entry in list(self._tables.get(name, {}).items())}

    def lookup(self, table: str, key: Key, default: Any = None) -> Any:
        entry = self._tables.get(table, {}).get(key)
        return default if entry is None else _value(entry)

    def count(self, table: str) -> int:
        return len(self._tables.get(table, {}))

    def iter_items(self, table: str) -> Iterator[tuple[Key, Any]]:
        """Items of ``table`` as of now (a snapshot of the keys, safe across awaits)."""
        for key, entry in list(self._tables.get(table, {}).items()):
            yield key, _value(entry)

    def hold(self, name: str, owner: HeldRows) -> None:
        """From now on ``owner`` keeps table ``name``: the index drops its rows (read them
        first), writes to the table go to the file only, and compaction writes the rows
        ``owner.held_rows()`` gives. Only :meth:`write_flat` and :meth:`commit_sync` may write
        to it afterwards (compaction snapshots the owner on the writing thread)."""
        rows = self._tables.pop(_check_name(name), {})
        size = sum(entry[1] for entry in rows.values())
        self._live_bytes -= size
        self._row_bytes[name] = size // len(rows) if rows else 32
        self._held[name] = owner

    # -- writing ---------------------------------------------------------------------------------

    def _record(self, ops: Sequence[Op]) -> list[Any]:
        if not ops:
            raise StoreError("an empty commit stores nothing; pass at least one op")
        if len(ops) == 1:
            return _encode_op(ops[0], self._encoded_values)
        return [_BATCH, [_encode_op(op, self._encoded_values) for op in ops]]

    async def commit(self, ops: Sequence[Op], *, durable: bool = True) -> None:
        """Store ``ops`` atomically (one frame); returns when durable per the policy.

        ``durable=False``: no fsync on this commit's account (``Log.append``), for state that
        may be lost on power failure.
        """
        if self._held:  # its compaction would snapshot the owner on the log's worker thread
            raise StoreError(f"commit() on a log with held tables {sorted(self._held)}")
        await self.log.append(self._record(ops), durable=durable)

    def write(self, ops: Sequence[Op]) -> int:
        """Store ``ops`` atomically (one frame) in the OS now, without fsync; a ticket for
        ``log.synced`` (``Log.write``: the broker's write-ahead path, issue 17).

        The per-message path: the ops are not validated one by one (the caller builds them
        from its own state: table names and keys are its constants and counters), and the
        index takes their values as they are (so the caller must not mutate them later)."""
        if self._encoded_values or not ops:
            return self.log.write(self._record(ops))
        return self.write_raw(
            [
                [_PUT, op.table, op.key, op.value]
                if type(op) is Put
                else [_DELETE, op.table, op.key]
                if type(op) is Delete
                else _encode_op(op, False)
                for op in ops
            ]
        )

    def write_raw(self, raw: list[list[Any]]) -> int:
        """:meth:`write` of ops already in record form: ``[RAW_PUT, table, key, value]`` and
        ``[RAW_DELETE, table, key]`` only (the broker's per-turn record, built without any
        intermediate object)."""
        record = raw[0] if len(raw) == 1 else [_BATCH, raw]
        tables = self._tables

        def applied(size: int) -> None:
            self.version += 1
            share = size // len(raw)
            live = self._live_bytes
            for op in raw:
                if op[1] in self._held:
                    continue  # its owner has it (hold)
                table = tables.get(op[1])
                if table is None:
                    table = tables[op[1]] = {}
                if op[0] == _PUT:
                    old = table.get(op[2])
                    table[op[2]] = (op[3], share, False)
                    live += share if old is None else share - old[1]
                else:
                    old = table.pop(op[2], None)
                    if old is not None:
                        live -= old[1]
            self._live_bytes = live

        return self.log.write(record, applied)

    def write_flat(self, flat: list[Any], count: int) -> int:
        """:meth:`write_raw` of ``count`` ops laid one after another in ``flat``
        (``RAW_PUT, table, key, value`` and ``RAW_DELETE, table, key``), stored as one flat
        batch record (``_FLAT``); the caller hands ``flat`` over and never mutates it."""
        tables = self._tables
        held = self._held

        def applied(size: int) -> None:
            self.version += 1
            share = size // count
            live = self._live_bytes
            i, end = 0, len(flat)
            while i < end:
                kind = flat[i]
                if kind >= _ROWS or flat[i + 1] in held:
                    if flat[i + 1] not in held:  # batched ops on a table of the index
                        self._live_bytes = live
                        for op in _unflatten(flat[i : i + _WIDTH[kind]]):
                            self._apply_op(op, share)
                        live = self._live_bytes
                    i += _WIDTH[kind]  # a held table's owner has it already
                    continue
                table = tables.get(flat[i + 1])
                if kind == _SET:  # as on replay (_apply_op): no table is created
                    if table is not None:
                        _set_item(table, flat[i + 2], flat[i + 3], flat[i + 4])
                    i += 5
                    continue
                if table is None:
                    table = tables[flat[i + 1]] = {}
                if flat[i] == _PUT:
                    old = table.get(flat[i + 2])
                    table[flat[i + 2]] = (flat[i + 3], share, False)
                    live += share if old is None else share - old[1]
                    i += 4
                else:
                    old = table.pop(flat[i + 2], None)
                    if old is not None:
                        live -= old[1]
                    i += 3
            self._live_bytes = live

        return self.log.write([_FLAT, flat], applied)

    def commit_sync(
        self, ops: Sequence[Op], *, split_to_fit: bool = False, durable: bool = True
    ) -> None:
        """``commit`` that blocks. With ``split_to_fit``, ops too large for one record are
        stored as several records in order (each atomic, the whole no longer): for bulk loads."""
        if not split_to_fit:
            self.log.append_sync(self._record(ops), durable=durable)
            return
        for record in self._fitting_records(ops):
            self.log.append_sync(record, durable=durable)

    def _fitting_records(self, ops: Sequence[Op]) -> list[list[Any]]:
        record = self._record(ops)
        if len(ops) == 1 or len(cbor2.dumps(record)) <= self.log.max_record_size:
            return [record]
        half = len(ops) // 2
        return self._fitting_records(ops[:half]) + self._fitting_records(ops[half:])

    async def drop_table(self, name: str) -> None:
        await self.commit([DropTable(name)])

    def drop_table_sync(self, name: str) -> None:
        self.commit_sync([DropTable(name)])

    def compact(self) -> None:
        self.log.compact()

    def sync(self) -> None:
        self.log.sync()

    def close(self) -> None:
        self.log.close()

    async def aclose(self) -> None:
        await self.log.aclose()

    # -- Reducer ---------------------------------------------------------------------------------

    def apply(self, record: Any, size: int) -> None:
        self.version += 1
        # Fast path for the common record, a put: replay time is dominated by this method.
        if (
            type(record) is list
            and len(record) == 4
            and type(record[0]) is int
            and (record[0] == _PUT or (record[0] == _PUT_ENCODED and _check_encoded(record[3])))
            and type(record[1]) is str
            and record[1]
            and type(record[2]) in _KEY_TYPES
            and record[1] not in self._held
        ):
            table = self._tables.get(record[1])
            if table is None:
                table = self._tables[record[1]] = {}
            old = table.get(record[2])
            table[record[2]] = (record[3], size, record[0] == _PUT_ENCODED)
            self._live_bytes += size if old is None else size - old[1]
            return
        if type(record) is not list or not record or type(record[0]) is not int:
            raise StoreError(f"not a keyed-log record: {str(record)[:80]}")
        if record[0] == _BATCH or record[0] == _FLAT:
            if len(record) != 2 or not isinstance(record[1], list) or not record[1]:
                raise StoreError("malformed batch record")
            ops = record[1] if record[0] == _BATCH else _unflatten(record[1])
            for op in ops:
                self._check_op(op)
            share = size // len(ops)
            for op in ops:
                self._apply_op(op, share)
            return
        self._check_op(record)
        self._apply_op(record, size)

    @staticmethod
    def _check_op(op: Any) -> None:
        arity = {_PUT: 4, _PUT_ENCODED: 4, _DELETE: 3, _CREATE: 2, _DROP: 2, _SET: 5}
        if (
            type(op) is not list
            or not op
            or type(op[0]) is not int  # also keeps unhashable kinds out of the dict lookup
            or op[0] not in arity
            or len(op) != arity[op[0]]
        ):
            raise StoreError(f"malformed keyed-log op: {str(op)[:80]}")
        _check_name(op[1])
        if op[0] in (_PUT, _PUT_ENCODED, _DELETE, _SET):
            _check_key(op[2])
        if op[0] == _SET and (type(op[3]) is not int or op[3] < 0):
            raise StoreError(f"malformed keyed-log op: {str(op)[:80]} (position must be >= 0)")
        if op[0] == _PUT_ENCODED:
            _check_encoded(op[3])

    def _apply_op(self, op: list[Any], size: int) -> None:
        kind, name = op[0], op[1]
        if name in self._held:
            return  # its owner has it (hold)
        if kind in (_PUT, _PUT_ENCODED):
            table = self._tables.setdefault(name, {})
            old = table.get(op[2])
            if old is not None:
                self._live_bytes -= old[1]
            table[op[2]] = (op[3], size, kind == _PUT_ENCODED)
            self._live_bytes += size
        elif kind == _SET:
            if name in self._tables:
                _set_item(self._tables[name], op[2], op[3], op[4])
        elif kind == _DELETE:
            old = self._tables.get(name, {}).pop(op[2], None)
            if old is not None:
                self._live_bytes -= old[1]
        elif kind == _CREATE:
            self._tables.setdefault(name, {})
        else:
            dropped = self._tables.pop(name, None)
            if dropped is not None:
                self._live_bytes -= sum(entry[1] for entry in dropped.values())

    def live_bytes(self) -> int:
        if not self._held:
            return self._live_bytes
        rows = sum(len(owner) * self._row_bytes[name] for name, owner in self._held.items())
        return self._live_bytes + rows

    def live_records(self) -> Iterator[Any]:
        # Under the log's lock: copy each table (one C-level dict copy, milliseconds for 100k
        # keys, one new object per table); the records are generated from the copies later,
        # outside the lock, one short-lived list at a time (see gcpause.py for why that
        # matters). Held tables: their owner's snapshot (HeldRows.held_rows).
        self._snapshot = [(name, dict(table), table) for name, table in self._tables.items()]
        self._held_snapshot = [(name, owner.held_rows()) for name, owner in self._held.items()]
        return self._records_of(self._snapshot, self._held_snapshot)

    @staticmethod
    def _records_of(
        snapshot: list[tuple[str, dict[Key, _Entry], dict[Key, _Entry]]],
        held: list[tuple[str, list[tuple[Key, Any]]]],
    ) -> Iterator[Any]:
        for name, copy, _ in snapshot:
            yield [_CREATE, name]
            for key, entry in copy.items():
                yield [_PUT_ENCODED if entry[2] else _PUT, name, key, entry[0]]
        for name, rows in held:
            yield [_CREATE, name]
            for key, value in rows:
                yield [_PUT, name, key, value]

    def compacted(self, sizes: Sequence[int]) -> None:
        # An entry replaced since the snapshot (a put or delete applied during a compaction
        # beside appends) keeps the size of its own, newer frame.
        position = 0
        with gc_paused():  # one new tuple per key, under the log's lock (gcpause.py)
            for _, copy, table in self._snapshot:
                position += 1  # the table's create record
                for key, entry in copy.items():
                    if table.get(key) is entry:
                        table[key] = (entry[0], sizes[position], entry[2])
                    position += 1
        for name, rows in self._held_snapshot:
            position += 1
            if rows:  # the owner's rows are counted as their number times this
                held = sizes[position : position + len(rows)]
                self._row_bytes[name] = max(1, sum(held) // len(rows))
            position += len(rows)
        if position != len(sizes):
            raise StoreError(f"compaction wrote {len(sizes)} records, expected {position}")
        self._snapshot = []
        self._held_snapshot = []
        self._live_bytes = sum(
            entry[1] for table in self._tables.values() for entry in table.values()
        )


def _unflatten(flat: list[Any]) -> list[list[Any]]:
    """The ops of a ``_FLAT`` record, batched ones as one op per row (replay: checked one by
    one afterwards)."""
    ops: list[list[Any]] = []
    i, end = 0, len(flat)
    while i < end:
        width = _WIDTH.get(flat[i], 0) if type(flat[i]) is int else 0
        if width == 0 or i + width > end:
            raise StoreError(f"malformed flat batch record at op {len(ops)}: {str(flat[i:])[:80]}")
        if flat[i] >= _ROWS:
            ops.extend(_batched(flat[i : i + width]))
        else:
            ops.append(flat[i : i + width])
        i += width
    return ops


def _batched(op: list[Any]) -> list[list[Any]]:
    """One op per row of a batched op (``_ROWS``, ``_SETS``, ``_DELETES``)."""
    kind, table, items = op[0], op[1], op[-1]
    if type(items) is not list or (
        kind != _DELETES and (type(op[2]) is not int or op[2] < (1 if kind == _ROWS else 0))
    ):
        raise StoreError(f"malformed batched keyed-log op: {str(op)[:80]}")
    stride = 1 if kind == _DELETES else (op[2] + 1 if kind == _ROWS else 2)
    if len(items) % stride:
        raise StoreError(f"malformed batched keyed-log op: {str(op)[:80]} (a row is cut short)")
    if kind == _DELETES:
        return [[_DELETE, table, key] for key in items]
    if kind == _SETS:
        return [[_SET, table, items[j], op[2], items[j + 1]] for j in range(0, len(items), 2)]
    return [
        [_PUT, table, items[j], items[j + 1 : j + stride]] for j in range(0, len(items), stride)
    ]


def _set_item(table: dict[Key, _Entry], key: Any, position: int, item: Any) -> None:
    """``_SET``: a copy of the array with ``item`` at ``position`` (a copy: a compaction may be
    encoding the old one on its thread); nothing when the key is gone (deleted since) or its
    value is no array that long. The entry keeps its size: the set's own bytes are dead."""
    entry = table.get(key)
    if entry is None or entry[2] or type(entry[0]) is not list or len(entry[0]) <= position:
        return
    value = entry[0].copy()
    value[position] = item
    table[key] = (value, entry[1], False)


def _check_encoded(value: Any) -> bool:
    """An embedded value must decode: checked once when applied, so reads cannot fail later."""
    if type(value) is not bytes:
        raise StoreError(f"an encoded put holds {type(value).__name__}, not bytes")
    try:
        cbor2.loads(value)
    except (cbor2.CBORDecodeError, ValueError, TypeError) as exc:
        raise StoreError(f"an encoded value is not valid CBOR ({exc})") from exc
    return True


def _value(entry: _Entry) -> Any:
    if not entry[2]:
        return entry[0]
    return cbor2.loads(entry[0])  # checked by _check_encoded when the record was applied


class Table:
    """One named table of a ``KeyedLog``: a dict-like view with durable writes."""

    __slots__ = ("_keyed", "name")

    def __init__(self, keyed: KeyedLog, name: str) -> None:
        self._keyed = keyed
        self.name = name

    def get(self, key: Key, default: Any = None) -> Any:
        return self._keyed.lookup(self.name, key, default)

    def __getitem__(self, key: Key) -> Any:
        missing = object()
        value = self._keyed.lookup(self.name, key, missing)
        if value is missing:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        missing = object()
        if type(key) not in _KEY_TYPES:
            return False
        return self._keyed.lookup(self.name, cast(Key, key), missing) is not missing

    def __len__(self) -> int:
        return self._keyed.count(self.name)

    def items(self) -> Iterator[tuple[Key, Any]]:
        return self._keyed.iter_items(self.name)

    def keys(self) -> list[Key]:
        return [key for key, _ in self.items()]

    async def put(self, key: Key, value: Any, *, durable: bool = True) -> None:
        """Store ``value`` under ``key``; returns when durable (per the log's policy)."""
        await self._keyed.commit([Put(self.name, key, value)], durable=durable)

    def put_sync(self, key: Key, value: Any, *, durable: bool = True) -> None:
        self._keyed.commit_sync([Put(self.name, key, value)], durable=durable)

    async def delete(self, key: Key, *, durable: bool = True) -> None:
        """Remove ``key`` (a tombstone record); also fine when it is absent."""
        await self._keyed.commit([Delete(self.name, key)], durable=durable)

    def delete_sync(self, key: Key, *, durable: bool = True) -> None:
        self._keyed.commit_sync([Delete(self.name, key)], durable=durable)
