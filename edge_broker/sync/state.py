"""What the gateway remembers about policy sync and audit upload (DESIGN.md "cloud policy sync").

The state directory (``[sync] state_dir``, default ``<broker state dir>/sync``) holds:

``bundle.cbor``
    the last applied bundle, byte for byte as signed; on start it is verified again and applied
    before the broker serves, so a gateway that restarts offline keeps its policy.
``passwd.v<version>``
    the password file written from a bundle's ``passwords`` entries.
``audit-cursor.json``
    ``{"seq": S, "line": L}``: every audit record up to segment S line L was acknowledged.
``status.json``
    the last bundle's status (``source = "directory"``); written, never read.

Every file is replaced atomically (temporary file, fsync, rename, fsync of the directory).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..store.damage import LogCondition
from .errors import SyncError

if TYPE_CHECKING:
    from nacl.signing import VerifyKey

BUNDLE_FILE = "bundle.cbor"
CURSOR_FILE = "audit-cursor.json"
STATUS_FILE = "status.json"
PASSWORD_FILES = "passwd.v*"  # glob of the password files written from bundles


class SyncStateError(SyncError):
    """The sync state directory cannot be used (the message names the path)."""


def atomic_write(path: Path, data: bytes, mode: int = 0o640) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


@dataclass(frozen=True, slots=True)
class SyncStateDir:
    path: Path

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SyncStateDir:
        directory = Path(path)
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o750)
        except OSError as exc:
            raise SyncStateError(
                f"cannot create the sync state directory {directory}: {exc.strerror}; "
                "set [sync] state_dir to a writable directory"
            ) from exc
        if not os.access(directory, os.W_OK):
            raise SyncStateError(
                f"the sync state directory {directory} is not writable; "
                "set [sync] state_dir to a writable directory"
            )
        return cls(directory)

    def load_bundle(self) -> bytes | None:
        try:
            return (self.path / BUNDLE_FILE).read_bytes()
        except FileNotFoundError:
            return None

    def save_bundle(self, data: bytes) -> None:
        atomic_write(self.path / BUNDLE_FILE, data)

    def password_file(self, version: int) -> Path:
        return self.path / f"passwd.v{version}"

    def remove_password_files(self, keep: int) -> None:
        for entry in self.path.glob(PASSWORD_FILES):
            if entry.name != f"passwd.v{keep}":
                entry.unlink(missing_ok=True)

    def load_cursor(self) -> tuple[int, int] | None:
        try:
            return read_cursor(self.path / CURSOR_FILE)
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            raise SyncStateError(
                f"{self.path / CURSOR_FILE} is damaged ({exc}); delete it to upload "
                "the whole audit log again"
                + "; or `edge-broker state set-aside --config FILE` moves it aside (or set "
                '[persistence] on_damage = "set-aside" to do so at start)'
            ) from exc

    def save_cursor(self, seq: int, line: int) -> None:
        atomic_write(self.path / CURSOR_FILE, json.dumps({"seq": seq, "line": line}).encode())


def read_cursor(path: Path) -> tuple[int, int]:
    """The audit upload cursor; ValueError, KeyError or TypeError when the file is damaged."""
    data = json.loads(path.read_bytes())
    seq, line = int(data["seq"]), int(data["line"])
    if seq < 0 or line < 0:
        raise ValueError(f"negative position {seq}:{line}")
    return seq, line


def inspect_cursor(path: Path) -> LogCondition:
    """What the broker will do with the audit upload cursor (``edge-broker state check``)."""
    try:
        seq, line = read_cursor(path)
    except FileNotFoundError:
        return LogCondition(str(path), "missing", "no file: the upload starts at the oldest record")
    except OSError as exc:
        return LogCondition(str(path), "unreadable", f"{path}: {exc.strerror}")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        return LogCondition(str(path), "refused", f"{path}: damaged: not an upload cursor ({exc})")
    return LogCondition(str(path), "ok", f"uploaded up to segment {seq} line {line}")


def inspect_bundle(
    path: Path, trusted_keys: Mapping[str, VerifyKey], gateway_id: str
) -> LogCondition:
    """What the broker will do with the saved bundle (``edge-broker state check``):
    ``refused`` when it is damaged (:func:`stored_damage`), ``blocked`` when it is sound but
    the start would refuse it (a key no longer trusted, another gateway's), else ``ok``."""
    from .bundle import BundleError, check_acceptable, stored_damage, verify_bundle

    name = str(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return LogCondition(name, "missing", "no file: the broker starts on its base config")
    except OSError as exc:
        return LogCondition(name, "unreadable", f"{name}: {exc.strerror}")
    damage = stored_damage(data, trusted_keys)
    if damage is not None:
        return LogCondition(name, "refused", f"{name}: damaged: {damage}")
    try:
        bundle = verify_bundle(data, trusted_keys)
        check_acceptable(bundle, gateway_id, None)
    except BundleError as exc:
        return LogCondition(
            name,
            "blocked",
            f"{name}: {exc}: the broker will not start on it; trust its key again ([sync] "
            f"trusted_keys) or fix [sync] gateway_id, or delete {name} to start from the base "
            "config",
        )
    return LogCondition(name, "ok", f"policy bundle v{bundle.version}, {len(data)} bytes")


class SyncStatus:
    """Live sync counters for metrics and the status topic (owned by the sync service)."""

    __slots__ = ("version", "last_success", "applied", "refused", "connected", "last_error")

    def __init__(self) -> None:
        self.version: int | None = None
        self.last_success: float | None = None
        self.applied = 0
        self.refused = 0
        self.connected = False
        self.last_error: str | None = None

    def success(self, version: int) -> None:
        self.version = version
        self.last_success = time.time()
        self.applied += 1
        self.last_error = None

    def failure(self, reason: str) -> None:
        self.refused += 1
        self.last_error = reason
