"""``[persistence] durability`` (issue 8): with ``sync`` every acknowledged QoS 1 publish that
was stored had its fsync before the PUBACK; ``interval`` and ``none`` acknowledge without one;
publishes that touch no stored state cost no write at all."""

from __future__ import annotations

import pytest
from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.mqtt.packets import Puback, Publish


def _run(inprocess_broker_factory, tmp_path, durability: str, n: int = 20) -> tuple[int, int]:
    b = inprocess_broker_factory(
        persistent_config(tmp_path / "state", durability, interval_ms=60_000)
    )
    sub = RawClient(b.host, b.port)
    sub.connect("dsub", clean=False, properties=EXPIRY)
    subscribe(sub, ("d/#", 1))
    sub.close()
    pub = RawClient(b.host, b.port)
    pub.connect("dpub")

    def fsyncs() -> int:
        return int(b.call(lambda: b.broker.persistence.keyed.stats().fsyncs))

    before = fsyncs()
    for i in range(n):  # one at a time: each PUBACK must wait for its own commit
        pub.send(Publish(f"d/{i}", b"x", 1, packet_id=i + 1))
        assert pub.expect(Puback).reason_code == 0
    stored = fsyncs() - before
    before = fsyncs()
    for i in range(n):  # nobody subscribed: nothing to store
        pub.send(Publish(f"none/{i}", b"x", 1, packet_id=i + 1))
        pub.expect(Puback)
    return stored, fsyncs() - before


def test_sync_fsyncs_before_every_acknowledgement(inprocess_broker_factory, tmp_path):
    stored, unrelated = _run(inprocess_broker_factory, tmp_path, "sync")
    assert stored >= 20
    assert unrelated == 0


@pytest.mark.parametrize("durability", ["interval", "none"])
def test_interval_and_none_acknowledge_without_fsync(
    inprocess_broker_factory, tmp_path, durability
):
    stored, unrelated = _run(inprocess_broker_factory, tmp_path, durability)
    assert stored <= 1 and unrelated == 0
