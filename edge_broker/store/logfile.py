"""One log file on disk: lock, recovery scan, appends, fsync, atomic rewrite (issue 6).

Invariants:
- ``size`` is the end of the last intact, fully written frame. Every write goes to ``size`` with
  ``pwrite``; a failed write is truncated back to ``size``, so a failed append never leaves a
  frame that a later append could be mistaken for (if even the truncate fails, the log refuses
  appends until a truncate succeeds).
- A rewrite (compaction) writes ``<path>.compact``, fsyncs it, renames it over ``<path>`` and
  fsyncs the directory. A crash before the rename leaves the old file (the stale ``.compact`` is
  removed at the next open); after it, the new file is complete.
- One process writes a log: ``<path>.lock`` holds an exclusive ``flock``. A read-only open takes
  no lock and changes nothing, so ``edge-broker claim list`` works while the broker runs.

This class is not thread-safe; ``Log`` serialises every call with its lock.
"""

from __future__ import annotations

import errno as errno_codes
import fcntl
import mmap
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .errors import StoreError
from .frame import (
    FILE_MAGIC,
    HEADER,
    HEADER_SIZE,
    Damage,
    Frame,
    header_problem,
    is_header_prefix,
    scan,
)
from .gcpause import gc_paused


def _fdatasync(fd: int) -> None:
    # Looked up at each call, so fault-injection tests can replace os.fdatasync.
    sync: Callable[[int], None] = getattr(os, "fdatasync", os.fsync)
    sync(fd)


_REWRITE_CHUNK = 1 << 20

# Fault injection for the crash tests (tests/persistence/test_persist_write_ahead.py): while the
# file named here exists, each append first sleeps the seconds it holds -- a slow SD card, so a
# test can kill -9 the broker while a record is being written. Unset in production: one check.
_SLOW_WRITES = os.environ.get("EDGE_BROKER_TEST_SLOW_WRITES") or None


def _slow_write() -> None:
    try:
        with open(_SLOW_WRITES, encoding="ascii") as flag:  # type: ignore[arg-type]
            delay = float(flag.read().strip() or "1")
    except (OSError, ValueError):
        return
    time.sleep(delay)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What opening a log found: intact records, and every range it could not use.

    ``damaged`` lists unusable ranges in file order (flipped bits, a torn tail, a record the
    reader rejected); ``truncated_to`` is set when the tail was cut away at that offset and
    ``tail_bytes_dropped`` says how much. Log ``str(report)`` when ``clean`` is false.
    """

    path: str
    records: int
    file_size: int
    damaged: tuple[Damage, ...] = ()
    truncated_to: int | None = None
    tail_bytes_dropped: int = 0
    header_repaired: bool = False
    stale_files_removed: tuple[str, ...] = ()

    @property
    def clean(self) -> bool:
        return not self.damaged and not self.header_repaired

    @property
    def bytes_dropped(self) -> int:
        return sum(d.length for d in self.damaged)

    def __str__(self) -> str:
        text = f"{self.path}: {self.records} records, {self.file_size} bytes"
        if self.header_repaired:
            text += "; header repaired"
        for damage in self.damaged:
            where = "tail" if damage.tail else "middle"
            text += (
                f"; dropped {damage.length} bytes at offset {damage.offset} ({where}: "
                f"{damage.reason})"
            )
        if self.truncated_to is not None:
            text += f"; truncated to {self.truncated_to}"
        return text


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A compaction file written and fsynced, not yet renamed over the log."""

    path: str
    fd: int
    size: int


def _os_error(action: str, path: str, exc: OSError) -> StoreError:
    hint = {
        errno_codes.ENOSPC: "the disk is full; free space and appends will succeed again",
        errno_codes.EROFS: "the filesystem is read-only; remount it read-write",
        errno_codes.EDQUOT: "the disk quota is exhausted",
        errno_codes.EIO: "the storage device reported an I/O error; check it",
        errno_codes.EACCES: "permission denied; check the owner of the state directory",
        errno_codes.ENOENT: "no such file or directory; check the path (its directory must exist)",
    }.get(exc.errno or 0, exc.strerror or "OS error")
    return StoreError(f"{action} failed: {hint} ({exc})", path=path, errno=exc.errno)


