"""Tenant and channel names (PATTERNS.md "The separator" and §1, seed 001).

A *literal* is a non-empty token of ``[A-Za-z0-9_\\-~@]`` plus whichever of ``.``/``/`` is not
the separator. Tenants are not topics, so their alphabet does not depend on the separator:
1..128 bytes of ``[A-Za-z0-9_\\-~@.]``, an empty tenant becoming ``~`` (D14). A channel (a
concrete name that is published to) is 1..256 bytes of literal characters and the separator,
with no check on the number of tokens or on empty tokens (D11); with either separator both
``.`` and ``/`` may therefore appear (one separates, the other is part of a literal).
"""

from __future__ import annotations

import re
from typing import Final

from .errors import RuleError

DEFAULT_SEPARATOR: Final = "/"
SEPARATORS: Final = frozenset({".", "/"})
DEFAULT_TENANT: Final = "~"  # D14: an empty tenant becomes "~"
MAX_TENANT_BYTES: Final = 128
MAX_CHANNEL_BYTES: Final = 256

_TENANT_RE: Final = re.compile(r"[A-Za-z0-9_\-~@.]+")
_LITERAL_RE: Final = {
    ".": re.compile(r"[A-Za-z0-9_\-~@/]+"),
    "/": re.compile(r"[A-Za-z0-9_\-~@.]+"),
}
# Channels: literal characters plus the separator, i.e. the same set for both separators.
_CHANNEL_RE: Final = re.compile(r"[A-Za-z0-9_\-~@./]+")
_BAD_CHANNEL_CHAR: Final = re.compile(r"[^A-Za-z0-9_\-~@./]")
_BAD_TENANT_CHAR: Final = re.compile(r"[^A-Za-z0-9_\-~@.]")


def check_separator(separator: str) -> str:
    """Return ``separator`` if it is ``.`` or ``/``; otherwise raise :class:`ValueError`."""
    if separator not in SEPARATORS:
        raise ValueError(f"separator must be '.' or '/', not {separator!r}")
    return separator


def literal_regex(separator: str) -> re.Pattern[str]:
    """The compiled literal pattern for ``separator`` (for parsers' hot loops)."""
    return _LITERAL_RE[check_separator(separator)]


def is_literal(token: str, separator: str = DEFAULT_SEPARATOR) -> bool:
    """True when ``token`` is a literal for ``separator`` (PATTERNS.md "The separator")."""
    return _LITERAL_RE[check_separator(separator)].fullmatch(token) is not None


def literal_chars_hint(separator: str) -> str:
    """The literal alphabet for ``separator``, spelled for error messages."""
    other = "/" if check_separator(separator) == "." else "."
    return f"letters, digits, '_', '-', '~', '@' and '{other}'"


def normalize_tenant(tenant: str | None) -> str:
    """Validate a tenant and return its normal form: ``None`` or ``""`` becomes ``~`` (D14).

    Raises :class:`RuleError` naming the tenant and what to change.
    """
    if tenant is None or tenant == "":
        return DEFAULT_TENANT
    bad = _BAD_TENANT_CHAR.search(tenant)
    if bad is not None:
        raise RuleError(
            tenant,
            "",
            f"tenant contains {bad.group()!r}; use only letters, digits, '_', '-', '~', '@' and "
            "'.'",
        )
    size = len(tenant.encode("utf-8"))
    if size > MAX_TENANT_BYTES:
        raise RuleError(
            tenant, "", f"tenant is {size} bytes; at most {MAX_TENANT_BYTES} are allowed"
        )
    return tenant


def is_valid_tenant(tenant: str) -> bool:
    """True when ``tenant`` is a valid non-empty tenant name as written (no normalisation)."""
    return len(tenant) <= MAX_TENANT_BYTES and _TENANT_RE.fullmatch(tenant) is not None


def validate_channel(channel: str, separator: str = DEFAULT_SEPARATOR) -> str:
    """Validate a concrete channel (§1, D11) and return it unchanged.

    1..256 bytes of literal characters and the separator; wildcard characters are refused.
    Empty tokens and the number of tokens are not checked (D11).
    """
    check_separator(separator)
    if channel == "":
        raise RuleError(channel, "", "a channel must not be empty (1..256 bytes)")
    bad = _BAD_CHANNEL_CHAR.search(channel)
    if bad is not None:
        char = bad.group()
        what = "a wildcard, not allowed in a channel" if char in "*#>?+" else "not allowed"
        raise RuleError(
            channel,
            "",
            f"channel contains {char!r} ({what}); use only letters, digits, "
            "'_', '-', '~', '@', '.' and '/'",
        )
    size = len(channel.encode("utf-8"))
    if size > MAX_CHANNEL_BYTES:
        raise RuleError(
            channel, "", f"channel is {size} bytes; at most {MAX_CHANNEL_BYTES} are allowed"
        )
    return channel


def is_valid_channel(channel: str, separator: str = DEFAULT_SEPARATOR) -> bool:
    """True when :func:`validate_channel` would accept ``channel``."""
    check_separator(separator)
    return len(channel) <= MAX_CHANNEL_BYTES and _CHANNEL_RE.fullmatch(channel) is not None


SHOWN_CHARS = 64


def shown(text: str) -> str:
    """``text`` quoted for a log line, Reason String or cached decision, cut to its first
    :data:`SHOWN_CHARS` characters (issue 16): a refused 60 KB topic must not be copied into
    every message and cache entry about it."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}… ({len(text.encode())} bytes)"
