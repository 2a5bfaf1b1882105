"""The password file: usernames with argon2id hashes (AUTHZ.md §1, method ``password``).

File format, one user per line, ``#`` starts a comment line::

    username:$argon2id$v=19$m=7168,t=5,p=1$salt$hash[:tenant1,tenant2[:role1,role2[:id1,id-*]]]

The optional third field names the tenants the user may connect to (the tenant is taken from it
when it names exactly one and the client did not ask for one); the optional fourth field lists
roles that select default permissions; the optional fifth lists the client identifiers the user
may connect with, as shell-style globs (``sensor-*``; issue 15 item 8): with it, ``${clientid}``
in the user's permissions names an identifier the broker checked. Hashes are made and checked
with libsodium's argon2id through pynacl. Verification is deliberately slow (tens of ms here,
longer on a Pi), so callers run it in a thread and bound how many run at once
(auth/hash_slots.py).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from .errors import AuthError

# New hashes (issue 16): OWASP's smallest-memory argon2id setting, m=7 MiB, t=5, p=1 (the
# Password Storage Cheat Sheet lists it as equivalent to m=19 MiB t=2 and m=46 MiB t=1). On a
# 512 MB board memory is the scarce resource: libsodium's "interactive" 64 MiB × a login storm
# did not fit under MemoryHigh. Old 64 MiB hashes still verify (the parameters are read from
# each hash string); `edge-broker passwd add` again moves a user to these. docs/limits-admission.md
OPSLIMIT = 5
MEMLIMIT = 7 * 1024 * 1024

REDO = "`edge-broker passwd add`"
_NAME_FORBIDDEN = (":", "\n", "\r", "\x00")
_LIST_SEPARATOR = ","


class PasswordFileError(AuthError):
    """A password file that cannot be read or a request that cannot be carried out.

    ``problems``: one message per bad line of the file (``file:line: what is wrong``), or the
    message alone."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


@dataclass(frozen=True, slots=True)
class PasswordEntry:
    username: str
    hash: bytes
    tenants: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    clientids: tuple[str, ...] = ()  # globs; empty: the entry binds no client identifier

    def to_line(self) -> str:
        fields = [self.username, self.hash.decode("ascii")]
        if self.tenants or self.roles or self.clientids:
            fields.append(_LIST_SEPARATOR.join(self.tenants))
        if self.roles or self.clientids:
            fields.append(_LIST_SEPARATOR.join(self.roles))
        if self.clientids:
            fields.append(_LIST_SEPARATOR.join(self.clientids))
        return ":".join(fields)

    def allows_client_id(self, client_id: str) -> bool:
        """True when the entry names no client ids, or one of its globs matches ``client_id``."""
        return not self.clientids or any(fnmatchcase(client_id, g) for g in self.clientids)


def hash_password(password: str) -> bytes:
    """An argon2id hash string (as bytes) for ``password``."""
    import nacl.pwhash  # PyNaCl only once a password is hashed or checked (issue 32)

    return nacl.pwhash.argon2id.str(password.encode("utf-8"), opslimit=OPSLIMIT, memlimit=MEMLIMIT)


def verify_password(entry: PasswordEntry, password: bytes) -> bool:
    """True when ``password`` matches the entry's hash. Constant-time inside libsodium (and
    ``hmac.compare_digest`` for hashes imported from Mosquitto, auth/mosquitto_hashes.py)."""
    if entry.hash[:1] == b"$" and entry.hash[:3] in (b"$6$", b"$7$"):
        from .mosquitto_hashes import verify_mosquitto

        return verify_mosquitto(entry.hash.decode("ascii"), password)
    import nacl.exceptions
    import nacl.pwhash

    try:
        return bool(nacl.pwhash.verify(entry.hash, password))
    except (nacl.exceptions.InvalidkeyError, nacl.exceptions.CryptoError, ValueError):
        return False


def _check_username(username: str) -> None:
    if not username:
        raise PasswordFileError("username must not be empty")
    for ch in _NAME_FORBIDDEN:
        if ch in username:
            raise PasswordFileError(f"username {username!r} must not contain {ch!r}")


def _split_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(_LIST_SEPARATOR) if item.strip())


def parse_password_file(text: str, path: str = "<password file>") -> dict[str, PasswordEntry]:
    """Parse the file's text; every error names the file and line and says what to write. Every
    bad line is reported (``PasswordFileError.problems``), not just the first: an operator who
    fixes one line should not find the next only at the next start."""
    entries: dict[str, PasswordEntry] = {}
    problems: list[str] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        entry = _parse_line(line)
        if isinstance(entry, str):
            problems.append(f"{path}:{lineno}: {entry}")
        elif entry.username in entries:
            problems.append(
                f"{path}:{lineno}: user {entry.username!r} appears twice; keep one line"
            )
        else:
            entries[entry.username] = entry
    if problems:
        raise PasswordFileError("\n".join(problems), problems)
    return entries


