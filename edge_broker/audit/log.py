"""The audit log on disk: numbered JSON-lines segments, rotated by size, bounded in total.

Segments are ``audit-<seq>.jsonl`` with a zero-padded, ever-increasing sequence number, so
that an uploader can remember "everything up to segment N, line L is sent" across restarts and
rotations. The highest segment is the one being written; older ones are closed and never change
again. When more than ``max_segments`` exist the oldest are deleted, so the log never takes
more than about ``max_segment_bytes * max_segments`` bytes; the number of records dropped that
way is counted.

Records are buffered in memory and written by ``flush()`` (the broker calls it about once a
second and at shutdown), so recording costs the hot path one ``json.dumps``. The audit log is a
diagnostic trail, not a promise: it is not fsynced per record; a closed segment is fsynced once
at rotation. A torn last line after a power cut is skipped by the reader.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .record import FORMAT_VERSION, AuditRecordError, decode_record, encode_record

SEGMENT_RE = re.compile(r"^audit-(\d{8})\.jsonl$")


def segment_name(seq: int) -> str:
    return f"audit-{seq:08d}.jsonl"


def list_segments(directory: str | os.PathLike[str]) -> list[tuple[int, Path]]:
    """(sequence, path) of every segment in ``directory``, oldest first."""
    found = []
    base = Path(directory)
    if not base.is_dir():
        return []
    for entry in base.iterdir():
        match = SEGMENT_RE.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry))
    found.sort()
    return found


@dataclass(frozen=True, slots=True)
class AuditStats:
    records_written: int
    records_dropped: int
    segments: int
    bytes_on_disk: int


class AuditLog:
    """Append-only, size-rotated audit log for one gateway."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        gateway_id: str,
        *,
        max_segment_bytes: int = 4 * 1024 * 1024,
        max_segments: int = 16,
        max_buffered: int = 10_000,
        log_allowed: bool = False,
        stats_interval: float = 0.0,
    ) -> None:
        if max_segment_bytes < 1024:
            raise ValueError("audit max_segment_bytes must be at least 1024")
        if max_segments < 2:
            raise ValueError("audit max_segments must be at least 2")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.gateway_id = gateway_id
        self.max_segment_bytes = max_segment_bytes
        self.max_segments = max_segments
        self.max_buffered = max_buffered
        self.log_allowed = (
            log_allowed  # [audit] log_allowed: the gates record allowed decisions too
        )
        self.stats_interval = (
            stats_interval  # [audit] stats_interval: client_stats period (events.py)
        )
        self.next_stats_at = 0.0
        self._buffer: list[str] = []
        # called when a record arrives in an empty buffer: the broker plans a flush then
        # instead of waking to look (broker/scheduler.py)
        self.on_buffered: Callable[[], None] | None = None
        self._written = 0
        self._dropped = 0
        segments = list_segments(self.directory)
        self._seq = segments[-1][0] if segments else 1
        self._fd = -1
        self._size = 0
        self._open_current()

    # -- writing -------------------------------------------------------------------------
    def record(self, type_: str, **fields: Any) -> None:
        """Queue one record; ``type_`` is ``decision`` or ``event``."""
        rec: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "ts": round(time.time(), 3),
            "gw": self.gateway_id,
            "type": type_,
        }
        rec.update(fields)
        if len(self._buffer) >= self.max_buffered:
            self.flush()
        if not self._buffer and self.on_buffered is not None:
            self.on_buffered()
        self._buffer.append(encode_record(rec) + "\n")

    def decision(self, line: Callable[[int, float], None] | None = None, **fields: Any) -> None:
        """One decision record, written as is (the broker aggregates through
        ``aggregate.DecisionWindow``); ``line`` logs it."""
        self.record("decision", **fields)
        if line is not None:
            line(0, 0.0)

    def event(self, event: str, **fields: Any) -> None:
        self.record("event", event=event, **fields)

    def flush(self) -> None:
        """Write buffered records, rotating as segments fill up."""
        if not self._buffer:
            return
        pending, self._buffer = self._buffer, []
        chunk: list[bytes] = []
        chunk_size = 0
        for line in pending:
            data = line.encode("utf-8")
            if self._size + chunk_size + len(data) > self.max_segment_bytes and (
                self._size or chunk_size
            ):
                self._write(b"".join(chunk))
                chunk, chunk_size = [], 0
                self._rotate()
            chunk.append(data)
            chunk_size += len(data)
        if chunk:
            self._write(b"".join(chunk))
        self._written += len(pending)

    def close(self) -> None:
        self.flush()
        if self._fd >= 0:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def stats(self) -> AuditStats:
        segments = list_segments(self.directory)
        size = sum(path.stat().st_size for _, path in segments if path.exists())
        return AuditStats(self._written, self._dropped, len(segments), size)

    @property
    def current_sequence(self) -> int:
        return self._seq

    # -- internals -----------------------------------------------------------------------
    def _open_current(self) -> None:
        path = self.directory / segment_name(self._seq)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
        self._size = os.fstat(self._fd).st_size

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._size += len(data)

    def _rotate(self) -> None:
        os.fsync(self._fd)
        os.close(self._fd)
        self._seq += 1
        self._open_current()
        segments = list_segments(self.directory)
        for _, path in segments[: max(0, len(segments) - self.max_segments)]:
            try:
                with path.open("rb") as handle:
                    self._dropped += sum(1 for _ in handle)
                path.unlink()
            except FileNotFoundError:
                pass


def read_records(
    directory: str | os.PathLike[str], *, after: tuple[int, int] | None = None
) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """Yield (segment sequence, line number, record) in order, skipping torn or invalid lines.

    ``after=(seq, line)`` resumes after that position (an uploader's cursor).
    """
    for seq, path in list_segments(directory):
        if after is not None and seq < after[0]:
            continue
        try:
            handle = path.open("r", encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue  # rotated away while we looked
        with handle:
            for lineno, line in enumerate(handle, start=1):
                if after is not None and seq == after[0] and lineno <= after[1]:
                    continue
                if not line.endswith("\n"):
                    break  # torn tail of the segment being written or cut by power loss
                try:
                    yield seq, lineno, decode_record(line)
                except AuditRecordError:
                    continue
