"""What a log reports about itself, for ``$SYS`` topics, logs and benchmarks (issue 8: "the
condition is logged and shown in ``$SYS``")."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogStats:
    """Counters since open, for ``$SYS`` and benchmarks."""

    appends: int
    batches: int
    fsyncs: int
    bytes_written: int
    write_failures: int
    compactions: int
    file_size: int
    live_bytes: int


@dataclass(frozen=True, slots=True)
class StoreHealth:
    """``healthy`` is false after a failed write or fsync until the next one succeeds."""

    path: str
    healthy: bool
    error: str | None = None
    errno: int | None = None
    compaction_error: str | None = None
