"""TinyDB on the log: queries, reopen, diff writes, strict types, sharing, crash safety."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from tinydb import Query, TinyDB

from edge_broker.store import KeyedLog, LogStorage, StoreError


def test_insert_update_remove_search_and_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "claims.log")
    db = TinyDB(path, storage=LogStorage)
    claim = Query()
    ids = db.insert_multiple(
        {"topic": f"restricted/dev{i}/t", "owner": f"dev{i}", "n": i} for i in range(20)
    )
    assert ids == list(range(1, 21))
    db.update({"n": 100}, claim.owner == "dev3")
    db.remove(claim.n < 5)
    other = db.table("quarantine")
    other.insert({"topic": "restricted/bad/t", "reason": "signature"})
    assert len(db) == 16 and db.get(claim.owner == "dev3") == {
        "topic": "restricted/dev3/t",
        "owner": "dev3",
        "n": 100,
    }
    db.close()

    db = TinyDB(path, storage=LogStorage)
    assert len(db) == 16 and db.tables() == {"_default", "quarantine"}
    assert [d["owner"] for d in db.search(claim.n >= 18)] == ["dev3", "dev18", "dev19"]
    assert db.get(claim.owner == "dev3")["n"] == 100  # type: ignore[index]
    assert db.search(claim.owner == "dev1") == []
    assert db.table("quarantine").all()[0]["reason"] == "signature"
    assert db.insert({"owner": "new"}) == 21  # document ids continue after reopen
    db.close()


def test_drop_and_truncate_tables_persist(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    db = TinyDB(path, storage=LogStorage)
    db.insert({"a": 1})
    db.table("gone").insert({"b": 2})
    db.table("emptied").insert({"c": 3})
    db.drop_table("gone")
    db.table("emptied").truncate()
    db.close()
    db = TinyDB(path, storage=LogStorage)
    assert db.tables() == {"_default", "emptied"} and db.table("emptied").all() == []
    db.drop_tables()
    db.close()
    db = TinyDB(path, storage=LogStorage)
    assert db.tables() == set() and db.all() == []
    db.close()


def test_a_write_appends_only_what_changed(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    storage_holder: list[LogStorage] = []

    class Spy(LogStorage):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            storage_holder.append(self)

    db = TinyDB(path, storage=Spy)
    db.insert_multiple({"i": i, "pad": "x" * 200} for i in range(2000))
    stats = storage_holder[0].keyed.stats()
    db.update({"pad": "changed"}, Query().i == 1234)
    after = storage_holder[0].keyed.stats()
    assert after.appends == stats.appends + 1
    assert after.bytes_written - stats.bytes_written < 100  # one document, not 2000
    db.insert({"i": "new"})
    db.update({"unchanged": None}, Query().i == "nothing matches")
    assert storage_holder[0].keyed.stats().appends == after.appends + 1
    db.close()


def test_types_survive_exactly(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    db = TinyDB(path, storage=LogStorage)
    doc_id = db.insert({"v": 1, "nested": {"l": [1, 2]}})
    # Python says True == 1 and 1.0 == 1; the stored document must still change type.
    db.update({"v": True, "nested": {"l": [1.0, 2]}}, doc_ids=[doc_id])
    db.close()
    db = TinyDB(path, storage=LogStorage)
    document = db.get(doc_id=doc_id)
    assert document is not None
    assert document["v"] is True and type(document["nested"]["l"][0]) is float
    db.close()


def test_mutating_read_results_does_not_change_the_store(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    db = TinyDB(path, storage=LogStorage)
    db.insert({"list": [1, 2]})
    db.all()[0]["list"].append(3)
    assert db.all()[0]["list"] == [1, 2]
    db.close()


def test_shares_an_open_keyed_log_without_touching_other_tables(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    keyed.table("retained").put_sync("a/b", {"payload": b"x"})
    db = TinyDB(storage=LogStorage, keyed=keyed)
    db.insert({"owner": "dev1"})
    assert db.tables() == {"_default"}
    db.drop_tables()
    db.close()  # does not close the shared log
    assert keyed.table("retained")["a/b"] == {"payload": b"x"}
    keyed.table("retained").put_sync("c", 1)
    keyed.close()


def test_needs_exactly_one_of_path_or_keyed(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="exactly one"):
        LogStorage()
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    with pytest.raises(StoreError, match="exactly one"):
        LogStorage(str(tmp_path / "b.log"), keyed=keyed)
    keyed.close()


def test_readonly_storage_serves_queries_while_a_writer_holds_the_log(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    writer = TinyDB(path, storage=LogStorage)
    writer.insert({"owner": "dev1"})
    reader = TinyDB(path, storage=LogStorage, readonly=True)
    assert reader.search(Query().owner == "dev1")
    with pytest.raises(StoreError, match="read-only"):
        reader.insert({"owner": "dev2"})
    reader.close()
    writer.close()


def test_bulk_write_over_the_record_limit_is_split_and_a_huge_document_refused(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "a.log")
    db = TinyDB(path, storage=LogStorage, max_record_size=4096)
    db.insert({"small": 1})
    db.insert_multiple({"pad": "x" * 100, "i": i} for i in range(100))
    assert len(db) == 101
    with pytest.raises(StoreError, match="max_record_size"):
        db.insert({"pad": "x" * 5000})
    assert len(db) == 101
    db.close()
    db = TinyDB(path, storage=LogStorage)
    assert len(db) == 101 and sorted(d["i"] for d in db.all()[1:]) == list(range(100))
    db.close()


INSERTER = textwrap.dedent(
    """
    import sys
    from tinydb import TinyDB
    from edge_broker.store import LogStorage

    db = TinyDB(sys.argv[1], storage=LogStorage)
    print("ready", flush=True)
    n = 0
    while True:
        ids = db.insert_multiple({"n": n, "k": i} for i in range(3))
        db.update({"last": n}, doc_ids=[ids[0]])
        sys.stdout.write(f"{n} {ids[0]}\\n")
        sys.stdout.flush()
        n += 1
    """
)


@pytest.mark.parametrize("delay", [0.05, 0.2, 0.4])
def test_killed_writer_keeps_every_acknowledged_write(tmp_path: Path, delay: float) -> None:
    path = tmp_path / "a.log"
    proc = subprocess.Popen(
        [sys.executable, "-c", INSERTER, str(path)], stdout=subprocess.PIPE, bufsize=0
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"ready"
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    lines = proc.stdout.read().decode().split("\n")[:-1]
    assert lines
    db = TinyDB(str(path), storage=LogStorage)
    documents = {doc.doc_id: doc for doc in db.all()}
    for line in lines:
        n, first_id = map(int, line.split())
        group = [documents[first_id + i] for i in range(3)]
        assert [d["k"] for d in group] == [0, 1, 2] and {d["n"] for d in group} == {n}
        assert group[0]["last"] == n
    # Each insert_multiple is one atomic record: no group is ever half there.
    sizes: dict[int, int] = {}
    for doc in documents.values():
        sizes[doc["n"]] = sizes.get(doc["n"], 0) + 1
    assert set(sizes.values()) == {3}
    db.close()
    os.unlink(path)


def test_documents_written_through_the_keyed_log_are_tinydb_documents(tmp_path: Path) -> None:
    path = str(tmp_path / "a.log")
    keyed = KeyedLog.open(path)
    keyed.table("tinydb:claims").put_sync(7, {"owner": "dev7"})
    keyed.table("tinydb:claims").put_sync(9, {"owner": "dev9"})
    db = TinyDB(storage=LogStorage, keyed=keyed)
    claims = db.table("claims")
    assert claims.get(doc_id=7) == {"owner": "dev7"}
    claims.update({"owner": "dev7b"}, doc_ids=[7])
    claims.remove(doc_ids=[9])
    assert claims.insert({"owner": "dev8"}) == 8  # TinyDB: highest id + 1
    # The same int keys, no duplicates under string ids.
    assert sorted(keyed.table("tinydb:claims").keys()) == [7, 8]  # type: ignore[type-var]
    assert keyed.table("tinydb:claims")[7] == {"owner": "dev7b"}
    db.close()
    keyed.close()
