"""Crash-safe storage: the append-only CBOR log, keyed tables on it, and a TinyDB storage.

Used for SMOKER claims (issue 6), retained messages and persistent sessions (issue 8).
Start with ``KeyedLog.open(path)``; ``Log`` is the record layer beneath it and ``LogStorage``
the TinyDB view. Every failure is a ``StoreError``.
"""

from .durability import Durability
from .errors import StoreError
from .frame import Damage
from .keyed import CreateTable, Delete, DropTable, Key, KeyedLog, Op, Put, Table
from .log import DEFAULT_MAX_RECORD_SIZE, Log, LogStats, Reducer, StoreHealth
from .logfile import RecoveryReport
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
