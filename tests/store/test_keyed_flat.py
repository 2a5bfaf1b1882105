"""KeyedLog.write_flat (issue 17): a batch of ops laid one after another in one array is one
record, applies like the same ops one by one, and replays to the same tables."""

from __future__ import annotations

from pathlib import Path

import cbor2
import pytest

from edge_broker.store import KeyedLog, StoreError
from edge_broker.store.frame import scan
from edge_broker.store.keyed import _FLAT, RAW_DELETE, RAW_PUT, _unflatten


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
