"""The queued-bytes ledger (broker/limits/quotas.py) follows a session's queue message by
message as an online subscriber acknowledges (Delivery.drain moves one message per PUBACK
when its in-flight window is full, and must not leave the ledger charging what has left):
another session of the same principal is judged on what is really queued."""

from __future__ import annotations

from engine_harness import memory_broker
from test_quotas_memory import expected, held

from edge_broker.mqtt.packets import Puback, Publish


def test_each_puback_that_drains_one_message_releases_it_from_the_ledger() -> None:
    for mb in memory_broker({"limits": {"max_inflight": 1}}):
        sub = mb.client()
        sub.connect("sub")
        sub.subscribe("q/#", 1)
        pub = mb.client()
        pub.connect("pub")
        for i in range(5):
            pub.send(Publish(f"q/{i}", b"x" * 100, 1, packet_id=i + 1))
            pub.expect(Puback)
        session = next(s for s in mb.broker.sessions if s.client_id == "sub")
        assert len(session.queue) == 4  # one in flight, the rest wait
        assert held(mb.broker.quotas) == expected(mb.broker)
        for left in (3, 2, 1, 0):
            first = sub.expect(Publish)
            sub.send(Puback(first.packet_id))
            mb.settle()
            assert len(session.queue) == left
            assert held(mb.broker.quotas) == expected(mb.broker)
