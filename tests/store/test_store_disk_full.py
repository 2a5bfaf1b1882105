"""Disk full, read-only and I/O errors: the append fails with StoreError(durable=False), nothing
already stored is damaged, the log reports itself unhealthy, and appends work again when the
fault goes away. A real tiny tmpfs first, then injected faults for the paths it cannot reach."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from edge_broker.store import KeyedLog, StoreError

PAGE = os.sysconf("SC_PAGE_SIZE")


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tiny"
    mount.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={16 * PAGE}", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here ({result.stderr.strip()}); the injected-fault tests "
            "in this file still cover ENOSPC"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_until_full(keyed: KeyedLog, prefix: str) -> tuple[list[str], StoreError]:
    stored: list[str] = []
    for i in range(100_000):
        key = f"{prefix}{i}"
        try:
            keyed.table("t").put_sync(key, {"key": key, "pad": os.urandom(700)})
        except StoreError as exc:
            return stored, exc
        stored.append(key)
    raise AssertionError("the tiny filesystem never filled up")


def test_tiny_filesystem_full_then_space_returns(tiny_fs: Path) -> None:
    filler = tiny_fs / "filler"
    filler.write_bytes(b"\0" * (6 * PAGE))
    path = tiny_fs / "a.log"
    keyed = KeyedLog.open(str(path), compact_min_bytes=1 << 30)
    stored, error = fill_until_full(keyed, "a")
    assert error.errno == errno.ENOSPC and error.durable is False
    assert "disk is full" in str(error) and str(path) in str(error)
    health = keyed.health()
    assert not health.healthy and health.errno == errno.ENOSPC
    # The failed append was cut back: the file ends with the last acknowledged record.
    assert path.stat().st_size == keyed.stats().file_size
    with pytest.raises(StoreError):
        keyed.table("t").put_sync("still-full", {"pad": os.urandom(700)})
    reader = KeyedLog.open(str(path), readonly=True)
    assert reader.report.clean and set(reader.table("t").keys()) == set(stored)
    reader.close()

    filler.unlink()
    keyed.table("t").put_sync("after", "space returned")
    assert keyed.health().healthy
    more, _ = fill_until_full(keyed, "b")
    keyed.close()
    again = KeyedLog.open(str(path))
    assert again.report.clean
    assert set(again.table("t").keys()) == set(stored) | {"after"} | set(more)
    for key in stored:
        assert again.table("t")[key]["key"] == key
    again.close()


async def test_tiny_filesystem_full_with_concurrent_appends(tiny_fs: Path) -> None:
    filler = tiny_fs / "filler"
    filler.write_bytes(b"\0" * (4 * PAGE))
    path = tiny_fs / "a.log"
    keyed = KeyedLog.open(str(path), compact_min_bytes=1 << 30)
    table = keyed.table("t")

    async def put(i: int) -> bool:
        try:
            await table.put(i, {"pad": os.urandom(500)})
        except StoreError as exc:
            assert exc.errno == errno.ENOSPC and not exc.durable
            return False
        return True

    results = await asyncio.gather(*(put(i) for i in range(400)))
    acknowledged = {i for i, ok in enumerate(results) if ok}
    assert acknowledged and len(acknowledged) < 400
    assert not keyed.health().healthy
    assert set(table.keys()) == acknowledged  # the index holds only what was stored
    filler.unlink()  # space returns
    await asyncio.gather(*(table.put(f"later-{i}", i) for i in range(20)))
    assert keyed.health().healthy
    await keyed.aclose()
    again = KeyedLog.open(str(path))
    later = {f"later-{i}" for i in range(20)}
    assert again.report.clean and set(again.table("t").keys()) == acknowledged | later
    again.close()


def test_compaction_without_space_keeps_the_old_log(tiny_fs: Path) -> None:
    path = tiny_fs / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=1 << 30)
    for i in range(60):
        keyed.table("t").put_sync(i, {"pad": os.urandom(600)})
    (tiny_fs / "filler").write_bytes(b"\0" * (16 * PAGE - path.stat().st_size - 2 * PAGE))
    with pytest.raises(StoreError, match="compaction file"):
        keyed.compact()
    assert not (tiny_fs / "a.log.compact").exists()
    keyed.table("t").put_sync(0, "smaller")
    keyed.close()
    again = KeyedLog.open(str(path))
    assert again.report.clean and len(again.table("t")) == 60 and again.table("t")[0] == "smaller"
    again.close()


# -- injected faults --------------------------------------------------------------------------


def failing_once(
    real: Callable[..., Any], code: int, *, partial: bool = False
) -> Callable[..., Any]:
    """Wrap an os function: the first call fails with ``code`` (after a partial write)."""
    state = {"failed": False}

    def wrapper(*args: Any) -> Any:
        if state["failed"]:
            return real(*args)
        state["failed"] = True
        if partial:
            fd, data, offset = args
            real(fd, bytes(data)[: len(data) // 2], offset)
        raise OSError(code, os.strerror(code))

    return wrapper


@pytest.mark.parametrize(
    ("code", "hint"),
    [(errno.ENOSPC, "disk is full"), (errno.EROFS, "read-only"), (errno.EIO, "I/O error")],
)
def test_injected_partial_write_is_cut_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: int, hint: str
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("before", 1)
    before = path.read_bytes()
    monkeypatch.setattr(os, "pwrite", failing_once(os.pwrite, code, partial=True))
    with pytest.raises(StoreError, match=hint) as raised:
        keyed.table("t").put_sync("failed", "x" * 300)
    assert raised.value.errno == code and not raised.value.durable
    assert path.read_bytes() == before and "failed" not in keyed.table("t")
    assert not keyed.health().healthy
    keyed.table("t").put_sync("after", 2)
    assert keyed.health().healthy and keyed.stats().write_failures == 1
    keyed.close()
    again = KeyedLog.open(str(path))
    assert again.report.clean and sorted(again.table("t").keys()) == ["after", "before"]
    again.close()


def test_failed_fsync_fails_the_append_and_cuts_it_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("before", 1)
    size = path.stat().st_size
    monkeypatch.setattr(os, "fdatasync", failing_once(os.fdatasync, errno.EIO))
    with pytest.raises(StoreError, match="fsync of the log failed"):
        keyed.table("t").put_sync("unsynced", 1)
    assert path.stat().st_size == size and "unsynced" not in keyed.table("t")
    keyed.table("t").put_sync("after", 1)
    keyed.close()
    assert sorted(KeyedLog.open(str(path), readonly=True).table("t").keys()) == ["after", "before"]


def test_failed_truncate_blocks_appends_until_it_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("before", 1)
    monkeypatch.setattr(os, "pwrite", failing_once(os.pwrite, errno.ENOSPC, partial=True))
    real_ftruncate = os.ftruncate
    monkeypatch.setattr(os, "ftruncate", failing_once(real_ftruncate, errno.EIO))
    with pytest.raises(StoreError):
        keyed.table("t").put_sync("failed", "x" * 300)
    assert path.stat().st_size > keyed.stats().file_size  # the partial bytes are still there
    keyed.table("t").put_sync("after", 2)  # first cuts the partial bytes, then appends
    keyed.close()
    again = KeyedLog.open(str(path))
    assert again.report.clean and sorted(again.table("t").keys()) == ["after", "before"]
    again.close()


async def test_injected_io_error_fails_every_waiter_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    table = keyed.table("t")
    await table.put("before", 1)
    monkeypatch.setattr(os, "pwrite", failing_once(os.pwrite, errno.EIO, partial=True))
    results = await asyncio.gather(*(table.put(i, i) for i in range(20)), return_exceptions=True)
    assert all(isinstance(r, StoreError) and r.errno == errno.EIO for r in results)
    assert len({id(r) for r in results}) == 20  # each waiter gets its own exception
    await asyncio.gather(*(table.put(i, i) for i in range(20, 30)))
    await keyed.aclose()
    again = KeyedLog.open(str(path))
    assert again.report.clean
    assert set(again.table("t").keys()) == {"before", *range(20, 30)}
    again.close()


async def test_batch_that_does_not_fit_stores_what_fits_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path))
    table = keyed.table("t")
    real_pwrite = os.pwrite

    def room_for_small_writes_only(fd: int, data: bytes, offset: int) -> int:
        if len(data) > 200:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", room_for_small_writes_only)
    values = ["x" * (300 if i % 2 else 10) for i in range(20)]
    results = await asyncio.gather(
        *(table.put(i, v) for i, v in enumerate(values)), return_exceptions=True
    )
    stored = {i for i, r in enumerate(results) if r is None}
    assert stored == set(range(0, 20, 2))
    assert all(isinstance(results[i], StoreError) for i in range(1, 20, 2))
    await keyed.aclose()
    assert set(KeyedLog.open(str(path), readonly=True).table("t").keys()) == stored


async def test_failed_interval_fsync_shows_in_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyed = KeyedLog.open(str(tmp_path / "a.log"), fsync="300ms")
    await asyncio.sleep(0.35)
    await keyed.table("t").put("first", 1)  # syncs at once: no fsync for an interval
    monkeypatch.setattr(os, "fdatasync", failing_once(os.fdatasync, errno.EIO))
    try:
        await keyed.table("t").put("second", 2)  # returns before the fsync, normally
        background = True
    except StoreError:  # a machine so slow that the interval passed: this append synced
        background = False
    for _ in range(200):
        if not keyed.health().healthy:
            break
        await asyncio.sleep(0.01)
    assert not keyed.health().healthy and "I/O error" in str(keyed.health().error)
    assert background or keyed.stats().write_failures == 1
    await keyed.table("t").put("third", 3)
    await keyed.aclose()


def test_failed_automatic_compaction_does_not_fail_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=2048)
    real_open = os.open

    def no_space_for_compaction(file: str, flags: int, mode: int = 0o777) -> int:
        if str(file).endswith(".compact"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(file, flags, mode)

    monkeypatch.setattr(os, "open", no_space_for_compaction)
    for i in range(300):
        keyed.table("t").put_sync("same", i)
    health = keyed.health()
    assert health.healthy and health.compaction_error is not None
    assert "disk is full" in health.compaction_error and keyed.stats().compactions == 0
    monkeypatch.setattr(os, "open", real_open)
    for i in range(300):
        keyed.table("t").put_sync("same", i)
    assert keyed.stats().compactions >= 1 and keyed.health().compaction_error is None
    keyed.close()
    assert KeyedLog.open(str(path), readonly=True).table("t")["same"] == 299


def test_read_only_filesystem_refuses_writers_and_serves_readers(tiny_fs: Path) -> None:
    path = tiny_fs / "a.log"
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("k", "v")
    keyed.close()
    remount = subprocess.run(
        ["mount", "-o", "remount,ro", str(tiny_fs)], capture_output=True, text=True, check=False
    )
    if remount.returncode != 0:
        pytest.skip(f"cannot remount the tmpfs read-only: {remount.stderr.strip()}")
    try:
        with pytest.raises(StoreError, match="read-only; remount it read-write") as raised:
            KeyedLog.open(str(path))
        assert raised.value.errno == errno.EROFS
        reader = KeyedLog.open(str(path), readonly=True)
        assert reader.table("t")["k"] == "v"
        reader.close()
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(tiny_fs)], check=False)
    writer = KeyedLog.open(str(path))
    writer.table("t").put_sync("k2", "v2")
    writer.close()


def test_creating_a_log_on_a_full_disk_fails_cleanly_and_works_later(tiny_fs: Path) -> None:
    filler = tiny_fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\0" * 1024):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    path = tiny_fs / "a.log"
    with pytest.raises(StoreError, match="disk is full") as raised:
        KeyedLog.open(str(path))
    assert raised.value.errno == errno.ENOSPC
    filler.unlink()
    keyed = KeyedLog.open(str(path))
    keyed.table("t").put_sync("k", "v")
    keyed.close()
    assert KeyedLog.open(str(path), readonly=True).table("t")["k"] == "v"


def test_failed_rename_of_the_compaction_keeps_the_old_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=1 << 30)
    for i in range(50):
        keyed.table("t").put_sync("k", i)
    monkeypatch.setattr(os, "replace", failing_once(os.replace, errno.EIO))
    with pytest.raises(StoreError, match="renaming the compaction file"):
        keyed.compact()
    assert not (tmp_path / "a.log.compact").exists()
    keyed.table("t").put_sync("k", "after")
    keyed.compact()  # the second attempt goes through
    keyed.close()
    again = KeyedLog.open(str(path))
    assert again.report.clean and dict(again.table("t").items()) == {"k": "after"}
    again.close()


def test_log_that_cannot_be_reopened_after_compaction_refuses_appends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=1 << 30)
    for i in range(50):
        keyed.table("t").put_sync("k", i)
    real_open = os.open

    def no_more_files(file: str, flags: int, mode: int = 0o777) -> int:
        if str(file) == str(path):
            raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        return real_open(file, flags, mode)

    monkeypatch.setattr(os, "open", no_more_files)
    with pytest.raises(StoreError, match="reopening the log after compaction; restart"):
        keyed.compact()
    monkeypatch.setattr(os, "open", real_open)
    with pytest.raises(StoreError, match="reopening the log after compaction"):
        keyed.table("t").put_sync("k", "lost?")
    assert not keyed.health().healthy
    keyed.close()
    again = KeyedLog.open(str(path))  # the compacted file is complete
    assert again.report.clean and again.table("t")["k"] == 49
    again.close()
