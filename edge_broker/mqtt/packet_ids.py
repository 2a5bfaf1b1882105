"""Packet identifiers (MQTT 5 §2.2.1, 3.1.1 §2.3.1): 1..65535, one per unfinished flow.

The client sides (``bridge/link.py``, ``smoker_client.py``) and the broker's outgoing flow
(``engine/flow.py``) take theirs here, round robin, so that a new flow never reuses an
identifier still in flight and identifiers are not reused sooner than needed (a late
acknowledgement of an old flow cannot finish a new one).
"""

from __future__ import annotations

from collections.abc import Container

MAX_PACKET_ID = 65535


def free_packet_id(start: int, in_use: Container[int]) -> int | None:
    """The first identifier from ``start`` on (wrapping after 65535 to 1) that is not in
    ``in_use``; None when all 65,535 are. ``start`` outside 1..65535 starts at 1."""
    pid = start if 1 <= start <= MAX_PACKET_ID else 1
    for _ in range(MAX_PACKET_ID):
        if pid not in in_use:
            return pid
        pid = pid % MAX_PACKET_ID + 1
    return None
