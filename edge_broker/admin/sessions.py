"""Who is logged in to the admin API: cookie sessions, their CSRF tokens, one-time login links
and the per-source login back-off.

- A login (``POST /api/v1/login``) checks the password with argon2id in a thread, one check at
  a time (a login storm costs one core at most, and 7 MiB); an unknown user costs the same
  check and gets the same answer.
- Failures back off per (source, user) and per source alone (``auth/login_fairness.py``'s
  bounded table): after the free ones the answer is 429 with ``Retry-After`` and no hash is
  computed at all.
- A session is a random 256-bit cookie value with its own random CSRF token; at most
  ``max_sessions`` are held (the oldest is logged out first), each for ``ttl`` seconds.
- The users file is read again when it changed (``edge-broker admin add`` needs no restart);
  a user removed or whose role changed loses its sessions at the next request.
- A one-time login link (``/login/once?token=``) works once: the embedded default prints one
  at start, as Jupyter does, instead of any default password.
"""

from __future__ import annotations

import asyncio
import hmac
import os
import secrets
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from ..auth.login_fairness import FailureBackoff, login_source
from ..auth.password import PasswordEntry, PasswordFileError
from .users import AdminUser, check_password, dummy_entry, load_admin_users

LOCAL_USER = "local"  # who a one-time link logs in: the operator at the broker's terminal


@dataclass(slots=True)
class AdminSession:
    token: str
    user: str
    role: str
    csrf: str
    source: str
    expires: float


@dataclass(frozen=True, slots=True)
class LoginRefused:
    status: int  # 401 wrong password or unknown user, 429 backing off
    message: str
    retry_after: int = 0


class AdminAuth:
    """The sessions of one admin listener (module docstring)."""

    def __init__(
        self,
        users_file: str | None,
        clock: Callable[[], float],
        ttl: float = 8 * 3600.0,
        max_sessions: int = 64,
        backoff: FailureBackoff | None = None,
    ) -> None:
        self.users_file = users_file
        self.clock = clock
        self.ttl = ttl
        self.max_sessions = max_sessions
        self.backoff = backoff if backoff is not None else FailureBackoff(1.0, 60.0, 1024)
        self._sessions: OrderedDict[str, AdminSession] = OrderedDict()
        self._once: str | None = None
        self._users: dict[str, AdminUser] = {}
        self._users_stamp: tuple[int, int] | None = None
        self._dummy: PasswordEntry | None = None
        self._hashing = asyncio.Semaphore(1)

    # -- users ---------------------------------------------------------------------------
    def users(self) -> dict[str, AdminUser]:
        """The users file as it is now (read again when its size or time changed)."""
        if self.users_file is None:
            return {}
        try:
            st = os.stat(self.users_file)
        except OSError:
            self._users, self._users_stamp = {}, None
            return {}
        stamp = (st.st_mtime_ns, st.st_size)
        if stamp != self._users_stamp:
            try:
                self._users = load_admin_users(self.users_file)
            except PasswordFileError:
                self._users = {}  # the broker's start checked it; a broken edit locks out
            self._users_stamp = stamp
        return self._users

    # -- logging in ----------------------------------------------------------------------
    async def login(self, user: str, password: str, address: str) -> AdminSession | LoginRefused:
        source = login_source((address, 0)) if address else "-"
        now = self.clock()
        wait = max(self.backoff.wait(source, user, now), self.backoff.wait(source, "", now))
        if wait > 0:
            return LoginRefused(
                429,
                f"too many failed logins from {source}: try again in {wait:.0f} s",
                max(1, int(wait + 0.999)),
            )
        found = self.users().get(user)
        if self._dummy is None:
            self._dummy = await asyncio.to_thread(dummy_entry)
        async with self._hashing:
            ok = await asyncio.to_thread(check_password, found, password, self._dummy)
        if not ok or found is None:
            now = self.clock()
            self.backoff.failed(source, user, now)
            self.backoff.failed(source, "", now)
            return LoginRefused(401, "wrong user name or password")
        self.backoff.succeeded(source, user)
        return self._open(found.name, found.role, address)

    def issue_once(self) -> str:
        """A new one-time login token (the previous one stops working)."""
        self._once = secrets.token_urlsafe(32)
        return self._once

    def use_once(self, token: str, address: str) -> AdminSession | None:
        once = self._once
        if once is None or not hmac.compare_digest(once.encode(), token.encode()):
            return None
        self._once = None  # works once
        return self._open(LOCAL_USER, "operator", address)

    def _open(self, user: str, role: str, address: str) -> AdminSession:
        session = AdminSession(
            secrets.token_urlsafe(32),
            user,
            role,
            secrets.token_urlsafe(24),
            address,
            self.clock() + self.ttl,
        )
        self._sessions[session.token] = session
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)
        return session

    # -- requests ------------------------------------------------------------------------
    def session(self, token: str | None) -> AdminSession | None:
        """The live session of a cookie value, or None (expired, logged out, user removed)."""
        if not token:
            return None
        found = self._sessions.get(token)
        if found is None:
            return None
        if found.expires <= self.clock():
            del self._sessions[token]
            return None
        if found.user != LOCAL_USER:
            user = self.users().get(found.user)
            if user is None or user.role != found.role:
                del self._sessions[token]
                return None
        return found

    @staticmethod
    def csrf_ok(session: AdminSession, header: str | None) -> bool:
        return header is not None and hmac.compare_digest(session.csrf.encode(), header.encode())

    def logout(self, token: str) -> None:
        self._sessions.pop(token, None)

    def __len__(self) -> int:
        return len(self._sessions)
