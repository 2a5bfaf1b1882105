"""The ``password`` authentication method (AUTHZ.md §1): username + password against the
argon2id password file (``edge_broker.auth.password``; managed with ``edge-broker passwd``).

It applies to a CONNECT with a username and a password, unless the listener also accepts the
``token`` method and the password looks like a JWT (that belongs to the token method). A wrong
password, an unknown user and a user without a password all answer CONNACK 0x86 (3.x: 0x04)
with the same Reason String, after the same argon2id work, so the answer tells nothing about
which users exist.

The tenant is the CONNECT user property ``tenant`` when the client names one (it must be one of
the entry's tenants when the entry lists any: else 0x87), otherwise the entry's tenant when it
names exactly one; an entry naming several needs the client to name one. An entry without
``tenants`` proves no tenant: its client gets ``~`` unless the listener has
``tenant_choice = "open"`` (auth/tenant_choice.py). The entry's roles select default permissions.

An entry with ``clientids`` (globs) binds the client identifier: any other is refused with
CONNACK 0x85 (3.x: 0x02) and a Reason String, checked after the password so that the answer
tells a stranger nothing; ``${clientid}`` in its permissions is then a verified identifier.

argon2id is deliberately slow (tens of ms here, more on a Pi) and allocates its memory cost
for each check: verification runs in a worker thread, bounded by ``[passwords]
max_concurrent`` checks and ``max_hash_memory`` bytes at once, with at most ``max_waiting``
clients waiting, ``max_waiting_per_source`` from one address (beyond: CONNACK 0x89 Server
busy), served by source in turn (auth/hash_slots.py). A client whose exact password was
verified before against the current entry skips the slow check (an in-memory keyed-hash cache,
auth/credential_cache.py; ``cache_entries``, 0 turns it off); after failed checks a (source,
user) pair waits ``failure_backoff`` seconds, doubling, before its next one (0x9F meanwhile,
auth/login_fairness.py).

The slots, the cache and the back-off are :class:`PasswordLogins`, kept by the broker across
reloads (issue 31 item 4): a reload re-reads the file and the limits, and a cached credential
whose entry hash did not change still skips the slow check (the digest covers the entry hash,
so a changed or removed entry can never match).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, MutableMapping
from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode
from .credential_cache import CredentialCache
from .hash_slots import HashSlots, SlotsFull, hash_memory_kib
from .login_fairness import FailureBackoff, login_source
from .method_api import TENANT_PROPERTY, Accepted, AuthOutcome, AuthRequest, Refused
from .password import PasswordEntry, hash_password, verify_password

if TYPE_CHECKING:
    from .settings import AuthSections, ListenerAuth, PasswordsConfig

_JWT_RE = re.compile(rb"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")
_BAD = "bad user name or password"


class PasswordLogins:
    """What the password method keeps across reloads: the hash slots (shared by every listener:
    the memory bound is the broker's), the credential cache and the failure back-off."""

    __slots__ = ("slots", "cache", "backoff")

    def __init__(self, passwords: PasswordsConfig) -> None:
        self.slots = HashSlots(
            passwords.max_concurrent,
            passwords.max_hash_memory // 1024,
            passwords.max_waiting,
            passwords.max_waiting_per_source,
        )
        self.cache = CredentialCache(passwords.cache_entries)
        self.backoff = FailureBackoff(
            passwords.failure_backoff, passwords.failure_backoff_max, passwords.backoff_entries
        )

    def configure(self, passwords: PasswordsConfig) -> None:
        """The limits of a reloaded config; what is cached and counted stays."""
        slots = self.slots
        slots.max_concurrent = passwords.max_concurrent
        slots.max_memory_kib = passwords.max_hash_memory // 1024
        slots.max_waiting = passwords.max_waiting
        slots.max_waiting_per_source = passwords.max_waiting_per_source
        self.cache.resize(passwords.cache_entries)
        self.backoff.configure(
            passwords.failure_backoff, passwords.failure_backoff_max, passwords.backoff_entries
        )


class PasswordAuthenticator:
    __slots__ = ("entries", "slots", "cache", "backoff", "_defer_jwt", "_dummy", "_clock")

    def __init__(
        self,
        entries: dict[str, PasswordEntry],
        logins: PasswordLogins,
        defer_jwt: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.entries = entries
        self.slots = logins.slots
        self.cache = logins.cache
        self.backoff = logins.backoff
        self._defer_jwt = defer_jwt
        self._clock = clock
        # unknown users are checked against this, so they cost the same time as known ones
        self._dummy = PasswordEntry("", hash_password("edge-broker-unknown-user"))

    @property
    def method(self) -> str:
        return "password"

    @property
    def enhanced_method(self) -> str | None:
        return None

    def applies(self, request: AuthRequest) -> bool:
        connect = request.connect
        if connect.properties.authentication_method is not None or connect.username is None:
            return False
        if connect.password is None:
            return True  # a username alone: refused here rather than passed to anonymous
        return not (self._defer_jwt and _JWT_RE.match(connect.password) is not None)

    async def authenticate(self, request: AuthRequest) -> AuthOutcome:
        connect = request.connect
        username = connect.username or ""
        entry = self.entries.get(username)
        password = connect.password or b""
        if entry is not None and password and self.cache.verified(username, password, entry.hash):
            ok = True
        else:
            source = login_source(request.info.remote_address)
            wait = self.backoff.wait(source, username, self._clock())
            if wait > 0:
                return Refused(
                    ReasonCode.CONNECTION_RATE_EXCEEDED,
                    f"failed logins for this user from this address: the next password check "
                    f"in {wait:.1f} s (passwords.failure_backoff)",
                    limit="passwords.failure_backoff",
                )
            try:
                ok = await self._verify(entry or self._dummy, password, entry is not None, source)
            except SlotsFull as full:
                whose = "from this address " if full.limit.endswith("per_source") else ""
                return Refused(
                    ReasonCode.SERVER_BUSY,
                    f"{full.waiting} logins {whose}are already waiting for a password check "
                    f"({full.limit}): connect again in a few seconds",
                    limit=full.limit,
                )
            if ok and entry is not None and password:
                self.cache.remember(username, password, entry.hash)
                self.backoff.succeeded(source, username)
            else:
                self.backoff.failed(source, username, self._clock())
        if entry is None or not ok or not password:
            return Refused(ReasonCode.BAD_USER_NAME_OR_PASSWORD, _BAD)
        if not entry.allows_client_id(connect.client_id):  # issue 15 item 8: bound client ids
            return Refused(
                ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
                f"user {username!r} may not use client id {connect.client_id!r} "
                f"(its password entry allows: {', '.join(entry.clientids)})",
            )
        asked = any(k == TENANT_PROPERTY for k, _ in connect.properties.user_properties)
        tenant = request.tenant
        if asked:
            if entry.tenants and tenant not in entry.tenants:
                return Refused(
                    ReasonCode.NOT_AUTHORIZED, f"user {username!r} may not use tenant {tenant!r}"
                )
        elif len(entry.tenants) == 1:
            tenant = entry.tenants[0]
        elif entry.tenants:
            # the entry names several tenants and the client picked none: "~" is not one of them
            return Refused(
                ReasonCode.NOT_AUTHORIZED,
                f"user {username!r} may use tenants {', '.join(entry.tenants)}: name one "
                f"in the CONNECT user property {TENANT_PROPERTY!r} (MQTT 5)",
            )
        return Accepted(
            request.identity_for(
                "password",
                tenant=tenant,
                username=username,
                roles=entry.roles,
                tenant_verified=bool(entry.tenants),
                client_id_verified=bool(entry.clientids),
            )
        )

    async def _verify(
        self, entry: PasswordEntry, password: bytes, known: bool, source: str
    ) -> bool:
        """The slow check in a worker thread, inside the slots (in ``source``'s turn); its
        slot and memory are released when the thread is done, even if the client left (and
        this task was cancelled) meanwhile, so the bounds hold for the work actually running."""
        weight = await self.slots.acquire(hash_memory_kib(entry.hash), source)
        if known and self.cache.verified(entry.username, password, entry.hash):
            # verified while we waited (devices sharing one user reconnecting together)
            self.slots.release(weight)
            return True
        work = asyncio.get_running_loop().run_in_executor(None, verify_password, entry, password)
        try:
            return await asyncio.shield(work)
        finally:
            if work.done():
                self.slots.release(weight)
            else:
                work.add_done_callback(lambda _: self.slots.release(weight))


def build(
    listener: ListenerAuth,
    config: AuthSections,
    kept: MutableMapping[str, object] | None = None,
) -> PasswordAuthenticator:
    """One authenticator per listener, rebuilt on reload; ``kept`` is where the broker keeps
    the :class:`PasswordLogins` from one build to the next (a new one without it)."""
    passwords = config.passwords
    if passwords.file is None:
        raise ValueError("the password method needs [passwords] file")
    logins = kept.get("password") if kept is not None else None
    if isinstance(logins, PasswordLogins):
        logins.configure(passwords)
    else:
        logins = PasswordLogins(passwords)
        if kept is not None:
            kept["password"] = logins
    return PasswordAuthenticator(
        dict(passwords.entries),  # as load_config read the file (settings.PasswordsConfig)
        logins,
        "token" in listener.auth_methods,
    )
