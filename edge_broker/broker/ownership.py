"""Who owns a session (issue 15; docs/sessions-and-authorization.md).

A session belongs to the principal that created it: the authentication method plus what that
method verified. Resuming or taking over a session is allowed to its owner only; for anyone
else ``[broker] foreign_session`` decides: ``"refuse"`` (default: CONNACK 0x87 / 3.x 0x05,
the owner's connection and session untouched) or ``"fresh"`` (the owner's session ends and the
newcomer starts an empty one, session present 0).

Client ids that credentials bind are reserved for them (issue 31 item 1, docs/sessions.md):
:class:`ClientIdBindings` knows the password file's ``clientids`` globs, and
:func:`reserved_for_others` refuses every other principal whatever ``foreign_session`` says.

This module is the one place the principal is derived; nothing else compares identities for
ownership.

A mismatch refuses only when the session's owner is :attr:`Principal.named`; otherwise the
newcomer always gets a fresh session (the old one ends, nothing of it is handed over).
Tokens without ``sub`` are one principal (``token`` "(no subject)"): nothing verified tells
their holders apart; each resume by one is judged again under its own grants
(``broker/rejudge.py``), so a narrower token gets nothing the wider one was sent for.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import translate
from functools import lru_cache
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..identity import Identity

UNKNOWN = "unknown"  # a session restored from a state written before owners were recorded


@dataclass(frozen=True, slots=True)
class Principal:
    """``method`` and the verified name: the user name (password), the token holder (token,
    ``Identity.token_subject``), the certificate CN (certificate), the SMOKER id (smoker), the
    listener name (anonymous: every anonymous client of one listener is one principal)."""

    method: str
    name: str

    @property
    def named(self) -> bool:
        """False only for the unknown owner of a session from an older state: a mismatch with
        it proves nobody else holds the session, so the newcomer gets a fresh one, not a
        refusal (nobody could ever resume it)."""
        return self.method != UNKNOWN

    def __str__(self) -> str:
        return f"{self.method} {self.name!r}"

    def to_record(self) -> list[str]:
        return [self.method, self.name]


def principal_of(identity: Identity, listener: str) -> Principal:
    """The principal of an authenticated ``identity`` accepted on listener ``listener``."""
    method = identity.method
    if method == "password" and identity.username is not None:
        return Principal(method, identity.username)
    if method == "token":
        subject = identity.token_subject
        return Principal(method, "(no subject)" if subject is None else "sub " + subject)
    if method == "certificate" and identity.cert_cn is not None:
        return Principal(method, identity.cert_cn)
    if method == "smoker" and identity.smoker_id is not None:
        return Principal(method, identity.smoker_id)
    # anonymous, or a method that verified no name (or a future one): its own principal per
    # listener, never one shared with a named principal
    return _listener_principal(method, listener)


@lru_cache(maxsize=64)
def _listener_principal(method: str, listener: str) -> Principal:
    """One object for every client of ``listener`` that ``method`` admitted without a name:
    a gateway's idle devices share it instead of holding one each (issue 32: memory)."""
    return Principal(method, "listener " + listener)


def principal_from_record(raw: object) -> Principal | None:
    """The owner stored with a session (:meth:`Principal.to_record`), or None when absent."""
    if (
        isinstance(raw, list)
        and len(raw) == 2
        and isinstance(raw[0], str)
        and isinstance(raw[1], str)
    ):
        return Principal(raw[0], raw[1])
    return None


def owner_of_restored(identity: Identity) -> Principal:
    """The owner of a session stored before owners were recorded (an older state file).

    Password, certificate and SMOKER identities were stored with the name their method had
    verified, so the owner is derived from them. A token session stored only the CONNECT user
    name (never verified) and an anonymous one no listener: their owner is :data:`UNKNOWN`,
    which nobody matches; such a session is ended, not resumed, by the next CONNECT for its
    client id (:func:`may_resume`), so nothing queued under it reaches anyone."""
    if identity.method in ("password", "certificate", "smoker"):
        derived = principal_of(identity, "")
        if derived.name != "listener ":
            return derived
    return Principal(UNKNOWN, identity.method)


