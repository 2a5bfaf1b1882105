"""Issue 34: what each limit costs per item when it is filled, measured as the RSS growth of a
real broker (``python -m edge_broker run``, persistence off, open tenant choice so tenants can
be made), with real MQTT 5 clients over loopback. ``edge-broker check`` multiplies these
per-item costs by the limits (edge_broker/ops/memory_budget.py); docs/limits-memory.md has the
figures.

Each step fills one structure to ``--count`` items, at the shallowest and at the deepest
longest topic the default limits allow (32 levels, 1,024 bytes):

- ``subscription``: one filter of a connected client (1,000 per connection, the default cap);
- ``retained``: one retained message with a ``--payload`` byte payload;
- ``tenant``: one open tenant's topic space kept alive by one retained message;
- ``claim``: one live SMOKER claim, signed by one of eight SMOKER clients and published to
  ``access/claim`` (PUBACK 0x00 once stored): the shortest (no permission) and the longest
  ``--claim-bytes`` allows (as many permissions as fit, each naming a client of its own);
- ``bridge``: one message in the outbound queue of a bridge whose uplink is down (nothing
  listens at its port), QoS 0 published to the bridged topics at a 16 B and a 1,000 B payload,
  in memory and durable (persistence on): bytes per message = overhead + factor × payload.

    .venv/bin/python scripts/bench_limits_memory.py [--count 4000] [--payload 100]
        [--only claim tenant bridge ...] [--claim-bytes 4096]

``--all-at-once`` fills every limit at once instead, with scaled-down limits (the fill of
tests/broker/test_limits_at_once.py, from five listeners' anonymous principals and open
tenants: deepest subscriptions, open tenants up to max_tenants, retained messages at the
deepest topics, offline queues, slow readers' write buffers, an unacknowledged in-flight
window, the read pool, connections up to max_connections each holding an unfinished packet,
claims up to the claims' byte pool, a bridge's backlog with its uplink down, one source's
sockets), and prints ``edge-broker check``'s worst case for those limits term by
term beside the RSS after each step and the peak:

    .venv/bin/python scripts/bench_limits_memory.py --all-at-once
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_brokers import ONE_SOURCE, start_edge  # noqa: E402
from bench_memory import settle  # noqa: E402
from nacl.signing import SigningKey  # noqa: E402
from procs import free_port  # noqa: E402

from edge_broker.claims.model import (  # noqa: E402
    Activity,
    Permission,
    Restriction,
    RestrictionType,
)
from edge_broker.claims.settings import ClaimsConfig  # noqa: E402
from edge_broker.claims.signature import sign_restriction  # noqa: E402
from edge_broker.claims.smoker_id import smoker_id  # noqa: E402
from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connack,
    Connect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)
from edge_broker.ops.memory_budget import (  # noqa: E402
    BRIDGE_DURABLE_BYTES,
    BRIDGE_MESSAGE_BYTES,
    BRIDGE_PAYLOAD_FACTOR,
    RETAINED_OVERHEAD,
    SUBSCRIPTION_BYTES,
    TENANT_BYTES,
    TEXT_COPIES,
    claim_bytes,
)

DEEP_LEVELS = 32
DEEP_LENGTH = 1024
PER_CONNECTION = 1000
MAX_CLAIM_BYTES = ClaimsConfig().max_claim_bytes


def deep_topic(i: int, salt: str) -> str:
    """A distinct 32-level topic of exactly 1,024 bytes (distinct from its first level on)."""
    head = f"{salt}{i:07d}"
    level = (DEEP_LENGTH - (DEEP_LEVELS - 1)) // DEEP_LEVELS
    levels = [head.ljust(level, "x")] + [f"L{j:02d}".ljust(level, "y") for j in range(1, 32)]
    text = "/".join(levels)
    return text + "z" * (DEEP_LENGTH - len(text))


def shallow_topic(i: int, salt: str) -> str:
    return f"{salt}{i}"


class Client:
    def __init__(self, port: int, client_id: str, properties: Properties | None = None) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending: list[object] = []
        self.sock.sendall(
            encode(Connect(5, client_id, True, 0, properties=properties or Properties()), 5)
        )
        ack = self.expect(Connack)
        assert ack.reason_code == 0, ack  # type: ignore[attr-defined]

    def expect(self, kind: type) -> object:
        while True:
            while self.pending:
                packet = self.pending.pop(0)
                if isinstance(packet, kind):
                    return packet
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("broker closed the connection")
            self.pending.extend(self.reader.feed(data))

    def ping(self) -> None:
        self.sock.sendall(encode(Pingreq(), 5))
        self.expect(Pingresp)


def fill_subscriptions(port: int, count: int, topic: Callable[[int, str], str]) -> list[Client]:
    clients = []
    for c in range(0, count, PER_CONNECTION):
        client = Client(port, f"subs-{topic.__name__}-{c}")
        n = min(PER_CONNECTION, count - c)
        for start in range(0, n, 50):
            subs = tuple(
                Subscription(topic(c + k, "s"), 0) for k in range(start, min(n, start + 50))
            )
            client.sock.sendall(encode(Subscribe(1 + start // 50, subs), 5))
            codes = client.expect(Suback).reason_codes  # type: ignore[attr-defined]
            assert all(code == 0 for code in codes), codes
        clients.append(client)
    return clients


def fill_retained(port: int, count: int, topic: Callable[[int, str], str], payload: int) -> None:
    """``count`` retained messages, 1,000 per client id (max_retained_per_client)."""
    body = b"p" * payload
    for c in range(0, count, PER_CONNECTION):
        client = Client(port, f"retain-{topic.__name__}-{c}")
        for i in range(c, min(count, c + PER_CONNECTION)):
            client.sock.sendall(
                encode(Publish(topic(i, "r"), body, 1, True, packet_id=1 + i - c), 5)
            )
            ack = client.expect(Puback)
            assert ack.reason_code in (0, 0x10), ack  # type: ignore[attr-defined]  # 0x10: no one
        client.ping()
        client.sock.close()


def fill_tenants(port: int, count: int, payload: int, topic: str = "k") -> None:
    """``count`` open tenants, each kept by one retained message on ``topic``."""
    for i in range(count):
        props = Properties(user_properties=(("tenant", f"t{i}"),))
        client = Client(port, f"tenant-{i}", props)
        client.sock.sendall(encode(Publish(topic, b"p" * payload, 1, True, packet_id=1), 5))
        client.expect(Puback)
        client.sock.close()


BRIDGE_TOPICS = "bridged"  # what the bench's bridge forwards (bridged/#)


def bridge_section(port: int, max_messages: int = 10_000_000, max_bytes: int = 1 << 40) -> str:
    """One bridge forwarding ``bridged/#`` at QoS 1 to ``port`` on loopback, where nothing
    listens: its uplink stays down and what it forwards waits in its outbound queue (bounds
    as given: by default more than any fill, so that the fill itself is measured)."""
    return (
        "[sys]\ninterval = 1.0\n"  # the queue depth in $SYS within a second
        f'[[bridges]]\nname = "cloud"\naddress = "127.0.0.1"\nport = {port}\n'
        f"reconnect_min = 30.0\nreconnect_max = 60.0\nqueue_max_messages = {max_messages}\n"
        f'queue_max_bytes = {max_bytes}\n[[bridges.topics]]\ndirection = "out"\n'
        f'local = "{BRIDGE_TOPICS}/#"\nqos = 1\n'
    )


def fill_bridge(port: int, count: int, payload: int, source: str = "") -> int:
    """``count`` QoS 0 messages of ``payload`` bytes published to the bridged topics, each a
    topic of its own (``bridged/<n>``); the broker has taken them all once a PINGREQ is
    answered. Returns how many the bridge's queue holds (``$SYS/broker/bridge/cloud/
    queue/messages``, refreshed every second: the first value of at least ``count``, or the
    last within 10 s)."""
    body = b"b" * payload
    client = Client(port, f"bridge-feeder{source}")
    for i in range(count):
        client.sock.sendall(encode(Publish(f"{BRIDGE_TOPICS}/{i}", body, 0), 5))
        if i % 1000 == 999:
            client.ping()
    client.ping()
    client.sock.sendall(
        encode(Subscribe(1, (Subscription("$SYS/broker/bridge/cloud/queue/messages", 0),)), 5)
    )
    client.expect(Suback)
    deadline = time.monotonic() + 10.0
    queued = 0
    while queued < count and time.monotonic() < deadline:
        queued = int(client.expect(Publish).payload)  # type: ignore[attr-defined]
    client.sock.close()
    return queued


def measure_bridge(count: int, durable: bool = False) -> tuple[float, float]:
    """A bridge's queued message, measured at two payload sizes: (overhead, payload factor)
    of bytes per message = overhead + factor × payload. ``durable``: with persistence on (the
    queue's log in the work directory, whose index of live records adds to each message)."""
    overhead_budget = BRIDGE_MESSAGE_BYTES + (BRIDGE_DURABLE_BYTES if durable else 0)
    how = "durable" if durable else "memory"
    sizes = (16, 1000)
    per: list[float] = []
    for size in sizes:

        def step(port: int, size: int = size) -> None:
            queued = fill_bridge(port, count, size)
            assert queued == count, f"the bridge queued {queued} of {count}"

        per.append(
            measure(
                f"bridge queue ({how}), {size:,} B",
                step,
                count,
                overhead_budget + BRIDGE_PAYLOAD_FACTOR * (size + len(f"{BRIDGE_TOPICS}/{count}")),
                bridge=True,
                durable=durable,
            )
        )
    factor = (per[1] - per[0]) / (sizes[1] - sizes[0])
    overhead = per[0] - factor * sizes[0]
    print(
        f"bridge queue ({how}): {overhead:,.0f} B + {factor:.2f} × payload per message, topic "
        f"included (budget: {overhead_budget} B + {BRIDGE_PAYLOAD_FACTOR} × (topic + payload))"
    )
    return overhead, factor


def measure(
    name: str,
    step: Callable[[int], object],
    count: int,
    budget: float,
    claims: int = 0,
    bridge: bool = False,
    durable: bool = False,
) -> float:
    """RSS growth per item of ``step``, printed beside what ``edge-broker check`` counts.
    ``claims`` (``max_claim_bytes``): a listener that accepts SMOKER clients, the claim store in
    the work directory. ``bridge``: a bridge whose uplink is down (:func:`bridge_section`);
    ``durable``: persistence on, its state in the work directory."""
    workdir = Path(tempfile.mkdtemp(prefix="bench-limits-memory-"))
    persistence = (
        f'[persistence]\nstate_dir = "{workdir}"\ndurability = "none"\n'
        if durable
        else "[persistence]\nenabled = false\n"
    )
    broker = start_edge(
        workdir,
        extra=persistence
        + (claims_section(workdir, claims) if claims else "")
        + (bridge_section(free_port()) if bridge else ""),
        # max_tenants lifted: --count tenants are measured (the default is 500)
        limits={
            "connect_rate": 100_000,
            "connect_burst": 100_000,
            "max_tenants": 10_000_000,
            **ONE_SOURCE,
        },
        module="edge_broker",
        # anonymous clients name their tenant
        listener='tenant_choice = "open"\n' + (CLAIMS_LISTENER if claims else ""),
    )
    kept = None
    try:
        before = settle(broker)
        kept = step(broker.port)
        after = settle(broker)
    finally:
        broker.stop()
    per_item = (after - before) * 1024 / count
    grown = (after - before) / 1024
    print(
        f"{name:<28} {count:>7,} items  +{grown:8.1f} MiB  {per_item:9,.0f} B each"
        f"  budget {budget:7,.0f} B ({budget / per_item - 1:+.0%})"
    )
    del kept
    return per_item


CLAIMS_LISTENER = 'auth_methods = ["smoker", "anonymous"]\n'
CLAIM_OWNERS = 8  # several SMOKER clients claim, each a share of the claims


def claims_section(workdir: Path, max_claim_bytes: int = MAX_CLAIM_BYTES) -> str:
    """``[claims]`` for a fill: the flood limits on time (rates, the store's write budget) and
    per client are lifted so that the fill takes seconds (the count limits too: ``--count``
    may be larger than the default ``max_claims_total``, and the bytes larger than the
    default ``max_claims_bytes``); ``max_claim_bytes`` as asked."""
    return (
        f'[claims]\nstore_dir = "{workdir}"\nfsync = "never"\nclient_rate = 1e6\n'
        "client_burst = 1e6\nstore_writes_per_second = 1e6\nstore_burst = 1e6\n"
        "max_claims_per_client = 10000000\nmax_claims_total = 10000000\n"
        f"max_claims_bytes = {1 << 40}\nmax_claim_bytes = {max_claim_bytes}\n"
    )


def owner_key(n: int) -> SigningKey:
    return SigningKey(n.to_bytes(4, "big") * 8)


def other_id(claim: int, k: int) -> str:
    """A SMOKER ID of its own for every permission (none shared: the index cannot intern it)."""
    return smoker_id(hashlib.sha256(f"{claim}/{k}".encode()).digest())


def shortest_claim(key: SigningKey, i: int) -> bytes:
    """A whitelist without permissions on a two-level rest: the least a claim can hold."""
    me = smoker_id(key.verify_key)
    restriction = Restriction(f"restricted/{me}/{i}", RestrictionType.WHITELIST)
    return sign_restriction(key, restriction).to_json().encode()


def longest_claim(key: SigningKey, i: int, limit: int = MAX_CLAIM_BYTES) -> bytes:
    """A claim of ``limit`` bytes at most (``claims.max_claim_bytes``) holding as many
    permissions as fit, each naming a client of its own: a permission costs more memory per
    byte of claim than topic text (a string and an object each)."""
    me = smoker_id(key.verify_key)
    topic = f"restricted/{me}/{i:07d}"

    def signed(n: int) -> bytes:
        perms = tuple(Permission(other_id(i, k), Activity.ALL) for k in range(n))
        restriction = Restriction(topic, RestrictionType.WHITELIST, perms)
        return sign_restriction(key, restriction).to_json().encode()

    # every claim has the same size for a given count (fixed-width names): search it once
    n = _PERMISSIONS_THAT_FIT.get(limit)
    if n is None:
        n = 0
        while len(signed(n + 1)) <= limit:
            n += 1
        _PERMISSIONS_THAT_FIT[limit] = n
    payload = signed(n)
    assert len(payload) <= limit, (len(payload), limit)
    return payload


_PERMISSIONS_THAT_FIT: dict[int, int] = {}


def fill_claims(port: int, count: int, make: Callable[[SigningKey, int], bytes]) -> None:
    """``count`` claims signed by ``CLAIM_OWNERS`` SMOKER clients, each through the broker
    (PUBLISH to ``access/claim``, PUBACK 0x00 once stored), 32 in flight per client."""
    from edge_broker.smoker_client import SmokerClient

    async def owner(n: int) -> None:
        key = owner_key(n)
        payloads = [make(key, i) for i in range(n, count, CLAIM_OWNERS)]
        gate = asyncio.Semaphore(32)
        async with SmokerClient("127.0.0.1", port, key, timeout=120) as client:

            async def claim(payload: bytes) -> None:
                async with gate:
                    ack = await client.claim_payload(payload)
                    assert ack.reason_code == 0, ack

            await asyncio.gather(*(claim(p) for p in payloads))

    async def run() -> None:
        await asyncio.gather(*(owner(n) for n in range(CLAIM_OWNERS)))

    asyncio.run(run())


# scaled so that no term is one the fill cannot reach: few connect-rate sources, small routing
# caches and audit aggregation (the clients make no denials)
ALL_AT_ONCE_EXTRA = {"max_connect_sources": 100, "routing_cache_bytes": 64 * 1024}
ALL_AT_ONCE_AUDIT = "[audit]\naggregate_max_keys = 10\n"


class _Running:
    """What the fill of tests/broker/test_limits_at_once.py reads of a broker."""

    def __init__(self, broker: Any, more_ports: list[int], smoker_port: int) -> None:
        self.host, self.port, self.pid = "127.0.0.1", broker.port, broker.process.pid
        self.ports = {"tcp": broker.port} | {f"tcp{n}": p for n, p in enumerate(more_ports, 1)}
        self.ports["smoker"] = smoker_port
        self._log = broker.workdir / "broker.log"

    def log(self) -> str:
        return self._log.read_text(errors="replace")


def all_at_once() -> int:
    """Every limit at once (scaled): check's worst case beside the measured peak RSS."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "broker"))
    from procs import PeakRss
    from test_limits_at_once import (
        CI_BRIDGE_QUEUE,
        CI_CLAIMS,
        CI_RETAINED_PAYLOAD,
        LISTENERS,
        SCALED,
        bridge_section,
        claims_section,
        fill_everything,
        listener,
        victim_served,
    )

    from edge_broker.config import loads_config
    from edge_broker.ops.memory_budget import memory_budget
    from tests.conftest import to_toml

    limits = {**SCALED, **ALL_AT_ONCE_EXTRA}
    workdir = Path(tempfile.mkdtemp(prefix="bench-limits-at-once-"))
    # claims from SMOKER clients (a listener of their own) up to the scaled byte pool, and a
    # bridge whose uplink is down holding a backlog up to its scaled queue bounds
    claims_bridge = to_toml(
        {"claims": claims_section(workdir, CI_CLAIMS), "bridges": [bridge_section(CI_BRIDGE_QUEUE)]}
    )
    extra = "[persistence]\nenabled = false\n" + ALL_AT_ONCE_AUDIT + claims_bridge
    # more listeners: the anonymous clients of each are a principal of their own (the fill
    # spreads over them to reach the totals past one principal's share)
    more_ports = [free_port() for _ in range(LISTENERS - 1)]
    smoker_port = free_port()
    listeners = "".join(
        f'[[listeners]]\nname = "tcp{n}"\nport = {port}\ntenant_choice = "open"\n'
        for n, port in enumerate(more_ports, 1)
    ) + (
        f'[[listeners]]\nname = "smoker"\nport = {smoker_port}\ntenant_choice = "open"\n'
        'auth_methods = ["smoker"]\n'
    )
    broker = start_edge(
        workdir,
        extra=extra + listeners,
        limits=limits,
        module="edge_broker",
        listener='tenant_choice = "open"\n',
    )
    try:
        b = _Running(broker, more_ports, smoker_port)
        early = listener(b)
        start = settle(broker)
        peak_rss = PeakRss(b.pid)
        peak_rss.start()
        steps: list[tuple[str, int]] = []
        kept = fill_everything(
            b,
            40,
            CI_RETAINED_PAYLOAD,
            CI_BRIDGE_QUEUE,
            lambda step: steps.append((step, broker.rss_kib())),
        )
        victim_served(b, early)
        peak = peak_rss.stop()
        for item in kept:
            item.close()
    finally:
        broker.stop()
    table = "".join(f"{k} = {v!r}\n" for k, v in limits.items())
    config = loads_config(
        f'[[listeners]]\nname = "t"\nport = 1883\ntenant_choice = "open"\n'
        f'[[listeners]]\nname = "s"\nport = 1884\nauth_methods = ["smoker"]\n'
        f"[limits]\n{table}{extra}"
    )
    terms = memory_budget(config)
    total = sum(t.bytes for t in terms)
    print("every limit at once, scaled limits:", ", ".join(f"{k}={v}" for k, v in limits.items()))
    for t in terms:
        print(f"  {t.name:<20} {t.bytes / 1024:9,.0f} KiB  {t.how}")
    print(f"  {'check worst case':<20} {total / 1024:9,.0f} KiB")
    last = start
    for step, rss in steps:
        print(f"  after {step:<45} {rss:9,} KiB (+{rss - last:,})")
        last = rss
    print(
        f"measured: {start:,} KiB after start, peak {peak:,} KiB (+{peak - start:,} KiB); "
        f"peak / worst case = {peak * 1024 / total:.0%}, "
        f"growth / (worst case - broker at start) = "
        f"{(peak - start) * 1024 / (total - terms[0].bytes):.0%}"
    )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--count", type=int, default=4000)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--all-at-once", action="store_true", help="fill every limit at once")
    ap.add_argument(
        "--claim-bytes",
        type=int,
        default=MAX_CLAIM_BYTES,
        help="[claims] max_claim_bytes: the size of the longest claims",
    )
    ap.add_argument(
        "--only", nargs="*", default=[], help="the items whose name contains one of these words"
    )
    args = ap.parse_args()
    if args.all_at_once:
        return all_at_once()
    n, p = args.count, args.payload
    print(f"RSS growth per item, default limits, persistence off (payload {p} B)")
    shallow, deep = len(shallow_topic(n, "s")), DEEP_LENGTH
    sub = SUBSCRIPTION_BYTES
    ret = RETAINED_OVERHEAD + p
    size = args.claim_bytes
    longest = len(longest_claim(owner_key(0), 0, size))
    items: list[tuple[str, Callable[[int], object], float, int]] = [
        (
            "subscription, shallow",
            lambda port: fill_subscriptions(port, n, shallow_topic),
            sub + TEXT_COPIES * shallow,
            0,
        ),
        (
            "subscription, 32 lv 1 KiB",
            lambda port: fill_subscriptions(port, n, deep_topic),
            sub + TEXT_COPIES * deep,
            0,
        ),
        (
            "retained, shallow",
            lambda port: fill_retained(port, n, shallow_topic, p),
            ret + TEXT_COPIES * shallow,
            0,
        ),
        (
            "retained, 32 lv 1 KiB",
            lambda port: fill_retained(port, n, deep_topic, p),
            ret + TEXT_COPIES * deep,
            0,
        ),
        (
            "tenant (1 retained message)",
            lambda port: fill_tenants(port, n, p),
            TENANT_BYTES + ret + TEXT_COPIES,
            0,
        ),
        (
            "tenant (1 retained, 32 lv)",
            lambda port: fill_tenants(port, n, p, deep_topic(0, "t")),
            TENANT_BYTES + ret + TEXT_COPIES * deep,
            0,
        ),
        (
            "claim, shortest",
            lambda port: fill_claims(port, n, shortest_claim),
            claim_bytes(len(shortest_claim(owner_key(0), 0))),
            size,
        ),
        (
            f"claim, {longest:,} B (limit {size:,})",
            lambda port: fill_claims(port, n, lambda key, i: longest_claim(key, i, size)),
            claim_bytes(longest),
            size,
        ),
    ]
    for name, step, budget, claims in items:
        if not args.only or any(word in name for word in args.only):
            measure(name, step, n, budget, claims)
    if not args.only or "bridge" in args.only:
        measure_bridge(n)
        measure_bridge(n, durable=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
