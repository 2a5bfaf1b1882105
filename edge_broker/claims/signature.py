"""Signing and verifying claims with Ed25519 attached signatures (SMOKER.md "Claim payload").

The owner signs ``Restriction.canonical_bytes()`` with libsodium ``crypto_sign`` (attached:
64-byte signature + message). The broker verifies the first 64 bytes over the canonical bytes of
the *parsed* restriction with the key named by the topic's owner segment; that the attached
message equals those canonical bytes is checked when the claim is parsed (``parse.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..mqtt.reason_codes import ReasonCode
from .errors import ClaimError
from .model import SIGNATURE_BYTES, Claim, Restriction
from .smoker_id import check_smoker_id
from .topics import validate_claim_topic

if TYPE_CHECKING:  # PyNaCl is imported when the first claim is signed or verified
    from nacl.signing import SigningKey


def sign_restriction(signing_key: SigningKey, restriction: Restriction) -> Claim:
    """The claim an owner publishes: ``restriction`` with its attached signature."""
    signed = signing_key.sign(restriction.canonical_bytes())
    return Claim(restriction, signed.signature)


def verify_claim(claim: Claim) -> None:
    """Raise ``ClaimError`` 0x99 unless ``claim`` is intact and signed by its topic's owner."""
    owner = validate_claim_topic(claim.topic_name)
    signature = claim.signature
    if len(signature) != SIGNATURE_BYTES:
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"an Ed25519 signature has {SIGNATURE_BYTES} bytes, got {len(signature)}",
        )
    try:
        canonical = claim.restriction.canonical_bytes()
    except UnicodeEncodeError:
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            "the restriction contains a lone surrogate and has no UTF-8 form to sign",
        ) from None
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    try:
        # libsodium refuses non-canonical, non-point and small-order keys in verify itself
        VerifyKey(check_smoker_id(owner)).verify(canonical, signature)
    except (BadSignatureError, ValueError):
        raise ClaimError(
            ReasonCode.PAYLOAD_FORMAT_INVALID,
            f"the signature does not verify with the key of the topic's owner {owner}",
        ) from None
