"""A TinyDB ``Storage`` on the keyed log, so TinyDB queries run on crash-safe data (issue 6).

``TinyDB(path, storage=LogStorage)`` opens (or creates) a log file; ``TinyDB(storage=LogStorage,
keyed=an_open_keyed_log)`` shares a log the broker already holds. Each TinyDB table is a keyed
table named ``tinydb:<table>`` whose keys are the document ids (ints, as TinyDB's ids are), so
other tables in the same file stay invisible to TinyDB, and a service may write documents
through the keyed log directly (``Put("tinydb:claims", 12, doc)``) while TinyDB queries them.

TinyDB hands ``write`` the whole database; ``write`` compares it with the index and appends only
the documents that changed, as one atomic record (a crash keeps the write entirely or not at
all); a write larger than ``max_record_size`` (a bulk ``insert_multiple``) is split into several
records, each atomic, and only a single document over the limit is refused. The comparison is
strict about types (``True`` is not ``1``), so what is read back is what was written. Disk cost
is O(changed documents) per write; CPU cost stays O(documents), as with TinyDB's own storages
(TinyDB reads and writes whole tables).

``read`` returns a deep copy because TinyDB changes the dict it is given. The copy comes from a
pickled snapshot kept in memory (never on disk, so pickle sees only our own data) and rebuilt when
the keyed log's ``version`` moves; ``pickle.loads`` is the fastest deep copy in the standard
library (about 12 ms for 10k claims, against 40 ms for ``copy.deepcopy``).
"""

from __future__ import annotations

import os
import pickle
from typing import Any

from tinydb.storages import Storage

from .durability import Durability
from .errors import StoreError
from .keyed import TINYDB_PREFIX as PREFIX
from .keyed import CreateTable, Delete, DropTable, Key, KeyedLog, Op, Put
from .log import DEFAULT_MAX_RECORD_SIZE


def same_value(left: Any, right: Any) -> bool:
    """Equality that also requires equal types, recursively: Python says ``True == 1 == 1.0``,
    but a document changed from ``1`` to ``True`` must still be written."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(
            same_value(value, right[key]) for key, value in left.items()
        )
    if isinstance(left, list):
        return len(left) == len(right) and all(
            same_value(a, b) for a, b in zip(left, right, strict=True)
        )
    return bool(left == right)


def document_key(doc_id: str) -> Key:
    """The log key of a TinyDB document id: an int for TinyDB's int ids ("12" → 12), else the
    text. Writers that bypass TinyDB (the claim service) use the same int keys."""
    if doc_id.isdecimal() and doc_id.isascii() and str(int(doc_id)) == doc_id:
        return int(doc_id)
    return doc_id


class LogStorage(Storage):
    """TinyDB storage on a ``KeyedLog``; see the module docstring."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        keyed: KeyedLog | None = None,
        fsync: Durability | str | float = "always",
        readonly: bool = False,
        max_record_size: int = DEFAULT_MAX_RECORD_SIZE,
    ) -> None:
        if (path is None) == (keyed is None):
            raise StoreError("LogStorage needs exactly one of a path or an open keyed= log")
        self._owned = keyed is None
        self._snapshot: tuple[int, bytes] | None = None
        self.keyed = (
            keyed
            if keyed is not None
            else KeyedLog.open(
                str(path), fsync=fsync, readonly=readonly, max_record_size=max_record_size
            )
        )

    def _names(self) -> list[str]:
        return [name for name in self.keyed.tables() if name.startswith(PREFIX)]

    def read(self) -> dict[str, dict[str, Any]] | None:
        version = self.keyed.version
        if self._snapshot is None or self._snapshot[0] != version:
            names = self._names()
            if not names:
                return None
            data = {
                name[len(PREFIX) :]: {str(key): doc for key, doc in self.keyed.iter_items(name)}
                for name in names
            }
            self._snapshot = (version, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
        copied: dict[str, dict[str, Any]] = pickle.loads(self._snapshot[1])
        return copied

    def write(self, data: dict[str, dict[str, Any]]) -> None:
        ops: list[Op] = []
        wanted = {PREFIX + name for name in data}
        for name in self._names():
            if name not in wanted:
                ops.append(DropTable(name))
        for short, documents in data.items():
            name = PREFIX + short
            if not self.keyed.has_table(name):
                ops.append(CreateTable(name))
            # TinyDB hands ids as strings; the log keeps each under the key it already has.
            current = {str(key): (key, doc) for key, doc in self.keyed.rows(name).items()}
            for doc_id, document in documents.items():
                stored = current.get(str(doc_id))
                if stored is None:
                    ops.append(Put(name, document_key(str(doc_id)), document))
                elif not same_value(stored[1], document):
                    ops.append(Put(name, stored[0], document))
            wanted_ids = {str(doc_id) for doc_id in documents}
            ops.extend(
                Delete(name, key) for text, (key, _) in current.items() if text not in wanted_ids
            )
        if ops:
            self.keyed.commit_sync(ops, split_to_fit=True)

    def close(self) -> None:
        if self._owned:
            self.keyed.close()
