"""Each source's share of the open connections (issue 34 item 4).

One address that reopens sockets as fast as it can (600–1,100 a second, never sending CONNECT)
kept ``max_connections`` and the descriptors full: a legitimate client got in 1 time in 10. So
every open socket counts against its source (the address; IPv6 per /64, as for the connect rate
in ``pre_auth.py``) from accept to close, and a source holding ``limits.source_connection_share``
of the socket cap (``connection_cap``: ``max_connections`` + the slack before CONNECT, within
the descriptors) has its next socket closed at accept, before anything is read. The rest of the
cap stays open to every other source, so a victim's retry gets in at once.

The share never goes below :data:`MIN_SOURCE_CONNECTIONS` (a gateway with a small cap still lets
one host run a few clients) nor above the cap itself.
"""

from __future__ import annotations

MIN_SOURCE_CONNECTIONS = 16


class SourceShares:
    """Open sockets per source; :meth:`open` refuses one past the source's share."""

    __slots__ = ("_counts", "_source_of")

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._source_of: dict[int, str] = {}  # id(connection) -> its source, while counted

    @staticmethod
    def share(share: float, cap: int) -> int:
        """How many sockets one source may hold under a socket cap of ``cap``."""
        return min(cap, max(MIN_SOURCE_CONNECTIONS, int(cap * share)))

    def open(self, key: int, source: str, allowed: int) -> int | None:
        """Count socket ``key`` against ``source``; None when counted, else the number the
        source already holds (the socket must be closed, it is not counted)."""
        held = self._counts.get(source, 0)
        if held >= allowed:
            return held
        self._counts[source] = held + 1
        self._source_of[key] = source
        return None

    def close(self, key: int) -> None:
        """Socket ``key`` is gone (a key never counted is ignored)."""
        source = self._source_of.pop(key, None)
        if source is None:
            return
        held = self._counts[source] - 1
        if held:
            self._counts[source] = held
        else:
            del self._counts[source]

    def held(self, source: str) -> int:
        return self._counts.get(source, 0)

    def __len__(self) -> int:
        """Sources with an open socket."""
        return len(self._counts)
