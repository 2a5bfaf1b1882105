"""Crash-safe storage: the append-only CBOR log, keyed tables on it, and a TinyDB storage.

Used for SMOKER claims (issue 6), retained messages and persistent sessions (issue 8).
Start with ``KeyedLog.open(path)``; ``Log`` is the record layer beneath it and ``LogStorage``
the TinyDB view. Every failure is a ``StoreError``.

How the broker uses it::

    claims = KeyedLog.open(state_dir / "claims.log")    # one file per subsystem
    if not claims.report.clean:
        log.warning("claim store recovery: %s", claims.report)
    try:
        await claims.table("claims").put(topic, claim_record)   # returns once fsynced
    except StoreError:
        ...  # not durable: answer 0x80 (SMOKER.md), never 0x00
    claims.health()   # StoreHealth for $SYS: healthy, error, errno, compaction_error
    await claims.aclose()   # on shutdown: finish queued appends, fsync, close

Files next to the log: ``<log>.lock`` (held while a writer has it open; kept on close) and
``<log>.compact`` (only during a compaction; removed at open if a crash left it).
"""

from typing import TYPE_CHECKING, Any

from .durability import Durability
from .errors import StoreError
from .frame import Damage
from .health import LogStats, StoreHealth
from .keyed import CreateTable, Delete, DropTable, Key, KeyedLog, Op, Put, Table
from .log import DEFAULT_MAX_RECORD_SIZE, Log, Reducer
from .logfile import RecoveryReport

if TYPE_CHECKING:
    from .tinydb_storage import LogStorage

__all__ = [
    "DEFAULT_MAX_RECORD_SIZE",
    "CreateTable",
    "Damage",
    "Delete",
    "DropTable",
    "Durability",
    "Key",
    "KeyedLog",
    "Log",
    "LogStats",
    "LogStorage",
    "Op",
    "Put",
    "RecoveryReport",
    "Reducer",
    "StoreError",
    "StoreHealth",
    "Table",
]


def __getattr__(name: str) -> Any:
    """``LogStorage`` on first use: it imports TinyDB (and pickle), which only the claim
    commands need, not a running broker (issue 32: fresh RSS)."""
    if name == "LogStorage":
        from .tinydb_storage import LogStorage

        return LogStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
