"""What a live claim is charged against ``[claims] max_claims_bytes``, the broker-wide byte pool
of live claims (issue 34 follow-up: a pool instead of "largest claim × largest count").

One rule, used when a claim is admitted, when the index changes and by ``edge-broker check``:
a claim is charged ``CLAIM_OVERHEAD + CLAIM_COPIES × its wire size``, the memory measured per
live claim through the broker (``scripts/bench_limits_memory.py --only claim``). The wire size is
that of the claim's canonical form (``Claim.to_json()``: the restriction, then the attached
signature in base64), a function of the canonical restriction's length alone, so the charge of a
claim read back from the store (which keeps only the signed text and the 64 signature bytes) is
the charge it was admitted with: a restart recharges the pool exactly.
"""

from __future__ import annotations

from typing import Any

from .model import SIGNATURE_BYTES, Claim

CLAIM_OVERHEAD = 1700  # one claim besides CLAIM_COPIES × its size: 2,202-2,214 B for the
# shortest (427 B), 7,899 B for one of 3,969 B naming 17 clients, 25,291 B for one of 16,220 B
# naming 67 (bench_limits_memory.py --only claim --claim-bytes 4096 / 16384)
CLAIM_COPIES = 1.6  # (7,899 - 2,214) B / (3,969 - 427) B more claim = 1.61 (1.46 at 16 KiB):
# the parsed permissions (a string and an object each) and the store's document (signed text)

_WIRE_FRAME = len('{"restriction":,"signature":""}')


def wire_bytes(restriction_bytes: int) -> int:
    """The length of ``Claim.to_json()`` for a canonical restriction of this many bytes."""
    return _WIRE_FRAME + restriction_bytes + 4 * ((SIGNATURE_BYTES + restriction_bytes + 2) // 3)


def charge_of_size(size: int) -> int:
    """The charge of a claim whose wire form has ``size`` bytes (``check``: ``max_claim_bytes``)."""
    return CLAIM_OVERHEAD + int(CLAIM_COPIES * size)


def claim_charge(claim: Claim) -> int:
    """What ``claim`` is charged against ``max_claims_bytes`` while it is live."""
    return charge_of_size(wire_bytes(len(claim.restriction.canonical_bytes())))


def document_charge(value: Any) -> int:
    """The charge of a stored document not verified yet (or compromised): that of the claim its
    signed text holds; ``CLAIM_OVERHEAD`` alone when it holds no text."""
    text = value.get("restriction") if isinstance(value, dict) else None
    if not isinstance(text, str):
        return CLAIM_OVERHEAD
    return charge_of_size(wire_bytes(len(text.encode("utf-8", "surrogatepass"))))
