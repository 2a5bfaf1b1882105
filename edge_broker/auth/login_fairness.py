"""Logins are fair between sources (issue 31 item 4): what a source is, and the back-off of a
(source, user) pair after failed password checks.

A *source* is the client's address: an IPv4 address, or the /64 network of an IPv6 address
(one host is routinely given a whole /64, so single IPv6 addresses cost an attacker nothing);
an IPv4-mapped IPv6 address is its IPv4 address. Connections without an address (a Unix socket,
a test transport) share the source ``"local"``.

Back-off: failed checks of a password (wrong password, unknown user or no password: they are
one failure, so the back-off tells nothing about which users exist) are counted per (source,
user). The first ``FREE_FAILURES`` cost nothing (a typo, a retry, a device tried with an old
password once); from the next one the pair must wait before its next slow check: ``base``,
doubling with each further failure, up to ``max``. A CONNECT inside that time is answered at
once with 0x9F and the seconds left, without an argon2id check; a success forgets the pair.
Credentials already verified (the credential cache) are not held back: a device whose password
is right is never refused by failures somebody else caused from its address. The table is
bounded (``max_entries``, least recently failed forgotten first): memory stays fixed whatever
number of users or sources an attacker cycles through.
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from dataclasses import dataclass

LOCAL_SOURCE = "local"
FREE_FAILURES = 3  # failures of one (source, user) before the back-off starts


def login_source(address: tuple[str, int] | tuple[str, int, int, int] | None) -> str:
    """The source a connection from ``address`` counts against (module docstring)."""
    if not address:
        return LOCAL_SOURCE
    host = address[0]
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host or LOCAL_SOURCE
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


@dataclass(frozen=True, slots=True)
class _Failures:
    count: int
    until: float  # monotonic seconds: no slow check for the pair before this


class FailureBackoff:
    """Failed password checks per (source, user), bounded (module docstring)."""

    __slots__ = ("base", "max_delay", "max_entries", "_pairs")

    def __init__(self, base: float, max_delay: float, max_entries: int) -> None:
        self.base = base
        self.max_delay = max_delay
        self.max_entries = max_entries
        self._pairs: OrderedDict[tuple[str, str], _Failures] = OrderedDict()

    def configure(self, base: float, max_delay: float, max_entries: int) -> None:
        self.base, self.max_delay, self.max_entries = base, max_delay, max_entries
        self._trim()

    def wait(self, source: str, user: str, now: float) -> float:
        """Seconds the pair must still wait before a slow check (0: go ahead)."""
        found = self._pairs.get((source, user))
        if found is None or found.until <= now:
            return 0.0
        return found.until - now

    def failed(self, source: str, user: str, now: float) -> float:
        """Count a failure; returns the back-off it starts (0 for the free ones)."""
        if self.max_entries <= 0 or self.base <= 0:
            return 0.0
        key = (source, user)
        previous = self._pairs.pop(key, None)
        # a pair quiet for longer than the longest back-off starts again from the first step
        fresh = previous is None or now - previous.until > max(self.max_delay, self.base)
        count = 1 if fresh or previous is None else previous.count + 1
        steps = count - FREE_FAILURES
        delay = 0.0 if steps <= 0 else min(self.max_delay, self.base * 2.0 ** min(steps - 1, 30))
        self._pairs[key] = _Failures(count, now + delay)
        self._trim()
        return delay

    def succeeded(self, source: str, user: str) -> None:
        self._pairs.pop((source, user), None)

    def _trim(self) -> None:
        while len(self._pairs) > max(self.max_entries, 0):
            self._pairs.popitem(last=False)

    def __len__(self) -> int:
        return len(self._pairs)