def fsync_directory(path: str) -> None:
    """Make a rename or a new file in ``path``'s directory durable."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _os_error("fsync of the log directory", path, exc) from exc


class LogFile:
    """An open log file. Build it with :meth:`open`; see the module docstring."""

    def __init__(self, path: str, fd: int, lock_fd: int | None, size: int) -> None:
        self.path = path
        self.readonly = lock_fd is None
        self.size = size
        self.fsyncs = 0
        self.bytes_written = 0
        self.write_failures = 0
        self.last_sync = time.monotonic()
        self.unsynced = False
        self.last_error: StoreError | None = None
        self._fd = fd
        self._lock_fd = lock_fd
        self._torn_since_failure = False
        self._broken: StoreError | None = None

    @property
    def healthy(self) -> bool:
        return self.last_error is None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        apply: Callable[[Frame], str | None],
        *,
        max_payload: int,
        readonly: bool = False,
    ) -> tuple[LogFile, RecoveryReport]:
        """Open (or create) ``path``, feed every intact frame to ``apply`` in file order.

        ``apply`` returns ``None`` to accept a frame or a reason to reject it (the frame is then
        reported as damage). A torn or corrupt tail is truncated unless ``readonly``.
        """
        name = os.fspath(path)
        lock_fd = None if readonly else cls._lock(name)
        try:
            return cls._open_locked(name, apply, max_payload, lock_fd)
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise

    @staticmethod
    def _lock(path: str) -> int:
        try:
            lock_fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _os_error("creating the lock file", path, exc) from exc
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock_fd)
            raise StoreError(
                "another process has this log open for writing (its .lock file is held; it "
                "may also be an earlier open in this process); stop it, or open the log read-only",
                path=path,
            ) from None
        return lock_fd

    @classmethod
    def _open_locked(
        cls, path: str, apply: Callable[[Frame], str | None], max_payload: int, lock_fd: int | None
    ) -> tuple[LogFile, RecoveryReport]:
        readonly = lock_fd is None
        stale: list[str] = []
        if not readonly and os.path.exists(path + ".compact"):
            try:
                os.unlink(path + ".compact")
            except OSError as exc:
                raise _os_error("removing a stale compaction file", path, exc) from exc
            stale.append(path + ".compact")
        try:
            fd = os.open(path, os.O_RDONLY if readonly else os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise _os_error("opening the log", path, exc) from exc
        try:
            log, report = cls._recover(path, fd, lock_fd, apply, max_payload)
        except BaseException:
            os.close(fd)
            raise
        if stale:
            report = RecoveryReport(
                report.path,
                report.records,
                report.file_size,
                report.damaged,
                report.truncated_to,
                report.tail_bytes_dropped,
                report.header_repaired,
                tuple(stale),
            )
        return log, report

    @classmethod
    def _recover(
        cls,
        path: str,
        fd: int,
        lock_fd: int | None,
        apply: Callable[[Frame], str | None],
        max_payload: int,
    ) -> tuple[LogFile, RecoveryReport]:
        readonly = lock_fd is None
        file_size = os.fstat(fd).st_size
        with open(fd, "rb", closefd=False) as reader:
            head = reader.read(HEADER_SIZE)
        if is_header_prefix(head):
            log = cls(path, fd, lock_fd, file_size if readonly else HEADER_SIZE)
            repaired = file_size > 0 and not readonly
            if not readonly:
                log._write_at(0, HEADER, "writing the log header")
                log.sync()
                fsync_directory(path)
            return log, RecoveryReport(path, 0, log.size, header_repaired=repaired)
        problem = header_problem(head)
        if problem is not None and head.startswith(FILE_MAGIC):
            raise StoreError(f"{problem}; upgrade edge-broker or move the file away", path=path)
        records = 0
        damaged: list[Damage] = []
        end = HEADER_SIZE
        # Replay allocates many long-lived objects and no cycles: pausing the cyclic GC cuts
        # the open time by about a third (measured with scripts/bench_store.py).
        with gc_paused(), mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as data:
            for item in scan(data, HEADER_SIZE, max_payload):
                if isinstance(item, Damage):
                    damaged.append(item)
                    continue
                reason = apply(item)
                if reason is None:
                    records += 1
                else:
                    rejected = f"record rejected: {reason}"
                    damaged.append(Damage(item.offset, item.size, rejected))
                end = item.offset + item.size
        if problem is not None:
            if records == 0:
                raise StoreError(
                    f"not an edge-broker log ({problem}) and no intact record found; "
                    "move the file away or choose another path",
                    path=path,
                )
            damaged.insert(0, Damage(0, HEADER_SIZE, f"bad file header: {problem}"))
        tail = damaged[-1] if damaged and damaged[-1].tail else None
        truncated_to = None
        log = cls(path, fd, lock_fd, file_size if readonly else end)
        if not readonly:
            if problem is not None:
                log._write_at(0, HEADER, "repairing the log header")
            if tail is not None:
                try:
                    os.ftruncate(fd, end)
                except OSError as exc:
                    raise _os_error("truncating the torn tail", path, exc) from exc
                truncated_to = end
            if problem is not None or tail is not None:
                log.sync()
        report = RecoveryReport(
            path,
            records,
            end if truncated_to is not None else file_size,
            tuple(damaged),
            truncated_to,
            tail.length if tail is not None else 0,
            problem is not None,
        )
        return log, report

    def _write_at(self, offset: int, data: bytes, action: str) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.pwrite(self._fd, view, offset)
                view = view[written:]
                offset += written
        except OSError as exc:
            raise _os_error(action, self.path, exc) from exc

    def _require_writable(self) -> None:
        if self.readonly:
            raise StoreError("the log is open read-only; open it for writing", path=self.path)
        if self._broken is not None:
            raise self._broken

    def append(self, data: bytes, *, sync: bool) -> int:
        """Write ``data`` (whole frames) at the end; fsync when ``sync``. Returns its offset.

        On failure the bytes are truncated away and a ``StoreError`` with ``durable=False``
        is raised; the log stays usable, and the next append retries from the same offset.
        """
        self._require_writable()
        if _SLOW_WRITES is not None:
            _slow_write()
        if self._torn_since_failure:
            self._drop_tail()
        offset = self.size
        try:
            self._write_at(offset, data, "appending to the log")
            if sync:
                self._fsync()
        except StoreError as exc:
            self.write_failures += 1
            self.last_error = exc
            self._torn_since_failure = True
            self._drop_tail(exc)
            raise
        self.size = offset + len(data)
        self.bytes_written += len(data)
        self.unsynced = not sync
        self.last_error = None
        return offset

    def _drop_tail(self, cause: StoreError | None = None) -> None:
        try:
            os.ftruncate(self._fd, self.size)
        except OSError as exc:
            error = _os_error("truncating a failed append", self.path, exc)
            self.last_error = cause or error
            raise error from exc
        self._torn_since_failure = False

    def _fsync(self) -> None:
        try:
            _fdatasync(self._fd)
        except OSError as exc:
            raise _os_error("fsync of the log", self.path, exc) from exc
        self.fsyncs += 1
        self.last_sync = time.monotonic()
        self.unsynced = False

    def dup_fd(self) -> int:
        """A duplicate of the descriptor, for an fsync outside the caller's lock."""
        self._require_writable()
        try:
            return os.dup(self._fd)
        except OSError as exc:
            raise _os_error("fsync of the log", self.path, exc) from exc

    def fsync_fd(self, fd: int) -> None:
        """fdatasync ``fd`` (from :meth:`dup_fd`); counts it and records a failure."""
        try:
            _fdatasync(fd)
        except OSError as exc:
            self.last_error = _os_error("fsync of the log", self.path, exc)
            raise self.last_error from exc
        self.fsyncs += 1
        self.last_sync = time.monotonic()

    def sync(self) -> None:
        """fsync whatever was written without it (interval and never policies)."""
        self._require_writable()
        try:
            self._fsync()
        except StoreError as exc:
            self.last_error = exc
            raise

    def rewrite(self, frames: Iterable[bytes]) -> None:
        """Atomically replace the file with a header and ``frames`` (compaction)."""
        self.finish_rewrite(self.start_rewrite(frames), self.size)

    def start_rewrite(self, frames: Iterable[bytes]) -> Rewrite:
        """Write a header and ``frames`` to ``<path>.compact`` and fsync it.

        Touches nothing of the open log, so appends may continue meanwhile; the caller makes
        sure only one rewrite runs at a time. Finish with :meth:`finish_rewrite` or
        :meth:`abort_rewrite`.
        """
        self._require_writable()
        temp = self.path + ".compact"
        try:
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except OSError as exc:
            raise _os_error("creating the compaction file", temp, exc) from exc
        try:
            with open(fd, "wb", buffering=_REWRITE_CHUNK, closefd=False) as writer:
                writer.write(HEADER)
                for frame in frames:
                    writer.write(frame)
                size = writer.tell()
            _fdatasync(fd)
        except BaseException as exc:
            self.abort_rewrite(Rewrite(temp, fd, 0))
            if isinstance(exc, OSError):
                raise _os_error("writing the compaction file", temp, exc) from exc
            raise
        return Rewrite(temp, fd, size)

    def abort_rewrite(self, rewrite: Rewrite) -> None:
        """Drop an unfinished rewrite; the log is untouched."""
        os.close(rewrite.fd)
        try:
            os.unlink(rewrite.path)
        except FileNotFoundError:
            pass

    def finish_rewrite(self, rewrite: Rewrite, tail_from: int) -> None:
        """Copy the log's bytes from ``tail_from`` (appended since the rewrite started) to the
        rewrite, fsync it, rename it over the log and fsync the directory."""
        self._require_writable()
        try:
            tail = self._read_range(tail_from, self.size)
            view = memoryview(tail)
            offset = rewrite.size
            while view:
                written = os.pwrite(rewrite.fd, view, offset)
                view, offset = view[written:], offset + written
            if tail:
                _fdatasync(rewrite.fd)
        except OSError as exc:
            self.abort_rewrite(rewrite)
            raise _os_error("finishing the compaction file", rewrite.path, exc) from exc
        self.fsyncs += 2 if tail else 1
        os.close(rewrite.fd)
        try:
            os.replace(rewrite.path, self.path)
        except OSError as exc:
            os.unlink(rewrite.path)
            raise _os_error("renaming the compaction file over the log", self.path, exc) from exc
        # From here the new file is the log, whatever happens next.
        try:
            new_fd = os.open(self.path, os.O_RDWR)
        except OSError as exc:
            self._broken = _os_error("reopening the log after compaction; restart", self.path, exc)
            self.last_error = self._broken
            raise self._broken from exc
        old_fd, self._fd = self._fd, new_fd
        os.close(old_fd)
        self.size = offset
        self.unsynced = False
        self._torn_since_failure = False
        fsync_directory(self.path)

    def _read_range(self, start: int, end: int) -> bytes:
        chunks = []
        while start < end:
            chunk = os.pread(self._fd, end - start, start)
            if not chunk:
                raise OSError(errno_codes.EIO, f"the log ends at {start}, expected {end}")
            chunks.append(chunk)
            start += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        """fsync anything unsynced, then release the file and the lock."""
        try:
            if not self.readonly and self.unsynced and self._broken is None:
                self.sync()
        finally:
            os.close(self._fd)
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
