"""Disk use stays bounded (issue 8): messages stored for a persistent session and deleted when
acknowledged leave dead records that compaction removes while the broker runs."""

from __future__ import annotations

from persist_support import EXPIRY, RawClient, drain, persistent_config, subscribe

from edge_broker.broker.persist.tables import BROKER_LOG
from edge_broker.mqtt.packets import Puback, Publish


def test_log_stays_bounded_under_steady_traffic(broker_factory, tmp_path):
    state = tmp_path / "state"
    b = broker_factory(persistent_config(state, durability="none", compact_min_bytes=65536))
    sub = RawClient(b.host, b.port)
    sub.connect("steady", clean=False, properties=EXPIRY)
    subscribe(sub, ("s/#", 1))
    pub = RawClient(b.host, b.port)
    pub.connect("spub")
    payload = b"p" * 1024
    total = 0
    for round_ in range(30):
        for i in range(50):
            pub.send(Publish(f"s/{i}", payload, 1, packet_id=i + 1))
        for _ in range(50):
            pub.expect(Puback)
        total += 50 * len(payload)
        assert len(drain(sub, 0.2)) == 50, f"round {round_}"
    size = (state / BROKER_LOG).stat().st_size
    assert total > 1_500_000
    assert size < 400_000, f"log of {size} bytes after {total} bytes of messages came and went"
    b.stop()
    sub2 = RawClient(*_restart(broker_factory, state))
    assert sub2.connect("steady", clean=False, properties=EXPIRY).session_present
    assert drain(sub2, 0.5) == []  # everything was acknowledged: nothing comes back


def _restart(broker_factory, state):
    b2 = broker_factory(persistent_config(state, durability="none"))
    return b2.host, b2.port
