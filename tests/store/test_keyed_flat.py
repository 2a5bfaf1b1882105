"""KeyedLog.write_flat (issue 17): a batch of ops laid one after another in one array is one
record, applies like the same ops one by one, and replays to the same tables."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

from edge_broker.store import KeyedLog, StoreError
from edge_broker.store.frame import scan
from edge_broker.store.keyed import _FLAT, RAW_DELETE, RAW_PUT, RAW_SET, _unflatten


def _records(path: Path) -> list[object]:
    data = path.read_bytes()
    frames = scan(data, 0, 1 << 30)
    return [cbor2.loads(f.payload) for f in frames if hasattr(f, "payload")]


def test_a_flat_batch_is_one_record_and_replays_to_the_same_tables(tmp_path: Path) -> None:
    path = tmp_path / "flat.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    keyed.table("ref").put_sync(1, ["old", 1])
    keyed.table("msg").put_sync(2, ["gone"])
    appends = keyed.stats().appends
    flat = [
        RAW_PUT, "ref", 1, ["c", 5, 1, False, (), 7, False],
        RAW_DELETE, "msg", 2,
        RAW_PUT, "msg", 5, ["t/1", b"x", 1, False, None, None, None],
        RAW_PUT, "q", "c\x003", 1,
        RAW_DELETE, "q", "missing",
    ]  # fmt: skip
    keyed.write_flat(flat, 5)
    assert keyed.stats().appends == appends + 1  # one record for the five ops
    expected = {
        "ref": {1: ["c", 5, 1, False, [], 7, False]},
        "msg": {5: ["t/1", b"x", 1, False, None, None, None]},
        "q": {"c\x003": 1},
    }
    # applied as written: the index holds the caller's values (the tuple until a replay)
    assert keyed.rows("ref") == {1: ["c", 5, 1, False, (), 7, False]}
    assert keyed.rows("msg") == expected["msg"] and keyed.rows("q") == expected["q"]
    live = keyed.live_bytes()
    keyed.close()
    kinds = [r[0] for r in _records(path) if isinstance(r, list)]
    assert kinds[-1] == _FLAT
    again = KeyedLog.open(str(path), fsync="never")
    assert {t: again.rows(t) for t in expected} == expected
    assert again.live_bytes() == live
    again.close()


def test_a_flat_batch_survives_compaction(tmp_path: Path) -> None:
    path = tmp_path / "flat.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    for i in range(50):
        keyed.write_flat([RAW_PUT, "ref", i, ["c", i], RAW_PUT, "msg", i, [b"p" * 100]], 2)
    keyed.write_flat([x for i in range(0, 50, 2) for x in (RAW_DELETE, "ref", i)], 25)
    keyed.compact()
    keyed.close()
    again = KeyedLog.open(str(path), fsync="never")
    assert again.rows("ref") == {i: ["c", i] for i in range(1, 50, 2)}
    assert len(again.rows("msg")) == 50
    again.close()


@pytest.mark.parametrize(
    "flat",
    [
        [RAW_PUT, "t", 1],  # a put without its value
        [RAW_DELETE, "t"],  # a delete without its key
        [9, "t", 1],  # not a put or a delete
        [True, "t", 1, 2],  # a bool is not an op kind
    ],
)
def test_a_malformed_flat_batch_is_refused_by_name(flat: list[object]) -> None:
    with pytest.raises(StoreError, match="malformed flat batch record"):
        _unflatten(flat)


def test_a_set_changes_one_item_and_replays_and_compacts_to_the_same_rows(tmp_path: Path) -> None:
    """``RAW_SET`` (issue 17 item 2): one item of a stored array, without the array again;
    a set on a key deleted since, or past the array's end, changes nothing."""
    path = tmp_path / "flat.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    keyed.write_flat([RAW_PUT, "ref", 1, ["c", 5, 1, False, None, False, 9]], 1)
    keyed.write_flat([RAW_PUT, "ref", 2, ["c", 6, 1, False, None, False]], 1)
    row = keyed.rows("ref")[1]
    flat = [
        RAW_SET, "ref", 1, 4, 17,
        RAW_DELETE, "ref", 2,
        RAW_SET, "ref", 2, 4, 18,  # deleted: nothing
        RAW_SET, "ref", 1, 40, 1,  # past the end: nothing
        RAW_SET, "nope", 1, 0, 1,  # no such table: nothing
    ]  # fmt: skip
    keyed.write_flat(flat, 5)
    keyed.write_flat([RAW_SET, "ref", 1, 5, True], 1)
    expected = {1: ["c", 5, 1, False, 17, True, 9]}
    assert keyed.rows("ref") == expected
    assert row == ["c", 5, 1, False, None, False, 9]  # the stored array was copied, not changed
    assert "nope" not in keyed.tables()
    live = keyed.live_bytes()
    keyed.close()
    kinds = {op for r in _records(path) if r[0] == _FLAT for op in r[1] if op == RAW_SET}
    assert kinds == {RAW_SET}
    again = KeyedLog.open(str(path), fsync="never")
    assert again.rows("ref") == expected
    assert again.live_bytes() == live
    again.compact()
    again.close()
    third = KeyedLog.open(str(path), fsync="never")
    assert third.rows("ref") == expected
    assert not any(r[0] == _FLAT for r in _records(path))  # compaction wrote the row itself
    third.close()


@pytest.mark.parametrize(
    "flat",
    [
        [RAW_SET, "t", 1, 4],  # a set without its item
        [RAW_SET, "t", 1, -1, 0],  # a negative position
        [RAW_SET, "t", 1, "4", 0],  # a position that is no int
    ],
)
def test_a_malformed_set_is_refused_on_replay(tmp_path: Path, flat: list[object]) -> None:
    keyed = KeyedLog()
    with pytest.raises(StoreError, match="malformed"):
        keyed.apply([_FLAT, flat], 64)
