"""Batched ops and held tables (issue 17): ``RAW_ROWS``/``RAW_SETS``/``RAW_DELETES`` stand for
many rows of one table in one op of a flat batch and replay like the ops one by one; a table
held by its owner (``KeyedLog.hold``) keeps no copy in the index, and compaction writes the
rows the owner gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cbor2
import pytest

from edge_broker.store import KeyedLog, StoreError
from edge_broker.store.frame import scan
from edge_broker.store.keyed import (
    _FLAT,
    RAW_DELETES,
    RAW_PUT,
    RAW_ROWS,
    RAW_SETS,
    Key,
)


def _records(path: Path) -> list[Any]:
    frames = scan(path.read_bytes(), 0, 1 << 30)
    return [cbor2.loads(f.payload) for f in frames if hasattr(f, "payload")]


def test_batched_ops_apply_and_replay_like_the_ops_one_by_one(tmp_path: Path) -> None:
    path = tmp_path / "batched.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    flat = [
        RAW_ROWS, "ref", 3, [1, "a", None, 7, 2, "b", None, [1, 2], 3, "c", None, None],
        RAW_SETS, "ref", 1, [2, 40, 3, 41, 99, 1],  # 99: no such row, nothing
        RAW_SETS, "ref", 2, [3, True],
        RAW_DELETES, "ref", [1, 98],
        RAW_PUT, "msg", 5, ["t", b"x"],
    ]  # fmt: skip
    keyed.write_flat(flat, 5)
    expected = {2: ["b", 40, [1, 2]], 3: ["c", 41, True]}
    assert keyed.rows("ref") == expected
    assert keyed.rows("msg") == {5: ["t", b"x"]}
    keyed.close()
    assert [r[0] for r in _records(path)] == [_FLAT]  # one record
    again = KeyedLog.open(str(path), fsync="never")
    assert again.rows("ref") == expected
    again.close()


@pytest.mark.parametrize(
    "op",
    [
        [RAW_ROWS, "t", 2, [1, "a"]],  # a row without its second field
        [RAW_ROWS, "t", 0, []],  # rows of no fields
        [RAW_ROWS, "t", "2", [1, "a", "b"]],  # a width that is no int
        [RAW_SETS, "t", -1, [1, 2]],  # a negative position
        [RAW_SETS, "t", 1, [1]],  # a key without its item
        [RAW_DELETES, "t", "1"],  # keys that are no array
        [RAW_DELETES, "t", [1.5]],  # a key of the wrong type
    ],
)
def test_a_malformed_batched_op_is_refused_on_replay(op: list[Any]) -> None:
    with pytest.raises(StoreError, match="malformed|has type float"):
        KeyedLog().apply([_FLAT, op], 64)


class _Owner:
    """An owner of table ``ref`` holding its rows itself, as the broker's journals do."""

    def __init__(self) -> None:
        self.rows: dict[Key, Any] = {}
        self.asked = 0

    def __len__(self) -> int:
        return len(self.rows)

    def held_rows(self) -> list[tuple[Key, Any]]:
        self.asked += 1
        return [(key, list(value)) for key, value in sorted(self.rows.items())]


def test_a_held_table_keeps_no_copy_in_the_index_and_compacts_from_its_owner(
    tmp_path: Path,
) -> None:
    path = tmp_path / "held.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    keyed.write_flat([RAW_ROWS, "ref", 2, [1, "old", 0]], 1)
    owner = _Owner()
    owner.rows.update(keyed.rows("ref"))  # the owner reads the table at start, then holds it
    keyed.hold("ref", owner)
    assert keyed.count("ref") == 0 and not keyed.has_table("ref")
    for i in range(2, 200):
        keyed.write_flat([RAW_ROWS, "ref", 2, [i, "c", i], RAW_PUT, "msg", i, [b"p" * 50]], 2)
        owner.rows[i] = ["c", i]
    keyed.write_flat([RAW_SETS, "ref", 1, [5, 500], RAW_DELETES, "ref", list(range(10, 200))], 2)
    owner.rows[5] = ["c", 500]
    for i in range(10, 200):
        del owner.rows[i]
    assert keyed.count("ref") == 0  # nothing of the writes went into the index
    assert keyed.rows("msg")[7] == [b"p" * 50]  # the other tables are indexed as before
    keyed.compact()
    assert owner.asked == 1
    # the live bytes count the owner's rows at the size compaction measured
    assert 0 < keyed.live_bytes() - sum(e[1] for e in keyed._tables["msg"].values()) < 9 * 40
    keyed.write_flat([RAW_DELETES, "ref", [1]], 1)
    del owner.rows[1]
    keyed.close()
    again = KeyedLog.open(str(path), fsync="never")
    assert again.rows("ref") == owner.rows == {i: ["c", 500 if i == 5 else i] for i in range(2, 10)}
    assert len(again.rows("msg")) == 198
    again.close()


def test_commit_is_refused_on_a_log_with_held_tables(tmp_path: Path) -> None:
    """The async commit path compacts on the log's worker thread, where an owner must not be
    read while the event loop changes it."""
    import asyncio

    from edge_broker.store import Put

    keyed = KeyedLog.open(str(tmp_path / "held.log"), fsync="never")
    keyed.hold("ref", _Owner())
    with pytest.raises(StoreError, match="held tables"):
        asyncio.run(keyed.commit([Put("msg", 1, 1)]))
    keyed.close()
