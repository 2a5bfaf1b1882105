"""Soak (``pytest -m soak``, not in CI): connection churn with subscriptions, QoS 1 traffic,
wills and persistent sessions for a minute; the broker's memory must level off."""

from __future__ import annotations

import random
import time

import pytest
from broker_raw import RawClient, rss_kib

from edge_broker.mqtt.packets import (
    Disconnect,
    Properties,
    Puback,
    Publish,
    Will,
)


@pytest.mark.soak
def test_churn_memory_levels_off(broker_factory):
    b = broker_factory(
        {
            "broker": {"max_session_expiry": 2},
            "limits": {"connect_rate": 100000, "connect_burst": 100000},
        }
    )
    rng = random.Random(7)
    samples: list[int] = []
    deadline = time.monotonic() + 60
    round_no = 0
    while time.monotonic() < deadline:
        clients = []
        for i in range(50):
            c = RawClient(b.host, b.port, level=rng.choice([4, 5]))
            c.connect(
                f"soak-{round_no}-{i}",
                clean=rng.random() < 0.5,
                properties=Properties(session_expiry_interval=60) if c.level == 5 else Properties(),
                will=Will(f"soak/will/{i}", b"x") if i % 5 == 0 else None,
            )
            c.subscribe(f"soak/{i % 7}/#", 1)
            clients.append(c)
        for n, c in enumerate(clients):
            c.send(Publish(f"soak/{n % 7}/x", b"p" * 100, 1, packet_id=1))
        for c in clients:
            try:
                while not isinstance(c.recv(0.5), Puback):
                    pass
            except TimeoutError:
                pass
        for n, c in enumerate(clients):
            if n % 3:
                c.send(Disconnect())
            c.close()
        round_no += 1
        samples.append(rss_kib(b.pid))
    assert b.alive()
    first = max(samples[: len(samples) // 4])
    last = max(samples[-len(samples) // 4 :])
    assert last - first < 10_000, samples  # KiB: no steady growth
