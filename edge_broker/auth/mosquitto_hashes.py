"""Password hashes of Mosquitto's ``mosquitto_passwd`` (issue 20: migrating a gateway keeps every
device's password; docs/operations.md "From Mosquitto").

Mosquitto 2 writes ``$7$<iterations>$<salt>$<hash>``: PBKDF2-HMAC-SHA512 (default 101 iterations),
a 12-byte salt and a 64-byte hash, both standard base64. Mosquitto 1.6 and ``-H sha512`` write
``$6$<salt>$<hash>``: one SHA-512 over ``password + salt`` (not crypt(3)'s SHA-512). Both are
verified as they are, with a constant-time comparison. Neither is as strong as argon2id against
an offline attack on a stolen file (``$6$`` especially); ``edge-broker passwd add`` re-keys a
user to argon2id whenever convenient.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from dataclasses import dataclass

PREFIXES = ("$6$", "$7$")
MAX_ITERATIONS = 10_000_000  # a file asking for more would stall the broker's worker threads


@dataclass(frozen=True, slots=True)
class MosquittoHash:
    """A parsed hash: ``iterations`` 0 for ``$6$`` (one SHA-512 round)."""

    iterations: int
    salt: bytes
    digest: bytes


def is_mosquitto_hash(text: str | bytes) -> bool:
    head = text[:3] if isinstance(text, str) else text[:3].decode("ascii", "replace")
    return head in PREFIXES


def parse_mosquitto_hash(text: str) -> MosquittoHash | str:
    """The hash, or a message saying what is wrong with it."""
    fields = text.split("$")
    try:
        if text.startswith("$6$") and len(fields) == 4:
            return MosquittoHash(
                0,
                base64.b64decode(fields[2], validate=True),
                base64.b64decode(fields[3], validate=True),
            )
        if text.startswith("$7$") and len(fields) == 5:
            iterations = int(fields[2])
            if not 1 <= iterations <= MAX_ITERATIONS:
                return f"$7$ iteration count {iterations} is out of range 1..{MAX_ITERATIONS}"
            return MosquittoHash(
                iterations,
                base64.b64decode(fields[3], validate=True),
                base64.b64decode(fields[4], validate=True),
            )
    except (binascii.Error, ValueError):
        return "a Mosquitto hash with bad base64 or iteration count"
    return "not a Mosquitto hash ($6$salt$hash or $7$iterations$salt$hash)"


def verify_mosquitto(text: str, password: bytes) -> bool:
    parsed = parse_mosquitto_hash(text)
    if isinstance(parsed, str) or not parsed.digest:
        return False
    if parsed.iterations == 0:
        computed = hashlib.sha512(password + parsed.salt).digest()
    else:
        computed = hashlib.pbkdf2_hmac(
            "sha512", password, parsed.salt, parsed.iterations, len(parsed.digest)
        )
    return hmac.compare_digest(computed, parsed.digest)


def hash_problem(text: str) -> str | None:
    """None for a usable Mosquitto hash; else what the password file line should hold."""
    if not is_mosquitto_hash(text):
        return (
            "the hash is not an argon2id hash (it must start with '$argon2id$') nor a "
            "mosquitto_passwd one ($6$ or $7$)"
        )
    parsed = parse_mosquitto_hash(text)
    return parsed if isinstance(parsed, str) else None
