"""``[tokens]`` and ``[passwords]``: the sections of the ``token`` and ``password`` methods
(AUTHZ.md §1), their types and parsers, and what the methods read of a listener and of the
assembled configuration (``config.py`` assembles the sections; the methods import nothing of it).

Each parser records its problems on the :class:`~edge_broker.config_section.Section` (file, key
and what to write), like every other section.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

from ..config_section import Section

if TYPE_CHECKING:
    from .password import PasswordEntry  # imported by parse_passwords only with a file


class ListenerAuth(Protocol):
    """What the methods read of the listener a client came in on (``config.ListenerConfig``)."""

    @property
    def name(self) -> str: ...
    @property
    def auth_methods(self) -> tuple[str, ...]: ...
    @property
    def tenant_choice(self) -> str: ...


class TopicSeparator(Protocol):
    """``[topics]`` as the token method reads it: the separator of its grants' topics."""

    @property
    def separator(self) -> str: ...


@dataclass(frozen=True, slots=True)
class TokenKeyConfig:
    """One entry of ``[tokens] keys``: a PEM ``file``, or an HS256 secret (``secret`` or a
    ``file`` with ``alg = "HS256"``), bound to ``alg`` (inferred from a PEM key when absent)."""

    file: str | None = None
    secret: str | None = None
    kid: str | None = None
    alg: str | None = None


@dataclass(frozen=True, slots=True)
class TokensConfig:
    """``[tokens]``: keys and claim checks of the ``token`` method (AUTHZ.md §1, seed 000)."""

    keys: tuple[TokenKeyConfig, ...] = ()
    jwks: str | None = None  # a JWKS file (RFC 7517) with more keys
    leeway: float = 30.0  # seconds of clock skew allowed for exp / nbf
    audience: str | None = None  # when set, tokens must name it in aud
    issuer: str | None = None  # when set, tokens must carry this iss
    require_exp: bool = True
    require_client_id_binding: bool = False  # tokens must carry client_id = the Client Identifier


@dataclass(frozen=True, slots=True)
class PasswordsConfig:
    """``[passwords]``: the argon2id password file of the ``password`` method."""

    file: str | None = None
    # The file as parse_passwords read it, once per load: what was validated is what the broker
    # authenticates with and what a reload judges live connections by (a second read could see
    # another version of the file). Not compared: config equality is about settings.
    entries: Mapping[str, PasswordEntry] = field(default_factory=dict, compare=False, repr=False)
    max_concurrent: int = 2  # argon2id checks at once
    max_hash_memory: int = 64 * 1024 * 1024  # bytes all running checks may allocate (m= of each)
    max_waiting: int = 1000  # CONNECTs waiting for a check; beyond: CONNACK 0x89 Server busy
    # Issue 31 item 4 (auth/hash_slots.py, auth/login_fairness.py): logins fair between sources
    max_waiting_per_source: int = 100  # of those, from one address (IPv6: one /64)
    failure_backoff: float = 1.0  # s a (source, user) waits after a failed check, doubling
    failure_backoff_max: float = 60.0
    backoff_entries: int = 10_000  # (source, user) pairs remembered; oldest forgotten first
    cache_entries: int = 10_000  # verified credentials kept as keyed hashes (0: no cache)


class AuthSections(Protocol):
    """What the methods read of the assembled configuration (``config.Config`` is one): their
    own sections, and the topic separator the token method compiles grants with."""

    @property
    def tokens(self) -> TokensConfig: ...
    @property
    def passwords(self) -> PasswordsConfig: ...
    @property
    def topics(self) -> TopicSeparator: ...


def parse_tokens(s: Section) -> TokensConfig:
    """``[tokens]``; every key is loaded once here so that a bad key file is a config error."""
    d = TokensConfig()
    s.used.add("keys")
    raw = s.table.get("keys", [])
    keys: list[TokenKeyConfig] = []
    if not isinstance(raw, list) or not all(isinstance(t, dict) for t in raw):
        s.problem("keys", 'expected an array of tables: write [[tokens.keys]] with file = "..."')
        raw = []
    for i, table in enumerate(raw):
        ks = Section(s.file, s.key(f"keys[{i}]"), table, s.problems)
        key = TokenKeyConfig(
            ks.file_path("file"),
            ks.optional_string("secret"),
            ks.optional_string("kid"),
            ks.optional_string("alg"),
        )
        ks.finish()
        if (key.file is None) == (key.secret is None):
            ks.problem("file", 'give either file = "/path/key.pem" or secret = "..." (HS256)')
            continue
        from .token_keys import load_key  # only configs with tokens pay for crypto

        problem = load_key(key.file, key.secret, key.kid, key.alg)
        if isinstance(problem, str):
            ks.problem("file" if key.file is not None else "secret", problem)
        keys.append(key)
    jwks = s.file_path("jwks")
    if jwks is not None:
        from .token_keys import load_jwks_file

        loaded = load_jwks_file(jwks)
        if isinstance(loaded, str):
            s.problem("jwks", loaded)
    return TokensConfig(
        keys=tuple(keys),
        jwks=jwks,
        leeway=s.number("leeway", d.leeway, 0, 86400),
        audience=s.optional_string("audience"),
        issuer=s.optional_string("issuer"),
        require_exp=s.boolean("require_exp", d.require_exp),
        require_client_id_binding=s.boolean(
            "require_client_id_binding", d.require_client_id_binding
        ),
    )


def parse_passwords(s: Section) -> PasswordsConfig:
    file = s.file_path("file")
    entries: Mapping[str, PasswordEntry] = {}
    if file is not None:
        from .password import PasswordFileError, load_password_file

        try:
            entries = MappingProxyType(load_password_file(file))
        except PasswordFileError as exc:
            for problem in exc.problems:  # every bad line, each with its line number
                s.problem("file", problem)
    d = PasswordsConfig()
    backoff = s.number("failure_backoff", d.failure_backoff, 0, 3600)
    backoff_max = s.number("failure_backoff_max", d.failure_backoff_max, 0, 86400)
    if backoff_max < backoff:
        s.problem(
            "failure_backoff_max",
            f"{backoff_max:g} is below failure_backoff {backoff:g}: raise it (or lower "
            "failure_backoff; 0 turns the back-off off)",
        )
    return PasswordsConfig(
        file=file,
        entries=entries,
        max_concurrent=s.integer("max_concurrent", d.max_concurrent, 1, 64),
        max_hash_memory=s.integer("max_hash_memory", d.max_hash_memory, 1 << 20, 1 << 40),
        max_waiting=s.integer("max_waiting", d.max_waiting, 0, 1_000_000),
        max_waiting_per_source=s.integer(
            "max_waiting_per_source", d.max_waiting_per_source, 0, 1_000_000
        ),
        failure_backoff=backoff,
        failure_backoff_max=max(backoff, backoff_max),
        backoff_entries=s.integer("backoff_entries", d.backoff_entries, 0, 10_000_000),
        cache_entries=s.integer("cache_entries", d.cache_entries, 0, 10_000_000),
    )
