"""The per-message path with ``durability = "none"`` (issue 17): QoS 1 publishes into a
persistent session are stored one record per event-loop turn (not one or two per message) and
create no asyncio task. Counts, not timings (CPU per message: scripts/bench_persistence.py)."""

from __future__ import annotations

import asyncio

from persist_support import EXPIRY, RawClient, persistent_config, subscribe

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Puback, Publish


def test_qos1_publishes_into_a_persistent_session_append_per_turn_without_tasks(
    inprocess_broker_factory, tmp_path
):
    b = inprocess_broker_factory(persistent_config(tmp_path / "state", "none"))
    sub = RawClient(b.host, b.port)
    sub.connect("hot-sub", clean=False, properties=EXPIRY)
    subscribe(sub, ("hot/#", 1))
    sub.close()  # offline: every message is stored for it
    pub = RawClient(b.host, b.port)
    pub.connect("hot-pub")
    created = [0]
    names: list[str] = []

    def counting(loop, coro, **kwargs):
        name = getattr(coro, "__qualname__", repr(coro))
        if not name.startswith("InProcessBroker.call"):  # this test's own calls
            created[0] += 1
            names.append(name)
        return asyncio.Task(coro, loop=loop, **kwargs)

    def appends() -> int:
        return b.broker.persistence.keyed.stats().appends

    b.call(lambda: b.loop.set_task_factory(counting))
    before = b.call(appends)
    n = 200
    pub.sock.sendall(
        b"".join(encode(Publish(f"hot/{i}", b"x" * 32, 1, packet_id=i + 1), 5) for i in range(n))
    )
    acks = [pub.expect(Puback) for _ in range(n)]
    assert all(a.reason_code == 0 for a in acks)
    written = b.call(appends) - before
    b.call(lambda: b.loop.set_task_factory(None))
    assert created[0] == 0, f"{created[0]} tasks created for {n} publishes, e.g. {names[:6]}"
    assert 1 <= written <= n // 4, f"{written} appends for {n} publishes"
    stored = b.call(lambda: b.broker.persistence.keyed.count("ref"))
    assert stored == n
