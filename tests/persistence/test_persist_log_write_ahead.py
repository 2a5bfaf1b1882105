"""The log's write-ahead API (issue 17): ``write`` puts a record in the OS at once, on the
caller's thread, whatever fsync is running; ``synced`` waits for the fsync that covers it, one
fsync shared by every waiter that was written before it started."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from edge_broker.store import KeyedLog, Put, StoreError, logfile


class BlockingFsync:
    """fdatasync that blocks until released (a slow SD card) and counts calls."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()
        self.calls = 0
        self.fail: OSError | None = None

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.started.set()
        self.release.wait(10)
        if self.fail is not None:
            raise self.fail
        os.fdatasync(fd)


@pytest.fixture
def fsync(monkeypatch: pytest.MonkeyPatch) -> BlockingFsync:
    blocking = BlockingFsync()
    monkeypatch.setattr(logfile, "_fdatasync", blocking)
    return blocking


async def test_write_never_waits_behind_a_running_fsync(
    tmp_path: Path, fsync: BlockingFsync
) -> None:
    path = tmp_path / "wa.log"
    fsync.release.set()
    log = KeyedLog.open(path, fsync="always")
    fsync.release.clear()
    base = fsync.calls
    first = log.write([Put("t", "a", 1)])
    waiting = log.log.synced(first)
    assert waiting is not None
    await asyncio.to_thread(fsync.started.wait, 5)  # the fsync is running and blocked
    size = path.stat().st_size
    began = time.monotonic()
    second = log.write([Put("t", "b", 2)])
    assert time.monotonic() - began < 0.5  # did not wait for the blocked fsync
    assert path.stat().st_size > size  # in the OS already
    assert log.lookup("t", "b") == 2
    later = log.log.synced(second)
    assert later is not None and not waiting.done()
    fsync.release.set()
    await asyncio.wait_for(waiting, 5)
    await asyncio.wait_for(later, 5)  # needed a second fsync: written while the first ran
    assert fsync.calls == base + 2
    assert log.log.synced(second) is None
    await log.aclose()
    reopened = KeyedLog.open(path)
    assert (reopened.lookup("t", "a"), reopened.lookup("t", "b")) == (1, 2)
    reopened.close()


async def test_waiters_written_before_an_fsync_share_it(
    tmp_path: Path, fsync: BlockingFsync
) -> None:
    fsync.release.set()
    log = KeyedLog.open(tmp_path / "wa.log", fsync="always")
    base = fsync.calls
    tickets = [log.write([Put("t", i, i)]) for i in range(50)]
    waiters = [log.log.synced(t) for t in tickets]
    await asyncio.wait_for(asyncio.gather(*[w for w in waiters if w is not None]), 5)
    assert fsync.calls == base + 1
    await log.aclose()


async def test_a_failed_fsync_fails_its_waiters(tmp_path: Path, fsync: BlockingFsync) -> None:
    import errno

    fsync.release.set()
    log = KeyedLog.open(tmp_path / "wa.log", fsync="always")
    fsync.fail = OSError(errno.EIO, "Input/output error")
    waiting = log.log.synced(log.write([Put("t", "a", 1)]))
    assert waiting is not None
    with pytest.raises(StoreError, match="fsync"):
        await asyncio.wait_for(waiting, 5)
    fsync.fail = None
    again = log.log.synced(log.write([Put("t", "b", 1)]))
    assert again is not None
    await asyncio.wait_for(again, 5)  # the next fsync covers both
    await log.aclose()


async def test_interval_mode_fsyncs_after_the_interval(
    tmp_path: Path, fsync: BlockingFsync
) -> None:
    fsync.release.set()
    log = KeyedLog.open(tmp_path / "wa.log", fsync=0.05)
    base = fsync.calls
    log.write([Put("t", "a", 1)])
    deadline = time.monotonic() + 5
    while fsync.calls == base:
        assert time.monotonic() < deadline, "no fsync within the interval"
        await asyncio.sleep(0.01)
    await log.aclose()