class Owned(Protocol):
    """A session as ownership sees it (``Session`` is one): its client id and its owner."""

    @property
    def client_id(self) -> str: ...

    @property
    def owner(self) -> Principal | None: ...


def may_resume(session: Owned, principal: Principal) -> bool:
    """Whether ``principal`` may resume or take over ``session`` (its owner only)."""
    owner = session.owner
    return owner is not None and owner.method != UNKNOWN and owner == principal


def foreign_session_reason(client_id: str, principal: Principal) -> str:
    """The Reason String of every ownership refusal: the same whether another principal's
    credentials bind the id or its session holds it, and whether or not a session exists, so
    a refusal tells a prober nothing about which ids have sessions."""
    return (
        f"client id {client_id!r} is not available to {principal}: it is bound to another "
        "principal's credentials or held by another principal's session (session ownership)"
    )


# -- client ids that credentials bind (issue 31 item 1) ---------------------------------------


class BindingEntry(Protocol):
    """A password entry as the bindings read it (``auth.password.PasswordEntry`` is one)."""

    @property
    def clientids(self) -> tuple[str, ...]: ...

    @property
    def tenants(self) -> tuple[str, ...]: ...


_WILDCARDS = re.compile(r"[*?\[]")


class ClientIdBindings:
    """The client ids the password file binds (``clientids`` globs), compiled once per file.

    An id one of them names is reserved: only a principal whose credentials bind it may create,
    resume or take a session under it (``Identity.client_id_verified``: a matching password
    entry, a token whose ``client_id`` claim is the id, the SMOKER key of a SMOKER id). An entry
    that lists ``tenants`` reserves its ids in those tenants; one without, in every tenant.
    Token bindings are not known before their token is presented: a session a bound token made
    is reserved while it lasts (:func:`bound_session`), and SMOKER ids are refused to anyone
    but their key before this is reached (``auth/smoker.refuse_smoker_impostor``)."""

    __slots__ = ("_exact", "_globs")

    def __init__(self, entries: Mapping[str, BindingEntry]) -> None:
        self._exact: dict[str, list[tuple[str, ...]]] = {}
        # (literal prefix, compiled glob, tenants): the prefix rules most globs out cheaply
        self._globs: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = []
        for entry in entries.values():
            for glob in entry.clientids:
                wildcard = _WILDCARDS.search(glob)
                if wildcard is None:
                    self._exact.setdefault(glob, []).append(entry.tenants)
                else:
                    prefix = glob[: wildcard.start()]
                    self._globs.append((prefix, re.compile(translate(glob)), entry.tenants))

    def reserved(self, tenant: str, client_id: str) -> bool:
        """Whether a password entry binds ``client_id`` in ``tenant``."""
        for tenants in self._exact.get(client_id, ()):
            if not tenants or tenant in tenants:
                return True
        for prefix, pattern, tenants in self._globs:
            if (
                client_id.startswith(prefix)
                and (not tenants or tenant in tenants)
                and pattern.match(client_id)
            ):
                return True
        return False


class Bound(Owned, Protocol):
    """A session with the identity of its last connection (``Session`` is one)."""

    @property
    def identity(self) -> Identity | None: ...


def bound_session(session: Bound) -> bool:
    """Whether ``session`` was made by credentials that bind its client id."""
    identity = session.identity
    return identity is not None and identity.client_id_verified


def reserved_for_others(
    bindings: ClientIdBindings, identity: Identity, existing: Bound | None
) -> bool:
    """Whether ``identity`` (whose credentials do not bind its client id) is refused the id:
    a password entry binds it, or a live session that bound credentials made holds it."""
    if identity.client_id_verified:
        return False
    if bindings.reserved(identity.tenant, identity.client_id):
        return True
    return existing is not None and bound_session(existing)
