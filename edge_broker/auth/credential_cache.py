"""Verified credentials, remembered in memory only as keyed hashes (issue 16, login storms).

A gateway reboot or a network outage makes every device reconnect at once. Each password
CONNECT costs one argon2id verification (tens of ms of CPU and megabytes of memory, more on a
Pi), so 1,000 devices would wait a minute. A client whose exact (username, password) was
verified against the current entry of the password file skips the slow hash on its next CONNECT.

What is kept: ``BLAKE2b(key, username ‖ password ‖ entry hash)`` with a 32-byte key drawn at
random per process and never written anywhere. Nothing reaches disk. A changed password
changes the entry hash, so an old digest can never match again; that is why the cache survives
a reload (issue 31 item 4): an entry whose hash did not change keeps its digests and its devices
stay warm. Only successes are remembered: a wrong password always pays the full argon2id cost
(within its source's share, auth/hash_slots.py), so the cache gives an online guesser nothing.
The trade-off (README, docs/limits-admission.md): whoever can read the broker's memory can
test guesses against the cached digests at BLAKE2b speed instead of argon2id speed; such an
attacker also sees every password as it arrives in CONNECT, so the cache mainly weakens the
protection of the password of a client that is not connecting right now.
"""

from __future__ import annotations

import hashlib
import secrets
from collections import OrderedDict

KEY_BYTES = 32
DIGEST_BYTES = 32


def _field(data: bytes) -> bytes:
    """Length-prefixed, so that ("ab", "c") and ("a", "bc") never hash alike."""
    return len(data).to_bytes(4, "big") + data


class CredentialCache:
    """At most ``max_entries`` digests, least recently used dropped first; 0 disables it."""

    __slots__ = ("max_entries", "_key", "_digests", "hits", "misses")

    def __init__(self, max_entries: int, key: bytes | None = None) -> None:
        self.max_entries = max_entries
        self._key = key if key is not None else secrets.token_bytes(KEY_BYTES)
        self._digests: OrderedDict[bytes, None] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def _digest(self, username: str, password: bytes, entry_hash: bytes) -> bytes:
        h = hashlib.blake2b(key=self._key, digest_size=DIGEST_BYTES, person=b"edge-broker-pw")
        h.update(_field(username.encode("utf-8")))
        h.update(_field(password))
        h.update(_field(entry_hash))
        return h.digest()

    def verified(self, username: str, password: bytes, entry_hash: bytes) -> bool:
        """Was exactly this password verified against exactly this entry hash before?"""
        if not self.max_entries:
            return False
        digest = self._digest(username, password, entry_hash)
        if digest in self._digests:
            self._digests.move_to_end(digest)
            self.hits += 1
            return True
        self.misses += 1
        return False

    def remember(self, username: str, password: bytes, entry_hash: bytes) -> None:
        """Call only after the slow hash verified ``password`` against ``entry_hash``."""
        if not self.max_entries:
            return
        self._digests[self._digest(username, password, entry_hash)] = None
        while len(self._digests) > self.max_entries:
            self._digests.popitem(last=False)

    def resize(self, max_entries: int) -> None:
        """A new bound (a reload): the least recently used digests go first; 0 empties it."""
        self.max_entries = max_entries
        while len(self._digests) > max_entries:
            self._digests.popitem(last=False)

    def __len__(self) -> int:
        return len(self._digests)
