"""SMOKER client identifiers: RFC 4648 base32 of an Ed25519 public key (SMOKER.md "Identity").

A SMOKER ID is always 56 characters: 52 upper-case base32 digits and ``====``. Exactly one
spelling is accepted per key (the unused low bits of the last digit must be zero), so the
owner segment of a topic and a Client Identifier can be compared as strings.

``is_smoker_id``/``check_smoker_id`` check the spelling (about a microsecond; used for every
permission and topic). ``parse_smoker_id`` also checks that the bytes are a valid Ed25519 point
outside the small-order subgroup (libsodium ``crypto_core_ed25519_is_valid_point``, ~50 µs),
which enhanced authentication uses to answer 0x85.
"""

from __future__ import annotations

import base64
import re
from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError, shown

if TYPE_CHECKING:  # PyNaCl is imported when a SMOKER id is first parsed (issue 32: fresh RSS)
    from nacl.signing import VerifyKey

SMOKER_ID_LENGTH = 56
_SPELLING = re.compile(r"[A-Z2-7]{52}====")
_LAST_DIGITS = "AQ"
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


def check_smoker_id(text: str) -> bytes:
    """The 32 key bytes ``text`` spells; ``ClaimError`` (0x85) unless it is a canonical ID.

    Checks the spelling only (56 characters, upper-case base32, ``====``, zero padding bits):
    cheap enough for every permission of every claim. Whether the bytes are a usable Ed25519
    point is checked by ``parse_smoker_id`` and, for signatures, by libsodium itself.
    """
    if len(text) != SMOKER_ID_LENGTH:
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"a SMOKER ID has {SMOKER_ID_LENGTH} characters (52 base32 digits and '===='), "
            f"got {len(text)}: {text[:80]!r}",
        )
    if not _SPELLING.fullmatch(text):
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"a SMOKER ID is upper-case RFC 4648 base32 (A-Z, 2-7) ending in '====': {shown(text)}",
        )
    if text[51] not in _LAST_DIGITS:
        # 256 bits fill 51 digits and 1 bit of the 52nd: its 4 low bits must be zero
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"non-canonical SMOKER ID {shown(text)}: its 52nd digit must be A or Q",
        )
    return base64.b32decode(text)


def parse_smoker_id(text: str) -> VerifyKey:
    """The Ed25519 public key named by ``text``; ``ClaimError`` (0x85) says why it is not one."""
    from nacl.bindings import crypto_core_ed25519_is_valid_point
    from nacl.signing import VerifyKey

    raw = check_smoker_id(text)
    if not crypto_core_ed25519_is_valid_point(raw):
        raise ClaimError(
            ReasonCode.CLIENT_IDENTIFIER_NOT_VALID,
            f"SMOKER ID {shown(text)} does not encode a valid Ed25519 public key",
        )
    return VerifyKey(raw)


def is_smoker_id(text: str) -> bool:
    """True when ``text`` is spelt as a SMOKER ID (SMOKER.md "Identity", ``check_smoker_id``)."""
    return (
        len(text) == SMOKER_ID_LENGTH
        and bool(_SPELLING.fullmatch(text))
        and (text[51] in _LAST_DIGITS)
    )
