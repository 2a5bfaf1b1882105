"""Telling a damaged log from a busy or unreachable one, and setting a damaged log aside
(issue 20: ``edge-broker state check|set-aside``, ``[persistence] on_damage``).

A log that opens always opens: damage inside it is salvaged (the record dropped, a torn tail
cut, ``RecoveryReport``). A log is *refused* when nothing in it can be trusted: random bytes with
no intact record, or a header of a newer format. Under systemd a refused log is a restart loop
with every device offline, so the operator may choose to move it aside and start empty.
Damage is decided by a read-only open, which takes no lock and changes nothing: a log another
process holds, or a directory without permission, is never mistaken for damage.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from .errors import StoreError
from .frame import HEADER_SIZE, header_problem, is_header_prefix
from .keyed import KeyedLog
from .logfile import RecoveryReport

T = TypeVar("T")


class Replayed(Protocol):
    """A log opened read-only and replayed: what :func:`inspect_log` reads of it."""

    @property
    def report(self) -> RecoveryReport: ...
    def close(self) -> None: ...


Reader = Callable[[str], Replayed]  # opens a log read-only with the reducer of its owner


def read_keyed(path: str) -> Replayed:
    """The reader of the :class:`KeyedLog` files (broker.log, claims.log)."""
    return KeyedLog.open(path, readonly=True)


@dataclass(frozen=True, slots=True)
class LogCondition:
    """What a read-only open of one log found. ``state``: ``missing`` | ``ok`` | ``salvaged``
    (opens; damaged ranges will be dropped) | ``refused`` (will not open: damaged) |
    ``unreadable`` (an OS error: permissions, I/O) | ``blocked`` (intact, but the broker will
    not use it as it is: e.g. a policy bundle signed by a key no longer trusted; the detail
    says what to change; never set aside, as it is not damage)."""

    path: str
    state: str
    detail: str

    @property
    def refused(self) -> bool:
        return self.state == "refused"


def inspect_log(path: str | os.PathLike[str], reader: Reader = read_keyed) -> LogCondition:
    """Open ``path`` read-only with ``reader`` (the owner's reducer: a bridge queue is not a
    keyed log) and say what the broker will do with it."""
    name = str(path)
    if not os.path.exists(name):
        return LogCondition(name, "missing", "no file: the broker starts empty and creates it")
    try:
        keyed = reader(name)
    except StoreError as exc:
        if exc.errno is not None:
            return LogCondition(name, "unreadable", str(exc))
        return LogCondition(name, "refused", str(exc))
    except OSError as exc:
        return LogCondition(name, "unreadable", f"{name}: {exc.strerror}")
    report = keyed.report
    keyed.close()
    if report.clean:
        return LogCondition(name, "ok", f"{report.records} records, {report.file_size} bytes")
    return LogCondition(name, "salvaged", f"opens, dropping what is damaged: {report}")


def refusal(path: str | os.PathLike[str], reader: Reader = read_keyed) -> LogCondition | None:
    """What :func:`inspect_log` would say if it refuses ``path``, else None, without replaying a
    log whose header is sound: such a log always opens (damage after the header is salvaged),
    so only a bad header needs the replay that looks for an intact record. ``edge-broker
    check`` (systemd's ExecStartPre) uses this, so a start does not replay the state twice
    (scripts/bench_startup.py); the refusal, when there is one, is inspect_log's own."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_SIZE)
    except OSError:  # missing or unreadable: inspect_log does not refuse those either
        return None
    if is_header_prefix(head) or header_problem(head) is None:
        return None
    condition = inspect_log(path, reader)
    return condition if condition.refused else None


def set_aside(path: str | os.PathLike[str], now: float | None = None) -> Path:
    """Rename ``path`` to ``<path>.damaged-<UTC time>`` next to it (kept for inspection, never
    deleted) and return the new path; a leftover ``<path>.compact`` goes with it."""
    source = Path(path)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    target = source.with_name(f"{source.name}.damaged-{stamp}")
    counter = 1
    while target.exists():  # two set-asides in one second
        target = source.with_name(f"{source.name}.damaged-{stamp}-{counter}")
        counter += 1
    os.replace(source, target)
    compact = source.with_name(source.name + ".compact")
    if compact.exists():
        os.replace(compact, target.with_name(target.name + ".compact"))
    return target


def open_or_set_aside(
    path: str | os.PathLike[str],
    opener: Callable[[], T],
    on_damage: str,
    log: logging.Logger,
    reader: Reader = read_keyed,
    lost: str = "sessions, retained messages or claims",
) -> T:
    """``opener()``; when it fails because the log is damaged (:func:`inspect_log` says
    ``refused``) and ``on_damage`` is ``"set-aside"``, move the log aside, say so at error
    level (``lost``: what was in it), and open an empty one. Any other failure is raised as
    it is."""
    try:
        return opener()
    except StoreError:
        if on_damage != "set-aside" or not inspect_log(path, reader).refused:
            raise
    moved = set_aside(path)
    log.error(
        "the state file %s was damaged beyond repair: moved to %s, starting with an EMPTY "
        "store (%s in it are not restored); inspect it with `edge-broker state check`",
        path,
        moved,
        lost,
        extra={"event": "store_set_aside", "path": str(path), "moved_to": str(moved)},
    )
    return opener()


def damage_hint(path: str | os.PathLike[str], reader: Reader = read_keyed) -> str:
    """The way out, appended to a refusal when the log is damaged (not busy, not unreadable)."""
    if not inspect_log(path, reader).refused:
        return ""
    return (
        "; the file is damaged: `edge-broker state set-aside --config FILE` moves it aside "
        '(or set [persistence] on_damage = "set-aside" to do so at start), then the broker '
        "starts empty"
    )
