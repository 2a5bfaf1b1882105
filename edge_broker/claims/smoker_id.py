"""SMOKER client identifiers: RFC 4648 base32 of an Ed25519 public key (SMOKER.md "Identity").

A SMOKER ID is always 56 characters: 52 upper-case base32 digits and ``====``. Exactly one
spelling is accepted per key (the unused low bits of the last digit must be zero), so the
owner segment of a topic and a Client Identifier can be compared as strings.
"""

from __future__ import annotations

import base64
import binascii

from nacl.bindings import crypto_core_ed25519_is_valid_point
from nacl.signing import VerifyKey

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError

SMOKER_ID_LENGTH = 56
_ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
_PUBLIC_KEY_BYTES = 32


def smoker_id(verify_key: VerifyKey | bytes) -> str:
    """The SMOKER ID of a public key (a ``VerifyKey`` or its 32 raw bytes)."""
    raw = bytes(verify_key)
    if len(raw) != _PUBLIC_KEY_BYTES:
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"an Ed25519 public key has {_PUBLIC_KEY_BYTES} bytes, got {len(raw)}",
        )
    return base64.b32encode(raw).decode("ascii")


def parse_smoker_id(text: str) -> VerifyKey:
    """The Ed25519 public key named by ``text``; ``ClaimError`` (0x85) says why it is not one."""
    if len(text) != SMOKER_ID_LENGTH:
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"a SMOKER ID has {SMOKER_ID_LENGTH} characters (52 base32 digits and '===='), "
            f"got {len(text)}: {text[:80]!r}",
        )
    if not text.endswith("====") or not _ALPHABET.issuperset(text[:-4]):
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"a SMOKER ID is upper-case RFC 4648 base32 (A-Z, 2-7) ending in '====': {text!r}",
        )
    try:
        raw = base64.b32decode(text, casefold=False)
    except binascii.Error as exc:  # pragma: no cover - the alphabet check above excludes this
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID, f"not base32: {text!r} ({exc})"
        ) from exc
    if base64.b32encode(raw).decode("ascii") != text:
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"non-canonical SMOKER ID {text!r}: the unused bits of its last digit must be zero",
        )
    if not crypto_core_ed25519_is_valid_point(raw):
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"SMOKER ID {text!r} does not encode a valid Ed25519 public key",
        )
    return VerifyKey(raw)


def is_smoker_id(text: str) -> bool:
    """True when ``text`` is the SMOKER ID of some valid Ed25519 public key."""
    try:
        parse_smoker_id(text)
    except ClaimError:
        return False
    return True
