"""Group commit and the durability policy: awaiting appends resolve after fsync, sharing it."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from edge_broker.store import Durability, KeyedLog, StoreError


class FsyncSpy:
    """Wraps os.fdatasync: counts calls and remembers how many bytes of the file were synced."""

    def __init__(self, real: Callable[[int], None]) -> None:
        self.real = real
        self.calls = 0
        self.synced_size: dict[str, int] = {}

    def __call__(self, fd: int) -> None:
        self.real(fd)
        self.calls += 1
        name = os.readlink(f"/proc/self/fd/{fd}")
        self.synced_size[name] = os.fstat(fd).st_size


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[FsyncSpy]:
    spy = FsyncSpy(os.fdatasync)
    monkeypatch.setattr(os, "fdatasync", spy)
    yield spy


async def test_thousand_concurrent_appends_resolve_after_fsync(
    tmp_path: Path, spy: FsyncSpy
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="always")
    table = keyed.table("claims")
    real_path = os.path.realpath(path)
    calls_at_open = spy.calls
    unsynced_returns: list[str] = []

    async def writer(i: int) -> None:
        key = f"key-{i:05d}"
        await asyncio.sleep(0.001 * (i % 7))  # spread the arrivals over several batches
        await table.put(key, {"n": i})
        synced = spy.synced_size.get(real_path, 0)
        with open(path, "rb") as file:
            durable_prefix = file.read(synced)
        if key.encode() not in durable_prefix:
            unsynced_returns.append(key)
        assert table.get(key) == {"n": i}

    await asyncio.gather(*(writer(i) for i in range(1000)))
    assert unsynced_returns == []
    fsyncs = spy.calls - calls_at_open
    stats = keyed.stats()
    assert stats.appends == 1000 and stats.batches == fsyncs
    print(f"1000 appends: {fsyncs} fsyncs, {stats.batches} batches")
    assert 1 <= fsyncs <= 100, f"{fsyncs} fsyncs for 1000 appends: group commit is not batching"
    await keyed.aclose()
    again = KeyedLog.open(str(path))
    assert len(again.table("claims")) == 1000
    again.close()


async def test_appends_keep_their_queued_order(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="always")
    table = keyed.table("t")
    await asyncio.gather(*(table.put("same", i) for i in range(300)))
    assert table.get("same") == 299
    await keyed.aclose()
    again = KeyedLog.open(str(tmp_path / "a.log"))
    assert again.table("t").get("same") == 299
    again.close()


async def test_interval_policy_returns_before_fsync_and_syncs_later(
    tmp_path: Path, spy: FsyncSpy
) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="50ms")
    assert keyed.log.durability == Durability("interval", 0.05)
    table = keyed.table("t")
    await asyncio.sleep(0.06)  # the first batch after a quiet period syncs at once
    await table.put("first", 1)
    start, began = spy.calls, time.monotonic()
    for i in range(200):
        await table.put(f"k{i}", i)
    during, elapsed = spy.calls - start, time.monotonic() - began
    # At most one fsync per interval (plus the edges), however slow the machine is.
    limit = elapsed / 0.05 + 2
    assert during <= limit, f"{during} fsyncs in {elapsed:.3f} s at a 50 ms interval"
    assert during < 200
    for _ in range(200):  # the timer catches up about 50 ms later
        if not keyed.log.unsynced:
            break
        await asyncio.sleep(0.01)
    assert not keyed.log.unsynced
    await keyed.aclose()


async def test_never_policy_syncs_only_on_close(tmp_path: Path, spy: FsyncSpy) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="never")
    start = spy.calls
    await asyncio.gather(*(keyed.table("t").put(i, i) for i in range(100)))
    assert spy.calls == start
    await keyed.aclose()
    assert spy.calls == start + 1


async def test_a_cancelled_waiter_does_not_disturb_the_others(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    table = keyed.table("t")
    tasks = [asyncio.ensure_future(table.put(i, i)) for i in range(50)]
    await asyncio.sleep(0)
    tasks[10].cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    assert isinstance(results[10], asyncio.CancelledError)
    assert all(r is None for i, r in enumerate(results) if i != 10)
    await keyed.aclose()
    again = KeyedLog.open(str(tmp_path / "a.log"))
    # The cancelled caller was already queued: its record may be stored, the rest must be.
    assert set(range(50)) - {10} <= set(again.table("t").keys())
    again.close()


async def test_too_large_record_fails_alone(tmp_path: Path) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), max_record_size=256)
    table = keyed.table("t")
    results = await asyncio.gather(
        table.put("ok1", 1),
        table.put("big", "x" * 1000),
        table.put("ok2", 2),
        return_exceptions=True,
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], StoreError) and "max_record_size" in str(results[1])
    assert sorted(table.keys()) == ["ok1", "ok2"]  # type: ignore[type-var]
    await keyed.aclose()


def test_sync_api_fsyncs_every_append_by_default(tmp_path: Path, spy: FsyncSpy) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    start = spy.calls
    for i in range(5):
        keyed.table("t").put_sync(i, i)
    assert spy.calls == start + 5
    keyed.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("always", Durability("always")),
        ("never", Durability("never")),
        ("none", Durability("never")),
        ("50ms", Durability("interval", 0.05)),
        ("0.2s", Durability("interval", 0.2)),
        (0.1, Durability("interval", 0.1)),
        (1, Durability("interval", 1.0)),
    ],
)
def test_durability_parse(text: str | float, expected: Durability) -> None:
    assert Durability.parse(text) == expected


@pytest.mark.parametrize("bad", ["sometimes", "-5ms", 0, 120, float("nan"), True, None])
def test_durability_parse_rejects_with_a_hint(bad: object) -> None:
    with pytest.raises(StoreError, match="fsync"):
        Durability.parse(bad)  # type: ignore[arg-type]


async def test_a_busy_default_executor_does_not_delay_appends(tmp_path: Path) -> None:
    """The log writes in its own thread: slow work in asyncio's default executor (password
    hashing, DNS) cannot hold back a PUBACK."""
    import threading

    keyed = KeyedLog.open(str(tmp_path / "a.log"))
    loop = asyncio.get_running_loop()
    release = threading.Event()
    blockers = [loop.run_in_executor(None, release.wait) for _ in range(64)]
    try:
        await asyncio.wait_for(keyed.table("t").put("k", 1), timeout=10)
        assert keyed.table("t")["k"] == 1
    finally:
        release.set()
        await asyncio.gather(*blockers)
    await keyed.aclose()


async def test_non_durable_appends_skip_fsync_and_ride_on_the_next_durable_one(
    tmp_path: Path, spy: FsyncSpy
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="always")
    table = keyed.table("t")
    start = spy.calls
    for i in range(20):
        await table.put(f"qos0-{i}", i, durable=False)
    table.put_sync("sync-qos0", 0, durable=False)
    assert spy.calls == start and keyed.log.unsynced
    await table.put("qos1", 1)  # one fsync covers everything written before it
    assert spy.calls == start + 1 and not keyed.log.unsynced
    synced = spy.synced_size[os.path.realpath(path)]
    assert synced == path.stat().st_size
    # Mixed in one batch: the durable waiter makes the batch fsync.
    await asyncio.gather(table.put("a", 1, durable=False), table.put("b", 2))
    assert spy.calls == start + 2
    await keyed.aclose()


async def test_appends_go_on_while_a_compaction_writes_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compaction's slow part (writing and fsyncing the new file) runs beside the appends;
    records appended meanwhile are copied into the new file before the rename."""
    import threading

    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), compact_min_bytes=4096, compact_ratio=0.5)
    table = keyed.table("t")
    started, release = threading.Event(), threading.Event()
    real_fdatasync = os.fdatasync

    def fdatasync(fd: int) -> None:
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".compact") and not release.is_set():
            started.set()
            release.wait(10)
        real_fdatasync(fd)

    monkeypatch.setattr(os, "fdatasync", fdatasync)
    expected: dict[object, object] = {}
    n = 0
    while not started.is_set():
        await table.put(n % 10, {"n": n, "pad": "x" * 100})
        expected[n % 10] = {"n": n, "pad": "x" * 100}
        n += 1
        assert n < 5000, "no compaction started"
        await asyncio.sleep(0)
    # The compaction thread is parked in the middle of its work: appends still complete.
    for i in range(50):
        await asyncio.wait_for(table.put(f"during-{i}", i), timeout=5)
        expected[f"during-{i}"] = i
    await table.delete(0)
    expected.pop(0)
    assert keyed.stats().compactions == 0
    release.set()
    for _ in range(500):
        if keyed.stats().compactions:
            break
        await asyncio.sleep(0.01)
    assert keyed.stats().compactions == 1
    assert dict(table.items()) == expected
    stats = keyed.stats()
    assert stats.file_size == path.stat().st_size
    assert 0 < stats.live_bytes <= stats.file_size
    await table.put("after", 1)
    expected["after"] = 1
    await keyed.aclose()
    again = KeyedLog.open(str(path))
    assert again.report.clean and dict(again.table("t").items()) == expected
    again.close()
