"""KeyedLog and Table: round trip, reopen, last write wins, tombstones, tables, compaction."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edge_broker.store import (
    CreateTable,
    Delete,
    DropTable,
    Key,
    KeyedLog,
    Put,
    StoreError,
)
from edge_broker.store.frame import HEADER_SIZE


def reopen(path: Path) -> KeyedLog:
    return KeyedLog.open(str(path), fsync="never")


def test_round_trip_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    table = keyed.table("claims")
    values: dict[Key, object] = {
        "text": "héllo",
        7: {"nested": [1, 2.5, None, True, b"\x00\xff"]},
        b"\x01bin": [],
        -3: {"": {}},
    }
    for key, value in values.items():
        table.put_sync(key, value)
    assert dict(table.items()) == values
    keyed.close()
    again = reopen(path)
    assert again.report.clean and again.report.records == len(values)
    assert dict(again.table("claims").items()) == values
    assert again.table("claims")[7] == values[7]
    with pytest.raises(KeyError):
        again.table("claims")["absent"]
    again.close()


def test_last_write_wins_and_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    table = keyed.table("t")
    for i in range(10):
        table.put_sync("k", i)
    table.put_sync("gone", 1)
    table.delete_sync("gone")
    table.delete_sync("never-existed")
    assert table.get("k") == 9 and "gone" not in table and len(table) == 1
    keyed.close()
    again = reopen(path)
    assert again.table("t").get("k") == 9
    assert "gone" not in again.table("t")
    assert again.table("t").get("gone", "default") == "default"
    again.close()


def test_int_str_and_bytes_keys_are_distinct(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="never")
    table = keyed.table("t")
    table.put_sync(1, "int")
    table.put_sync("1", "str")
    table.put_sync(b"1", "bytes")
    keyed.close()
    again = reopen(tmp_path / "a.log")
    assert sorted(str(v) for _, v in again.table("t").items()) == ["bytes", "int", "str"]
    assert again.table("t")[1] == "int" and again.table("t")[b"1"] == "bytes"
    again.close()


def test_tables_are_namespaces_and_drop_removes_all_keys(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    keyed.table("a").put_sync("k", "from a")
    keyed.table("b").put_sync("k", "from b")
    keyed.commit_sync([CreateTable("empty")])
    keyed.drop_table_sync("a")
    assert sorted(keyed.tables()) == ["b", "empty"]
    keyed.close()
    again = reopen(path)
    assert sorted(again.tables()) == ["b", "empty"]
    assert again.table("b")["k"] == "from b" and len(again.table("a")) == 0
    again.close()


def test_batch_commit_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never")
    keyed.table("t").put_sync("old", 1)
    keyed.commit_sync([Put("t", "a", 1), Put("u", "b", 2), Delete("t", "old"), DropTable("x")])
    assert keyed.stats().appends == 2
    keyed.close()
    # Cutting inside the batch frame drops the whole batch: nothing of it is half applied.
    size = path.stat().st_size
    os.truncate(path, size - 3)
    again = reopen(path)
    assert dict(again.table("t").items()) == {"old": 1} and "u" not in again.tables()
    assert again.report.truncated_to is not None
    again.close()


def test_compaction_keeps_exactly_the_live_set(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=1 << 30)
    expected: dict[str, dict[object, object]] = {"t": {}, "u": {}, "kept-empty": {}}
    for round_ in range(5):
        for i in range(200):
            keyed.table("t").put_sync(i, {"round": round_, "i": i})
            expected["t"][i] = {"round": round_, "i": i}
    for i in range(0, 200, 3):
        keyed.table("t").delete_sync(i)
        del expected["t"][i]
    keyed.table("u").put_sync("x", "y")
    expected["u"]["x"] = "y"
    keyed.table("dropped").put_sync("z", 1)
    keyed.drop_table_sync("dropped")
    keyed.commit_sync([CreateTable("kept-empty")])
    before = path.stat().st_size
    keyed.compact()
    after = path.stat().st_size
    assert after < before / 3
    assert keyed.stats().compactions == 1
    # Live bytes are every frame but the three table-create records (about 20 bytes each).
    assert after - HEADER_SIZE - 100 < keyed.stats().live_bytes < after - HEADER_SIZE
    assert {name: dict(keyed.table(name).items()) for name in keyed.tables()} == expected
    keyed.table("u").put_sync("after", "compaction")
    keyed.close()
    again = reopen(path)
    expected["u"]["after"] = "compaction"
    assert again.report.clean
    assert {name: dict(again.table(name).items()) for name in again.tables()} == expected
    assert not os.path.exists(str(path) + ".compact")
    again.close()


def test_compaction_triggers_itself_past_ratio_and_size(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_ratio=0.5, compact_min_bytes=4096)
    table = keyed.table("t")
    for i in range(2000):
        table.put_sync(i % 10, "x" * 50)
    stats = keyed.stats()
    assert stats.compactions >= 1
    assert stats.file_size < 2 * 4096 + 10 * 80
    keyed.close()
    again = reopen(path)
    assert dict(again.table("t").items()) == {i: "x" * 50 for i in range(10)}
    again.close()


def test_no_compaction_below_the_size_threshold(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="never", compact_min_bytes=1 << 20)
    for i in range(500):
        keyed.table("t").put_sync("same", i)
    assert keyed.stats().compactions == 0
    keyed.close()


def test_readonly_open_reads_without_lock_and_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    writer = KeyedLog.open(str(path))
    writer.table("t").put_sync("k", "v")
    reader = KeyedLog.open(str(path), readonly=True)
    assert reader.table("t")["k"] == "v"
    with pytest.raises(StoreError, match="read-only"):
        reader.table("t").put_sync("k", "w")
    reader.close()
    writer.close()


def test_second_writer_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    first = KeyedLog.open(str(path))
    with pytest.raises(StoreError, match="another process has this log open"):
        KeyedLog.open(str(path))
    first.close()
    second = KeyedLog.open(str(path))
    second.close()


def test_readonly_open_of_a_missing_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="missing.log.*no such file or directory; check the path"):
        KeyedLog.open(str(tmp_path / "missing.log"), readonly=True)


def test_record_size_limit_is_enforced_with_a_clear_error(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), max_record_size=1024)
    keyed.table("t").put_sync("small", "x" * 900)
    with pytest.raises(StoreError, match="exceeds max_record_size 1024") as raised:
        keyed.table("t").put_sync("big", "x" * 2000)
    assert raised.value.durable is False
    assert "big" not in keyed.table("t") and keyed.health().healthy
    keyed.close()


@pytest.mark.parametrize("key", [1.5, None, True, ("a",), ["a"]])
def test_bad_keys_are_refused(tmp_path: Path, key: object) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    with pytest.raises(StoreError, match="use str, int or bytes"):
        keyed.table("t").put_sync(key, 1)  # type: ignore[arg-type]
    keyed.close()


def test_unencodable_value_and_bad_table_name_are_refused(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    with pytest.raises(StoreError, match="cannot be encoded as CBOR"):
        keyed.table("t").put_sync("k", object())
    with pytest.raises(StoreError, match="table name"):
        keyed.table("")
    with pytest.raises(StoreError, match="empty commit"):
        keyed.commit_sync([])
    keyed.close()
    assert KeyedLog.open(str(tmp_path / "a.log")).report.records == 0


def test_closed_log_refuses_appends(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    keyed.close()
    with pytest.raises(StoreError, match="closed"):
        keyed.table("t").put_sync("k", 1)


def test_foreign_file_is_not_touched(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are somebody else's notes, not a log\n" * 10)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an edge-broker log"):
        KeyedLog.open(str(path))
    assert path.read_bytes() == before


def test_newer_format_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    KeyedLog.open(str(path)).close()
    data = bytearray(path.read_bytes())
    data[9] = 2  # version field (u16 BE at offset 8)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match="format version 2"):
        KeyedLog.open(str(path))


def test_missing_directory_is_named_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no such file or directory; check the path") as raised:
        KeyedLog.open(str(tmp_path / "no" / "such" / "a.log"))
    assert "no/such" in str(raised.value)


def test_health_stats_and_report_text(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("k", "v")
    health = keyed.health()
    assert health.healthy and health.error is None and health.path == str(path)
    stats = keyed.stats()
    assert stats.appends == 1 and stats.fsyncs >= 1 and stats.file_size == path.stat().st_size
    assert str(keyed.report) == f"{path}: 0 records, {HEADER_SIZE} bytes"
    keyed.close()
    again = KeyedLog.open(str(path))
    assert str(again.report) == f"{path}: 1 records, {path.stat().st_size} bytes"
    again.close()


def test_lock_is_held_against_another_process(tmp_path: Path) -> None:
    import subprocess
    import sys

    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    code = (
        "import sys\n"
        "from edge_broker.store import KeyedLog, StoreError\n"
        "try:\n    KeyedLog.open(sys.argv[1])\n"
        "except StoreError as exc:\n    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert "another process has this log open" in result.stdout
    keyed.close()


async def test_sync_and_async_writes_mix_in_one_order(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), compact_min_bytes=2048, compact_ratio=0.3)
    table = keyed.table("t")

    async def writer(w: int) -> None:
        for n in range(40):
            await table.put(f"{w}", n)

    tasks = [asyncio.ensure_future(writer(w)) for w in range(8)]
    for n in range(40):
        await asyncio.to_thread(table.put_sync, "sync", n)
    await asyncio.gather(*tasks)
    assert keyed.stats().compactions >= 1
    expected = {**{f"{w}": 39 for w in range(8)}, "sync": 39}
    assert dict(table.items()) == expected
    await keyed.aclose()
    again = reopen(path)
    assert again.report.clean and dict(again.table("t").items()) == expected
    again.close()


def test_records_stored_under_a_larger_limit_stay_readable_and_compactable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), max_record_size=64 << 10)
    keyed.table("t").put_sync("big", "x" * (40 << 10))
    keyed.close()
    smaller = KeyedLog.open(str(path), max_record_size=1024)
    assert smaller.report.clean and len(smaller.table("t")["big"]) == 40 << 10
    smaller.compact()
    with pytest.raises(StoreError, match="max_record_size 1024"):
        smaller.table("t").put_sync("big2", "x" * 2048)
    smaller.close()
    assert KeyedLog.open(str(path), readonly=True).table("t")["big"] == "x" * (40 << 10)


async def test_stored_value_is_what_was_written_not_the_callers_object(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    value = {"list": [1, 2], "tuple": (1, 2)}
    await keyed.table("t").put("async", value)
    keyed.table("t").put_sync("sync", value)
    value["list"].append(3)  # type: ignore[attr-defined]
    for key in ("async", "sync"):
        assert keyed.table("t")[key] == {"list": [1, 2], "tuple": [1, 2]}  # as after a reopen
    await keyed.aclose()


def test_path_objects_are_accepted(tmp_path: Path) -> None:
    keyed = KeyedLog.open(tmp_path / "a.log")
    keyed.table("t").put_sync("k", 1)
    assert keyed.path == str(tmp_path / "a.log")
    keyed.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_record_size": 0}, "max_record_size 0"),
        ({"compact_ratio": 1.5}, "compact_ratio 1.5"),
        ({"fsync": "often"}, "fsync policy 'often'"),
    ],
)
def test_bad_options_are_refused_before_touching_the_file(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    with pytest.raises(StoreError, match=message):
        KeyedLog.open(str(tmp_path / "a.log"), **options)  # type: ignore[arg-type]
    assert not (tmp_path / "a.log").exists()


async def test_sync_close_with_queued_appends_is_refused(tmp_path: Path) -> None:
    import asyncio

    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    tasks = [asyncio.ensure_future(keyed.table("t").put(i, i)) for i in range(5)]
    await asyncio.sleep(0)  # the appends are queued, the flusher has not run yet
    with pytest.raises(StoreError, match="still queued; await aclose"):
        keyed.close()
    await keyed.aclose()
    await asyncio.gather(*tasks)
    assert KeyedLog.open(str(tmp_path / "a.log"), readonly=True).report.records == 5


def test_encoded_values_read_back_fresh_copies_and_survive_compaction(tmp_path: Path) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(path, encoded_values=True, fsync="never")
    table = keyed.table("t")
    table.put_sync("k", {"list": [1, 2]})
    first = table["k"]
    first["list"].append(3)
    assert table["k"] == {"list": [1, 2]}  # every read decodes its own copy
    with pytest.raises(StoreError, match="cannot be encoded as CBOR"):
        table.put_sync("bad", object())
    keyed.compact()
    keyed.close()
    plain = KeyedLog.open(path, fsync="never")  # the option is not a property of the file
    assert plain.table("t")["k"] == {"list": [1, 2]}
    plain.table("t").put_sync("plain", 1)
    plain.close()
    assert dict(KeyedLog.open(path, readonly=True).table("t").items()) == {
        "k": {"list": [1, 2]},
        "plain": 1,
    }
