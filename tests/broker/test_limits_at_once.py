"""Every limit reached at once stays inside the budget ``edge-broker check`` prints, and a
victim is still served (issue 34's proof). One real broker; real clients fill, from several
principals and tenants: subscriptions at the deepest, longest filters until SUBACK 0x97,
retained messages at the deepest topics and the largest payload until PUBACK 0x97, open tenants
each kept by a retained message, offline sessions' queues, QoS 1 subscribers that neither read
nor acknowledge (full in-flight windows and write buffers), clients that each send most of a
largest packet and stop (the read pool), and one source's open sockets up to its share; then a
client from another address connects and round-trips a QoS 1 message.

``test_limits_at_once_ci`` uses scaled-down limits (CI-sized) and asserts the RSS growth stays
under the budget's variable part (the budget without the broker at start).
``test_limits_at_once_soak`` (``-m soak``) uses the default limits and the unit's
``MemoryMax=200M``."""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

import pytest
from broker_raw import RawClient, rss_kib

from edge_broker.config import loads_config
from edge_broker.mqtt.packets import (
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.ops.memory_budget import BASE_BYTES, memory_budget
from scripts.flood import publish_start, push
from scripts.procs import PeakRss

OPEN = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}
SCALED = {
    "max_connections": 120,
    # every client here is the one anonymous principal: its share (0.25 by default) would stop
    # the fill at a quarter of each total (the shares are tested in tests/broker/test_quotas.py)
    "principal_share": 1.0,
    "tenant_share": 1.0,
    "connect_rate": 100_000,
    "connect_burst": 100_000,
    "max_subscriptions_total": 1500,
    "max_subscriptions_per_client": 500,
    "max_retained_messages": 600,
    "max_retained_bytes": 2 * 1024 * 1024,
    "max_retained_per_client": 200,
    "max_queued_bytes_total": 2 * 1024 * 1024,
    "max_write_buffer_total": 1024 * 1024,
    "read_pool_size": 2 * 1024 * 1024,
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


def fill_everything(
    b: Any, scale_clients: int, retained_payload: int, mark: Callable[[str], None] = print
) -> list[Any]:
    """Every limit to its maximum; returns what must stay open. ``mark`` is called with the
    name of each step once it is done (the benchmark measures RSS there)."""
    kept: list[Any] = slow_subscribers(b, scale_clients // 5)
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
    mark("subscriptions")
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
    mark("retained messages and tenant spaces")
    # offline sessions' queues: subscribed at QoS 1, gone, then fed until the total is full
    for s in range(4):
        c = RawClient(b.host, b.port, timeout=60)
        c.connect(f"offline-{s}", clean=False, properties=Properties(session_expiry_interval=3600))
        c.subscribe(f"queue/{s}/#", 1)  # its own messages: a shared payload counts once
        c.close()
    with RawClient(b.host, b.port, timeout=60) as c:
        c.connect("feeder")
        for k in range(scale_clients * 8):
            c.send(Publish(f"queue/{k % 4}/{k}", b"q" * 60_000, 1, packet_id=1 + k % 60_000))
            c.expect(Puback, timeout=60)
    mark("session queues")
    kept += fill_buffers(b, scale_clients // 8)
    mark("write buffers, in-flight window, read pool")
    # one source's sockets up to its share (never sending CONNECT)
    for _ in range(scale_clients):
        try:
            kept.append(socket.create_connection((b.host, b.port), timeout=10))
        except OSError:
            break
    mark("connections")
    return kept


def slow_subscribers(b: Any, slow: int) -> list[Any]:
    """Subscribers with 4 KiB receive buffers that will never read (subscribed before the
    subscription total is reached), one of them at QoS 1 that never acknowledges."""
    kept: list[Any] = []
    for i in range(slow):
        c = VictimClient(b.host, b.port, "127.0.0.5", rcvbuf=4096)
        c.connect(f"slow-{i}")
        assert c.subscribe("slow/#", 1 if i == 0 else 0).reason_codes[0] < 0x80
        kept.append(c)
    return kept


def fill_buffers(b: Any, big: int) -> list[Any]:
    """32 KB QoS 0 messages to the slow subscribers until the write buffers' total holds them
    back (logged), the QoS 1 one's in-flight window full and the rest queued; then clients
    that each send 900 KB of a 1 MiB PUBLISH and stop, more than the read pool holds. Each
    group from its own address (the per-source share). Returns the clients to keep open."""
    with VictimClient(b.host, b.port, "127.0.0.6") as c:
        c.connect("slow-feeder")
        for k in range(4000):
            c.send(Publish(f"slow/{k}", b"w" * 32_000, 0))
            if k % 20 == 19:
                c.send(Pingreq())
                c.expect(Pingresp, timeout=60)
                if "deliveries held back" in b.log():
                    break
    big_clients = []
    for i in range(big):
        c = VictimClient(b.host, b.port, "127.0.0.7")
        c.connect(f"big-{i}")
        big_clients.append(c)
    push([(c.sock, publish_start(f"big/{i}", 1024 * 1024, 900_000)) for c in big_clients], 2.0)
    return big_clients


class VictimClient(RawClient):
    """A client from another loopback address than everyone else (127.0.0.1)."""

    def __init__(self, host: str, port: int, source: str, rcvbuf: int = 0) -> None:
        super().__init__(host, port, timeout=30)
        self.sock.close()
        self.sock = socket.socket()
        if rcvbuf:  # what it does not read stays in the broker, not in the kernel
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(30)
        self.sock.bind((source, 0))
        self.sock.connect((host, port))
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
        ack = c.connect("victim")
        assert ack.reason_code == 0, ack.properties.reason_string
        c.send(Publish("victim/t", b"hello", 1, packet_id=1))
        assert c.expect(Puback, timeout=30).reason_code == 0
    assert early.expect(Publish, timeout=30).payload == b"hello"
    early.close()


def test_limits_at_once_ci(broker_factory):
    b = broker_factory({"listeners": [OPEN], "limits": SCALED})
    early = listener(b)
    start = rss_kib(b.pid)
    peak_rss = PeakRss(b.pid)
    peak_rss.start()
    kept = fill_everything(b, 40, 2048)
    victim_served(b, early)
    peak = peak_rss.stop()
    # the slow subscribers filled the write buffers' total (held back, counted)
    assert "deliveries held back" in b.log()
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
