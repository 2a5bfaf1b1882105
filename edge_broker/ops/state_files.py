"""Every file the broker keeps in its state directories, in one list: what ``edge-broker
check``, ``edge-broker state check`` and ``state set-aside`` go through.

Each package names its own files (``broker.persist.tables.log_path``, ``claims.runtime.store_path``,
``bridge.store.queue_path``, ``sync.state``) and opens them itself, applying ``[persistence]
on_damage`` where it does; this module only lists them for a config, with how to judge each one
read-only (:class:`StateFile`). A new state file is added here, or the commands do not see it.

Kinds:

- ``log``: an append-only log (``store``): damage inside is salvaged, a log with nothing intact
  is refused and may be set aside;
- ``bundle``: the policy bundle last applied (``sync/bundle.cbor``): damaged bytes are refused
  and may be set aside (the broker then starts on its base config); a sound bundle the start
  would not accept (a key no longer trusted) is ``blocked``, never moved;
- ``cursor``: the audit upload position: damaged, it is refused and may be set aside (the
  upload starts again at the oldest record);
- ``audit``: a segment of the audit log (``[audit] dir``, often inside the state directory):
  a damaged line is skipped by the upload and the analytics, never fatal;
- ``derived``: rewritten by the broker, never read at start (``status.json``, the password
  files written from a bundle, the ``.lock`` files whose content is unused): damage there does
  not matter, and they are listed so that an operator knows what each file is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..store.damage import LogCondition, Reader, inspect_log, read_keyed, refusal

if TYPE_CHECKING:
    from nacl.signing import VerifyKey

    from ..config import Config

SETTABLE_ASIDE = ("log", "bundle", "cursor")  # kinds whose damage `set-aside` moves away


@dataclass(frozen=True, slots=True)
class StateFile:
    """One file of the state directory. ``used``: the broker opens it at start with this
    config (a refusal then stops ``run``); ``inspect`` reads it (read-only, no lock); ``reader``
    opens a log with its owner's reducer."""

    path: Path
    what: str
    kind: str
    used: bool
    inspect: Callable[[], LogCondition]
    reader: Reader = read_keyed

    def refusal(self) -> LogCondition | None:
        """What ``run`` would refuse, cheaply: a sound log's header is enough (``refusal`` of
        store/damage.py: ``check`` is the unit's ExecStartPre and must not replay the state
        ``run`` replays right after)."""
        if not self.used or self.kind == "derived":
            return None
        if self.kind == "log":
            return refusal(self.path, self.reader)
        condition = self.inspect()
        return condition if condition.state in ("refused", "blocked") else None


def _log(path: Path, what: str, used: bool, reader: Reader = read_keyed) -> StateFile:
    def inspect() -> LogCondition:
        return inspect_log(path, reader)

    return StateFile(path, what, "log", used, inspect, reader)


def _derived(path: Path, what: str, detail: str) -> StateFile:
    def inspect() -> LogCondition:
        return LogCondition(str(path), "ok" if path.exists() else "missing", detail)

    return StateFile(path, what, "derived", False, inspect)


def _audit_segment(path: Path) -> StateFile:
    def inspect() -> LogCondition:
        from ..audit.record import AuditRecordError, decode_record

        records = damaged = 0
        try:
            with path.open("r", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if not line.endswith("\n"):
                        break  # the torn tail of the segment being written
                    try:
                        decode_record(line)
                        records += 1
                    except AuditRecordError:
                        damaged += 1
        except FileNotFoundError:
            return LogCondition(str(path), "missing", "rotated away")
        except OSError as exc:
            return LogCondition(str(path), "unreadable", f"{path}: {exc.strerror}")
        if damaged:
            detail = f"{records} records; {damaged} damaged lines are skipped by the upload"
            return LogCondition(str(path), "salvaged", detail)
        return LogCondition(str(path), "ok", f"{records} records")

    return StateFile(path, "audit log segment", "audit", False, inspect)


def _trusted_keys(config: Config) -> dict[str, VerifyKey]:
    from ..keys import load_verify_key
    from ..sync.bundle import key_id

    keys = {}
    for name in config.sync.trusted_keys:
        try:
            key = load_verify_key(name)
        except Exception:  # noqa: BLE001  # `run` reports an unloadable key itself, by name
            continue
        keys[key_id(key)] = key
    return keys


def state_files(config: Config) -> list[StateFile]:
    """Every state file of ``config``: those the broker would open, and those it left there
    (a bridge removed from the config keeps its queue log until an operator moves it)."""
    from ..bridge.store import queue_path, read_queue
    from ..broker.persist.tables import log_path
    from ..claims.runtime import store_path
    from ..config import claims_enabled
    from ..store.state_dir import state_dir
    from ..sync.service import default_state_dir
    from ..sync.state import (
        BUNDLE_FILE,
        CURSOR_FILE,
        PASSWORD_FILES,
        STATUS_FILE,
        inspect_bundle,
        inspect_cursor,
    )

    persisted = config.persistence.enabled
    files = [
        _log(log_path(config), "sessions and retained messages", persisted),
        _log(store_path(config), "claims", claims_enabled(config)),
    ]
    directory = state_dir(config)
    configured = {queue_path(directory, bridge.name): bridge.name for bridge in config.bridges}
    left = {
        path: path.name.removeprefix("bridge-").removesuffix(".log")
        for path in (directory.glob("bridge-*.log") if directory.is_dir() else ())
        if path not in configured
    }
    for path, name in sorted({**configured, **left}.items()):
        what = f"bridge {name!r} queue" + ("" if path in configured else " (not configured)")
        files.append(_log(path, what, persisted and path in configured, read_queue))
    sync = default_state_dir(config)
    if config.sync.enabled or (sync / BUNDLE_FILE).exists() or (sync / CURSOR_FILE).exists():
        gateway = config.sync.gateway_id
        bundle, cursor = sync / BUNDLE_FILE, sync / CURSOR_FILE

        def judge_bundle() -> LogCondition:
            return inspect_bundle(bundle, _trusted_keys(config), gateway)

        def judge_cursor() -> LogCondition:
            return inspect_cursor(cursor)

        uploads = config.sync.source == "mqtt" and config.sync.audit_upload
        files += [
            StateFile(bundle, "policy bundle", "bundle", config.sync.enabled, judge_bundle),
            StateFile(
                cursor,
                "audit upload cursor",
                "cursor",
                uploads and config.audit.dir is not None,
                judge_cursor,
            ),
        ]
        status = sync / STATUS_FILE
        if config.sync.source == "directory" or status.exists():
            files.append(_derived(status, "policy status", "written at each bundle, never read"))
        if sync.is_dir():
            files += [
                _derived(path, "password file of the bundle", "written again at each start")
                for path in sorted(sync.glob(PASSWORD_FILES))
            ]
    if config.audit.dir is not None:
        from ..audit.log import list_segments

        files += [_audit_segment(path) for _, path in list_segments(config.audit.dir)]
    folders = {f.path.parent for f in files if f.path.parent.is_dir()}
    files += [
        _derived(path, "set aside", "moved aside for inspection, never read: delete it when done")
        for folder in sorted(folders)
        for path in sorted(folder.glob("*.damaged-*"))
    ]
    files += [
        _derived(Path(f"{f.path}.lock"), f"lock of {f.path.name}", "locked while open; empty")
        for f in list(files)
        if f.kind == "log" and Path(f"{f.path}.lock").exists()
    ]
    return files
