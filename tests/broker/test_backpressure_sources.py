"""Issue 31 item 3 on the in-memory broker (exact: "nothing arrives" is not a wait): a retained
message sent at SUBSCRIBE into a full queue, under ``queue_overflow = "backpressure"``, holds
nobody; the next, unrelated publisher's packets are read at once (broker/delivery.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from edge_broker.mqtt.packets import Puback, Publish
from tests.broker.broker_raw import unique_id
from tests.broker.engine_harness import MemoryBroker, memory_broker

LIMITS = {
    "max_inflight": 1,
    "max_queued_messages": 2,
    "queue_overflow": "backpressure",
    "backpressure_timeout": 30,
}


@pytest.fixture
def mb() -> Iterator[MemoryBroker]:
    yield from memory_broker({"limits": LIMITS})


def test_retained_at_subscribe_into_a_full_queue_holds_no_publisher(mb: MemoryBroker) -> None:
    prefix = unique_id("r/")
    owner = mb.client()
    assert owner.connect(unique_id("retainer-")).reason_code == 0
    for i in range(6):
        owner.send(Publish(f"{prefix}/{i}", b"kept", 1, True, packet_id=i + 1))
        assert owner.expect(Puback).reason_code in (0, 0x10)  # 0x10: nobody subscribed yet
    stuck = mb.client()  # never acknowledges: 1 in flight, 2 queued, the rest beyond the limit
    assert stuck.connect(unique_id("stuck-")).reason_code == 0
    assert stuck.subscribe(f"{prefix}/#", 1).reason_codes == (1,)
    victim = mb.client()
    assert victim.connect(unique_id("victim-")).reason_code == 0
    topic = unique_id("elsewhere/")
    victim.send(Publish(topic, b"one", 1, packet_id=1))
    assert victim.expect(Puback).packet_id == 1
    victim.send(Publish(topic, b"two", 1, packet_id=2))  # read only if the first held nothing
    assert victim.expect(Puback).packet_id == 2
    assert mb.broker.stats.backpressure_holds == 0
    assert mb.broker.delivery.congested == []
