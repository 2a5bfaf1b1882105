"""Every limit reached at once stays inside the budget ``edge-broker check`` prints, and a
victim is still served (issue 34's proof). One real broker; real clients fill, from several
principals and tenants: subscriptions at the deepest, longest filters until SUBACK 0x97,
retained messages at the deepest topics and the largest payload until PUBACK 0x97, open tenants
each kept by a retained message, offline sessions' queues, QoS 1 subscribers that neither read
nor acknowledge (full in-flight windows and write buffers), clients that each send most of a
largest packet and stop (the read pool), live SMOKER claims from several owners and tenants
until the claims' byte pool answers 0x97, a bridge's outbound backlog (its uplink down) until
its queue is full, and one source's open sockets up to its share; then a client from another
address connects and round-trips a QoS 1 message.

``test_limits_at_once_ci`` uses scaled-down limits (CI-sized) and asserts the RSS growth stays
under the budget's variable part (the budget without the broker at start).
``test_limits_at_once_soak`` (``-m soak``) uses the default limits and the unit's
``MemoryMax=200M``."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from broker_raw import RawClient, rss_kib
from nacl.signing import SigningKey

from edge_broker.config import loads_config
from edge_broker.config.bridges import QUEUE_MAX_BYTES, QUEUE_MAX_MESSAGES
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
from edge_broker.smoker_client import SmokerClient
from scripts.bench_limits_memory import longest_claim
from scripts.flood import publish_start, push
from scripts.procs import PeakRss, free_port
from tests.conftest import to_toml

LISTENERS = 5  # anonymous clients of a listener are one principal: five principals
OPEN = {"name": "tcp", "bind": "127.0.0.1", "port": 0, "tenant_choice": "open"}
SMOKER = {**OPEN, "name": "smoker", "auth_methods": ["smoker"]}  # the claims' owners
OPEN_LISTENERS = [OPEN] + [{**OPEN, "name": f"tcp{n}"} for n in range(1, LISTENERS)] + [SMOKER]
CLAIM_OWNERS = 8  # SMOKER clients over CLAIM_TENANTS tenants (each holds at most its share)
CLAIM_TENANTS = 4  # of the open tenants
BRIDGED = "bridged"  # the bridge forwards bridged/#
DEFAULT_BRIDGE_QUEUE = {
    "queue_max_messages": QUEUE_MAX_MESSAGES,
    "queue_max_bytes": QUEUE_MAX_BYTES,
}
SCALED = {
    # the default shares stay (one principal a quarter, one tenant half of each total): the
    # fill spreads over five principals (listeners) and several tenants to reach the totals
    "max_connections": 120,
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
    "max_tenants": 40,
    "decision_cache_bytes": 64 * 1024,  # the claims gate's cache (the fill makes few decisions)
}
# the claims' byte pool scaled down; rates lifted so that the fill takes seconds
CI_CLAIMS = {"max_claims_bytes": 1024 * 1024}
CI_BRIDGE_QUEUE = {"queue_max_messages": 2000, "queue_max_bytes": 1024 * 1024}


def claims_section(store_dir: Any, limits: dict[str, int]) -> dict[str, Any]:
    """``[claims]`` of the fill: the store in ``store_dir`` without fsync, the rates lifted
    (the fill takes seconds, not hours), the count and byte limits as given."""
    return {
        "store_dir": str(store_dir),
        "fsync": "never",
        "client_rate": 1e6,
        "client_burst": 1e6,
        "store_writes_per_second": 1e6,
        "store_burst": 1e6,
        **limits,
    }


def bridge_section(queue: dict[str, int]) -> dict[str, Any]:
    """One bridge forwarding ``bridged/#`` to a loopback port where nothing listens: its
    uplink stays down and what it forwards stays queued (``queue`` its bounds)."""
    return {
        "name": "cloud",
        "address": "127.0.0.1",
        "port": free_port(),
        "reconnect_min": 30.0,
        "reconnect_max": 60.0,
        **queue,
        "topics": [{"direction": "out", "local": f"{BRIDGED}/#", "qos": 1}],
    }


# a retained payload that, with 1 KiB topics, reaches max_retained_messages and 98 % of
# max_retained_bytes together (the budget's worst case: both at once, topics at their longest)
CI_RETAINED_PAYLOAD = 2400
# at the default limits 20,000 topics of 1 KiB are more than max_retained_bytes: the worst
# case is all topic, so the soak fills the bytes with the deepest topics and a small payload
SOAK_RETAINED_PAYLOAD = 16
OFFLINE_SESSIONS = 10  # 10 x max_queued_bytes (4 MiB) is more than max_queued_bytes_total
OPEN_TENANTS = "ot"  # the tenants the fill opens: ot0, ot1, ... up to max_tenants


def deep(i: int, salt: str) -> str:
    head = f"{salt}{i:07d}".ljust(31, "x")
    text = "/".join([head] + [f"L{j:02d}".ljust(31, "y") for j in range(1, 32)])
    return text + "z" * (1024 - len(text))


def tenant(name: str) -> Properties:
    return Properties(user_properties=(("tenant", name),))


def budget_bytes(limits: dict[str, Any], claims: dict[str, Any], bridge: dict[str, Any]) -> int:
    """``edge-broker check``'s worst case for the fill's configuration."""
    config = loads_config(
        to_toml(
            {
                "listeners": [{**OPEN, "port": 1883}, {**SMOKER, "port": 1884}],
                "limits": limits,
                "claims": claims,
                "bridges": [bridge],
            }
        )
    )
    return sum(term.bytes for term in memory_budget(config))


def total_reached(reason: str, key: str) -> bool:
    """A refusal for the broker-wide ``key`` itself, not for a principal's or tenant's share
    of it (whose Reason String names the total too) nor a client's own cap."""
    return f"limits.{key}" in reason and "_share" not in reason