def _parse_line(line: str) -> PasswordEntry | str:
    """One entry, or what is wrong with the line (without the file and line number)."""
    fields = line.split(":")
    # the hash itself contains no ':' (argon2id strings use '$' and ',')
    if len(fields) < 2 or len(fields) > 5:
        return (
            "expected 'username:argon2id-hash[:tenants[:roles[:clientids]]]'; "
            "create entries with `edge-broker passwd add`"
        )
    username, hashed = fields[0], fields[1]
    if not username:
        return "empty username"
    if not hashed.isascii():
        return f"user {username!r}: the hash is not ASCII; set the password again with {REDO}"
    if not hashed.startswith("$argon2id$"):
        from .mosquitto_hashes import hash_problem  # a mosquitto_passwd $6$/$7$ hash is fine

        problem = hash_problem(hashed)
        if problem is not None:
            return f"user {username!r}: {problem}; set the password again with {REDO}"
    tenants = _split_list(fields[2]) if len(fields) > 2 else ()
    roles = _split_list(fields[3]) if len(fields) > 3 else ()
    clientids = _split_list(fields[4]) if len(fields) > 4 else ()
    return PasswordEntry(username, hashed.encode("ascii"), tenants, roles, clientids)


def load_password_file(path: str | os.PathLike[str]) -> dict[str, PasswordEntry]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise PasswordFileError(
            f"{path}: password file not found; create it with `edge-broker passwd add {path} USER`"
        ) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PasswordFileError(f"{path}: cannot read the password file: {exc}") from exc
    return parse_password_file(text, str(path))


def _file_access(target: Path, directory: Path) -> tuple[int, int, int]:
    """(mode, uid, gid) the rewritten file gets: those of the file it replaces, so that the
    service user (group ``edge-broker``, README "Running as a service") can still read it after
    ``passwd add`` by root (issue 20). A new file is 0600, or 0640 with its folder's group when
    that group is not ours (``/etc/edge-broker`` is ``root:edge-broker``)."""
    try:
        old = target.stat()
        return stat.S_IMODE(old.st_mode), old.st_uid, old.st_gid
    except FileNotFoundError:
        folder = directory.stat()
        if folder.st_gid != os.getgid():
            return 0o640, os.getuid(), folder.st_gid
        return 0o600, os.getuid(), os.getgid()


def write_password_file(path: str | os.PathLike[str], entries: dict[str, PasswordEntry]) -> None:
    """Replace the file atomically (write a temporary file, fsync, rename), keeping the owner,
    group and mode of the file it replaces (:func:`_file_access`)."""
    target = Path(path)
    header = "# edge-broker password file: username:argon2id-hash[:tenants[:roles[:clientids]]]\n"
    body = "".join(
        entry.to_line() + "\n" for entry in sorted(entries.values(), key=lambda e: e.username)
    )
    directory = target.parent if str(target.parent) else Path(".")
    mode, uid, gid = _file_access(target, directory)
    import tempfile  # only `edge-broker passwd` writes the file (issue 32: fresh RSS)

    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(header + body)
            handle.flush()
            if (uid, gid) != (os.getuid(), os.getgid()):
                try:
                    os.fchown(handle.fileno(), uid, gid)
                except PermissionError as exc:
                    raise PasswordFileError(
                        f"{target}: cannot keep its owner {uid}:{gid} ({exc.strerror}); nothing "
                        "was changed: run the command as root or as the file's owner"
                    ) from exc
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def set_user(
    entries: dict[str, PasswordEntry],
    username: str,
    password: str,
    tenants: tuple[str, ...] | None = None,
    roles: tuple[str, ...] | None = None,
    clientids: tuple[str, ...] | None = None,
) -> dict[str, PasswordEntry]:
    """A copy of ``entries`` with ``username`` added or its password changed.

    ``tenants``/``roles``/``clientids`` of ``None`` keep what an existing entry had.
    """
    _check_username(username)
    if not password:
        raise PasswordFileError("the password must not be empty")
    old = entries.get(username)
    new = PasswordEntry(
        username,
        hash_password(password),
        tenants if tenants is not None else (old.tenants if old else ()),
        roles if roles is not None else (old.roles if old else ()),
        clientids if clientids is not None else (old.clientids if old else ()),
    )
    for item in new.tenants + new.roles + new.clientids:
        if ":" in item or _LIST_SEPARATOR in item or not item or item != item.strip():
            raise PasswordFileError(
                f"tenant, role or client id {item!r} must be non-empty and contain no ':' or ',' "
                "and no leading or trailing space"
            )
    result = dict(entries)
    result[username] = new
    return result


def remove_user(entries: dict[str, PasswordEntry], username: str) -> dict[str, PasswordEntry]:
    if username not in entries:
        raise PasswordFileError(f"user {username!r} is not in the password file")
    result = dict(entries)
    del result[username]
    return result
