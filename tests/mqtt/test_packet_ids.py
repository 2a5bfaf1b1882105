"""mqtt/packet_ids.py: the client sides' packet identifiers, round robin, never one in use."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edge_broker.mqtt.packet_ids import MAX_PACKET_ID, free_packet_id

PIDS = st.integers(1, MAX_PACKET_ID)


@given(PIDS, st.sets(PIDS, max_size=200))
def test_the_first_free_identifier_from_start_round_robin(start: int, in_use: set[int]) -> None:
    pid = free_packet_id(start, in_use)
    assert pid is not None and pid not in in_use
    skipped = (pid - start) % MAX_PACKET_ID  # how far past start, wrapping after 65535
    assert all((start - 1 + k) % MAX_PACKET_ID + 1 in in_use for k in range(skipped))


def test_wraps_after_65535_and_reports_exhaustion() -> None:
    assert free_packet_id(MAX_PACKET_ID, {MAX_PACKET_ID}) == 1
    assert free_packet_id(0, set()) == 1  # out of range: from 1
    assert free_packet_id(7, range(1, MAX_PACKET_ID + 1)) is None