class Principals:
    """Clients spread over the listeners (one principal each) and source addresses."""

    def __init__(self, b: Any) -> None:
        self.host = b.host
        ports = getattr(b, "ports", None) or {}
        # the anonymous listeners (the SMOKER one is the claims' owners')
        self.ports = [ports[name] for name in sorted(ports) if name.startswith("tcp")] or [b.port]
        self.n = 0

    def client(self, client_id: str, tenant_name: str, clean: bool = True, expiry: int = 0) -> Any:
        """A connected client of the next principal and address, and its CONNACK."""
        port = self.ports[self.n % len(self.ports)]
        source = f"127.0.1.{1 + self.n % 50}"  # 50 addresses: no source holds its share
        self.n += 1
        c = VictimClient(self.host, port, source)
        props = Properties(
            user_properties=(("tenant", tenant_name),), session_expiry_interval=expiry or None
        )
        return c, c.connect(client_id, clean=clean, properties=props)


def fill_everything(
    b: Any,
    scale_clients: int,
    retained_payload: int,
    bridge_queue: dict[str, int],
    mark: Callable[[str], None] = print,
) -> list[Any]:
    """Every limit to its maximum, from five principals and several tenants; returns what must
    stay open. ``bridge_queue``: the bridge's queue bounds (its backlog fills both). ``mark``
    is called with the name of each step once it is done (the benchmark measures RSS there)."""
    who = Principals(b)
    kept: list[Any] = slow_subscribers(b, scale_clients // 5)
    # offline sessions (several tenants and principals), subscribed at QoS 1 before the
    # subscription total is reached, then gone; fed after the retained messages
    queue_tenants = [f"qt{s % 3}" for s in range(OFFLINE_SESSIONS)]
    for s, name in enumerate(queue_tenants):
        c, ack = who.client(f"offline-{s}", name, clean=False, expiry=3600)
        assert ack.reason_code == 0, ack.properties.reason_string
        # its own messages: a shared payload counts once
        assert c.subscribe(f"queue/{s}/#", 1).reason_codes == (1,)
        c.close()
    # subscriptions at the deepest, longest filters until the broker-wide total answers 0x97
    # (a client's own cap or its principal's or tenant's share moves on to the next client)
    i = 0
    while True:
        c, ack = who.client(f"subs-{i}", f"st{i % 3}")
        assert ack.reason_code == 0, ack.properties.reason_string
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
        if total_reached(reason, "max_subscriptions_total"):
            break
    mark("subscriptions")
    # open tenants until max_tenants answers CONNACK 0x97, each kept by a retained message
    opened = 0
    while True:
        c, ack = who.client(f"tenant-{opened}", f"{OPEN_TENANTS}{opened}")
        with c:
            if ack.reason_code:
                assert "limits.max_tenants" in (ack.properties.reason_string or ""), ack
                break
            c.send(Publish("kept", b"t", 1, True, packet_id=1))
            assert c.expect(Puback, timeout=60).reason_code in (0, 0x10)  # 0x10: no subscriber
        opened += 1
    mark("tenant spaces")
    # retained messages at the deepest topics, spread over the open tenants, until the
    # broker-wide count or bytes answer 0x97
    i = 0
    while True:
        reason = ""
        c, ack = who.client(f"ret-{i}", f"{OPEN_TENANTS}{i % opened}")
        with c:
            assert ack.reason_code == 0, ack.properties.reason_string
            for k in range(1000):
                c.send(Publish(deep(k, f"r{i}"), b"p" * retained_payload, 1, True, packet_id=1 + k))
                ack = c.expect(Puback, timeout=60)
                if ack.reason_code == 0x97:
                    reason = ack.properties.reason_string or ""
                    break
        i += 1
        if total_reached(reason, "max_retained_messages") or total_reached(
            reason, "max_retained_bytes"
        ):
            break
    mark("retained messages")
    fill_claims(b)
    mark("claims")
    fill_bridge_backlog(b, bridge_queue)
    mark("bridge backlog")
    # the offline sessions' queues, fed by a publisher of their tenant until the total is full
    feeders = [who.client(f"feeder-{s}", name)[0] for s, name in enumerate(queue_tenants)]
    for k in range(scale_clients * 8):
        s = k % OFFLINE_SESSIONS
        feeders[s].send(Publish(f"queue/{s}/{k}", b"q" * 60_000, 1, packet_id=1 + k % 60_000))
        feeders[s].expect(Puback, timeout=60)
        if k % 50 == 49 and "limits.max_queued_bytes_total" in b.log():
            break
    for c in feeders:
        c.close()
    assert "limits.max_queued_bytes_total" in b.log()  # the total was reached
    mark("session queues")
    kept += fill_buffers(b, scale_clients // 8)
    mark("write buffers, in-flight window, read pool")
    # connections up to max_connections, each holding an unfinished packet of almost
    # read_buffer_size (8 KiB, the most a connection holds outside the read pool); then one
    # closes so that the victim can connect
    fillers = []
    while True:
        c, ack = who.client(f"conn-{len(fillers)}", f"{OPEN_TENANTS}{len(fillers) % opened}")
        if ack.reason_code:
            c.close()
            reason = ack.properties.reason_string or ""
            if total_reached(reason, "max_connections"):
                break
            continue  # that principal's share: the next one
        c.sock.sendall(publish_start("held", 8000, 7900))
        fillers.append(c)
    mark("connections")
    # room for the victim: one connection of its principal (the first listener's) closes
    first = next(c for c in fillers if c.sock.getpeername()[1] == b.port)
    fillers.remove(first)
    first.close()
    kept += fillers
    # one source's sockets up to its share (never sending CONNECT)
    for _ in range(scale_clients):
        try:
            kept.append(socket.create_connection((b.host, b.port), timeout=10))
        except OSError:
            break
    mark("sockets before CONNECT")
    return kept


def fill_claims(b: Any) -> int:
    """The longest claims ``max_claim_bytes`` allows, signed by ``CLAIM_OWNERS`` SMOKER
    clients over ``CLAIM_TENANTS`` tenants (one tenant holds at most its share), until the
    broker-wide byte pool or count answers 0x97. Returns the claims stored."""
    stored = 0
    full = asyncio.Event()

    async def owner(n: int) -> None:
        nonlocal stored
        key = SigningKey(n.to_bytes(4, "big") * 8)
        tenant_name = f"{OPEN_TENANTS}{n % CLAIM_TENANTS}"  # opened before: max_tenants reached
        async with SmokerClient(b.host, b.ports["smoker"], key, tenant=tenant_name) as client:
            i = n
            while not full.is_set():
                ack = await client.claim_payload(longest_claim(key, i))
                if ack.reason_code:
                    reason = ack.reason_string or ""
                    assert ack.reason_code == 0x97, (ack.reason_code, reason)
                    if "claims.max_claims_bytes is" in reason or "its maximum of" in reason:
                        full.set()
                    return  # the pool, or this tenant's share of it, is full
                stored += 1
                i += CLAIM_OWNERS

    async def run() -> None:
        await asyncio.gather(*(owner(n) for n in range(CLAIM_OWNERS)))

    asyncio.run(run())
    assert full.is_set(), f"{stored} claims stored, the pool never answered 0x97"
    return stored


def fill_bridge_backlog(b: Any, queue: dict[str, int]) -> None:
    """QoS 0 messages to the bridged topics until the bridge's queue (its uplink down) logs
    that it is full; their size reaches ``queue_max_bytes`` and ``queue_max_messages``
    together (each message counts topic + payload + 48 bytes)."""
    messages, size = queue["queue_max_messages"], queue["queue_max_bytes"]
    topic = f"{BRIDGED}/{messages:07d}"
    payload = b"b" * (size // messages - 48 - len(topic))
    with VictimClient(b.host, b.port, "127.0.0.8") as c:
        assert c.connect("bridge-feeder").reason_code == 0
        for k in range(messages * 2):
            c.send(Publish(f"{BRIDGED}/{k:07d}", payload, 0))
            if k % 200 == 199:
                c.send(Pingreq())
                c.expect(Pingresp, timeout=60)
                if k >= messages and "bridge cloud: outbound queue full" in b.log():
                    break
    assert "bridge cloud: outbound queue full" in b.log()


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


def victim_served(b: Any, early: VictimClient, within: float = 30.0) -> int:
    """A new client from another address connects and its QoS 1 message is delivered. With
    every socket slot taken it may be closed at accept (the sockets without CONNECT make room
    only once they are a few seconds old): like a real client it retries, and must be in
    within ``within`` seconds (the connect timeout and the eviction age are shorter). Returns
    the attempts it took."""
    deadline = time.monotonic() + within
    attempts = 0
    while True:
        attempts += 1
        c = VictimClient(b.host, b.port, "127.0.0.3")
        try:
            ack = c.connect("victim")
        except (OSError, EOFError, TimeoutError):
            c.close()
            assert time.monotonic() < deadline, f"victim not in after {attempts} attempts"
            time.sleep(0.5)
            continue
        break
    with c:
        assert ack.reason_code == 0, ack.properties.reason_string
        c.send(Publish("victim/t", b"hello", 1, packet_id=1))
        assert c.expect(Puback, timeout=30).reason_code == 0
    assert early.expect(Publish, timeout=30).payload == b"hello"
    early.close()
    return attempts


def test_limits_at_once_ci(broker_factory, tmp_path):
    claims = claims_section(tmp_path, CI_CLAIMS)
    bridge = bridge_section(CI_BRIDGE_QUEUE)
    b = broker_factory(
        {"listeners": OPEN_LISTENERS, "limits": SCALED, "claims": claims, "bridges": [bridge]}
    )
    early = listener(b)
    start = rss_kib(b.pid)
    peak_rss = PeakRss(b.pid)
    peak_rss.start()
    kept = fill_everything(b, 40, CI_RETAINED_PAYLOAD, CI_BRIDGE_QUEUE)
    victim_served(b, early)
    peak = peak_rss.stop()
    # the slow subscribers filled the write buffers' total (held back, counted)
    assert "deliveries held back" in b.log()
    for item in kept:
        item.close()
    variable = budget_bytes(SCALED, claims, bridge) - BASE_BYTES
    print(f"limits at once (CI): +{peak - start} KiB of a {variable // 1024} KiB budget")
    assert (peak - start) * 1024 < variable, (start, peak, variable)


@pytest.mark.soak
def test_limits_at_once_soak(broker_factory, tmp_path):
    b = broker_factory(
        {
            "listeners": OPEN_LISTENERS,
            "limits": {"connect_rate": 100_000, "connect_burst": 100_000},
            "claims": claims_section(tmp_path, {}),  # the default max_claims_bytes
            "bridges": [bridge_section({})],  # the default queue bounds
        }
    )
    early = listener(b)
    start = rss_kib(b.pid)
    peak_rss = PeakRss(b.pid)
    peak_rss.start()
    marks: list[str] = []

    def mark(step: str) -> None:
        marks.append(f"{step}: {rss_kib(b.pid):,} KiB")

    kept = fill_everything(b, 400, SOAK_RETAINED_PAYLOAD, DEFAULT_BRIDGE_QUEUE, mark)
    began = time.monotonic()
    attempts = victim_served(b, early)
    waited = time.monotonic() - began
    peak = peak_rss.stop()
    for item in kept:
        item.close()
    print(f"limits at once (soak): start {start:,} KiB; " + "; ".join(marks))
    print(f"limits at once (soak): victim in after {attempts} attempt(s), {waited:.1f} s")
    print(f"limits at once (soak): peak RSS {peak:,} KiB")
    assert peak < 200 * 1024, peak  # KiB: the unit's MemoryMax=200M
