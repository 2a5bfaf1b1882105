"""Admin users: who may use the admin API and console, with the role ``viewer`` (every read) or
``operator`` (reads and actions).

They live in their own file, never in the MQTT password file (``[admin] users_file``), in the
password file's format and with its argon2id hashing (``auth/password.py``), the role in the
roles field::

    alice:$argon2id$v=19$m=7168,t=5,p=1$salt$hash::operator

``edge-broker admin add|remove|list FILE`` writes and reads it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..auth.password import (
    PasswordEntry,
    PasswordFileError,
    hash_password,
    load_password_file,
    remove_user,
    set_user,
    verify_password,
    write_password_file,
)

ROLES = ("viewer", "operator")


@dataclass(frozen=True, slots=True)
class AdminUser:
    name: str
    role: str  # one of ROLES
    entry: PasswordEntry


def role_problem(entry: PasswordEntry) -> str | None:
    if len(entry.roles) != 1 or entry.roles[0] not in ROLES:
        return (
            f"admin user {entry.username!r} has roles {list(entry.roles)}: exactly one of "
            f"{', '.join(ROLES)} is needed (edge-broker admin add --role ROLE)"
        )
    if entry.tenants or entry.clientids:
        return f"admin user {entry.username!r}: tenants and client ids do not apply to admin users"
    return None


def load_admin_users(path: str | os.PathLike[str]) -> dict[str, AdminUser]:
    """The users of ``path``; PasswordFileError naming the file and every bad entry."""
    entries = load_password_file(path)
    problems = [f"{path}: {p}" for e in entries.values() if (p := role_problem(e)) is not None]
    if problems:
        raise PasswordFileError(problems[0], problems)
    return {name: AdminUser(name, e.roles[0], e) for name, e in entries.items()}


def add_admin_user(path: str | os.PathLike[str], name: str, password: str, role: str) -> None:
    if role not in ROLES:
        raise PasswordFileError(f"role {role!r} is not one of {', '.join(ROLES)}")
    entries = load_password_file(path) if os.path.exists(path) else {}
    write_password_file(path, set_user(entries, name, password, (), (role,), ()))


def remove_admin_user(path: str | os.PathLike[str], name: str) -> None:
    write_password_file(path, remove_user(load_password_file(path), name))


def dummy_entry() -> PasswordEntry:
    """A hash an unknown user is checked against: the same argon2id cost as a known user's, so
    the answer's time does not tell which user names exist."""
    return PasswordEntry("-", hash_password(os.urandom(16).hex()))


def check_password(user: AdminUser | None, password: str, dummy: PasswordEntry) -> bool:
    """Slow (argon2id): call it in a thread."""
    ok = verify_password(user.entry if user is not None else dummy, password.encode())
    return ok and user is not None
