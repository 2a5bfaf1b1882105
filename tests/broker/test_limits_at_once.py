"""Every limit reached at once stays inside the budget ``edge-broker check`` prints, and a
victim is still served (issue 34's proof). One real broker; real clients fill, from several
principals and tenants: subscriptions at the deepest, longest filters until SUBACK 0x97,
retained messages at the deepest topics and the largest payload until PUBACK 0x97, open tenants
each kept by a retained message, offline sessions' queues, and one source's open sockets up to
its share; then a client from another address connects and round-trips a QoS 1 message.

``test_limits_at_once_ci`` uses scaled-down limits (CI-sized) and asserts the RSS growth stays
under the budget's variable part (the budget without the broker at start).
``test_limits_at_once_soak`` (``-m soak``) uses the default limits and the unit's
``MemoryMax=200M``."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from broker_raw import RawClient, rss_kib

from edge_broker.config import loads_config
from edge_broker.mqtt.packets import (
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.ops.memory_budget import BASE_BYTES, memory_budget

OPEN = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}
SCALED = {
    "max_connections": 60,
    "connect_rate": 100_000,
    "connect_burst": 100_000,
    "max_subscriptions_total": 1500,
    "max_subscriptions_per_client": 500,
    "max_retained_messages": 600,
    "max_retained_bytes": 2 * 1024 * 1024,
    "max_retained_per_client": 200,
    "max_queued_bytes_total": 2 * 1024 * 1024,
}


def deep(i: int, salt: str) -> str:
    head = f"{salt}{i:07d}".ljust(31, "x")
    text = "/".join([head] + [f"L{j:02d}".ljust(31, "y") for j in range(1, 32)])
    return text + "z" * (1024 - len(text))


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


def budget_bytes(limits: dict[str, Any]) -> int:
    table = "".join(f"{k} = {v!r}\n" for k, v in limits.items())
    config = loads_config(
        '[[listeners]]\nname = "tcp"\nport = 1883\ntenant_choice = "open"\n[limits]\n' + table
    )
    return sum(term.bytes for term in memory_budget(config))


def fill_everything(b: Any, scale_clients: int, retained_payload: int) -> list[Any]:
    """Every limit to its maximum; returns what must stay open."""
    kept: list[Any] = []
    # subscriptions at the deepest, longest filters, from several principals, until the
    # broker-wide total answers 0x97 (a client's own cap moves on to the next client)
    i = 0
    while True:
        c = RawClient(b.host, b.port, timeout=60)
        c.connect(f"subs-{i}", properties=tenant(f"st{i % 3}"))
        kept.append(c)
        reason = ""
        for start in range(0, 1000, 50):
            subs = tuple(Subscription(deep(i * 1000 + start + k, "s"), 1) for k in range(50))
            c.send(Subscribe(1 + start, subs))
            ack = c.expect(Suback, timeout=60)
            if any(code != 1 for code in ack.reason_codes):
                reason = ack.properties.reason_string or ""
                break
        i += 1
        if "max_subscriptions_total" in reason:
            break
    # retained messages at the deepest topics with the largest payload, each client in its own
    # open tenant, until the broker-wide count or bytes answer 0x97
    i = 0
    while True:
        reason = ""
        with RawClient(b.host, b.port, timeout=60) as c:
            c.connect(f"ret-{i}", properties=tenant(f"rt{i}"))
            for k in range(1000):
                c.send(Publish(deep(k, f"r{i}"), b"p" * retained_payload, 1, True, packet_id=1 + k))
                ack = c.expect(Puback, timeout=60)
                if ack.reason_code == 0x97:
                    reason = ack.properties.reason_string or ""
                    break
        i += 1
        if reason and "max_retained_per_client" not in reason:
            break
    # offline sessions' queues: subscribed at QoS 1, gone, then fed until the total is full
    for s in range(4):
        c = RawClient(b.host, b.port, timeout=60)
        c.connect(f"offline-{s}", clean=False, properties=Properties(session_expiry_interval=3600))
        c.subscribe("queue/#", 1)
        c.close()
    with RawClient(b.host, b.port, timeout=60) as c:
        c.connect("feeder")
        for k in range(scale_clients * 8):
            c.send(Publish(f"queue/{k}", b"q" * 60_000, 1, packet_id=1 + k % 60_000))
            c.expect(Puback, timeout=60)
    # one source's sockets up to its share (never sending CONNECT)
    for _ in range(scale_clients):
        try:
            kept.append(socket.create_connection((b.host, b.port), timeout=10))
        except OSError:
            break
    return kept


class VictimClient(RawClient):
    """A client from another loopback address than everyone else (127.0.0.1)."""

    def __init__(self, host: str, port: int, source: str) -> None:
        super().__init__(host, port, timeout=30)
        self.sock.close()
        self.sock = socket.create_connection((host, port), timeout=30, source_address=(source, 0))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def listener(b: Any) -> VictimClient:
    """Subscribed before the limits fill (afterwards the subscription total is reached)."""
    c = VictimClient(b.host, b.port, "127.0.0.4")
    assert c.connect("listener").reason_code == 0
    assert c.subscribe("victim/t", 1).reason_codes == (1,)
    return c


def victim_served(b: Any, early: VictimClient) -> None:
    """A new client from another address connects and its QoS 1 message is delivered."""
    with VictimClient(b.host, b.port, "127.0.0.3") as c:
        assert c.connect("victim").reason_code == 0
        c.send(Publish("victim/t", b"hello", 1, packet_id=1))
        assert c.expect(Puback, timeout=30).reason_code == 0
    assert early.expect(Publish, timeout=30).payload == b"hello"
    early.close()


def test_limits_at_once_ci(broker_factory):
    b = broker_factory({"listeners": [OPEN], "limits": SCALED})
    early = listener(b)
    start = rss_kib(b.pid)
    kept = fill_everything(b, 40, 2048)
    peak = rss_kib(b.pid)
    victim_served(b, early)
    for item in kept:
        item.close()
    variable = budget_bytes(SCALED) - BASE_BYTES
    print(f"limits at once (CI): +{peak - start} KiB of a {variable // 1024} KiB budget")
    assert (peak - start) * 1024 < variable, (start, peak, variable)


@pytest.mark.soak
def test_limits_at_once_soak(broker_factory):
    b = broker_factory(
        {"listeners": [OPEN], "limits": {"connect_rate": 100_000, "connect_burst": 100_000}}
    )
    early = listener(b)
    kept = fill_everything(b, 400, 256 * 1024)
    peak = rss_kib(b.pid)
    victim_served(b, early)
    for item in kept:
        item.close()
    print(f"limits at once (soak): peak RSS {peak} KiB")
    assert peak < 200 * 1024, peak  # KiB: the unit's MemoryMax=200M
