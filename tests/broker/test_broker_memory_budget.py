"""Issue 16: the memory budget test. Every in-session attack of the issue against ONE broker
with default limits; its RSS (sampled every 50 ms) must stay under a stated bound, and a
well-behaved client must keep round-tripping QoS 1 messages throughout.

``test_memory_budget_ci`` is CI-sized (about 30 s). ``test_memory_budget_soak``
(``pytest -m soak``) runs the attacks at the issue's full size, twice, with 1,000 clients
holding 10,000 subscriptions and 10,000 retained messages, and asserts the unit's
``MemoryMax=200M``. Figures: docs/limits-memory.md."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from broker_raw import RawClient, rss_kib, unique_id
from test_broker_memory_limits import raw_publish
from test_broker_socket_buffers import MIB, SlowReader, publish_start, push

from edge_broker.mqtt.packets import (
    Connack,
    Connect,
    Disconnect,
    Pingreq,
    Pingresp,
    Properties,
    Puback,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)

# the shares (docs/limits-quotas.md) off: one anonymous attacker fills the broker-wide totals,
# the worst case the budget is about
CONFIG = {
    "limits": {
        "connect_rate": 100_000,
        "connect_burst": 100_000,
        "tenant_share": 1.0,
        "principal_share": 1.0,
    }
}


@dataclass
class Watch:
    """RSS sampling and a well-behaved client's QoS 1 round trips, in background threads."""

    b: object
    peak: int = 0
    trips: int = 0
    failures: list[str] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._sample, daemon=True).start()
        threading.Thread(target=self._roundtrip, daemon=True).start()

    def _sample(self) -> None:
        while not self.stop.wait(0.05):
            self.peak = max(self.peak, rss_kib(self.b.pid))

    def _roundtrip(self) -> None:
        topic = f"good/{unique_id()}"
        with RawClient(self.b.host, self.b.port) as c:
            c.connect(unique_id("good"), keep_alive=0)
            c.subscribe(topic, 1)
            n = 0
            while not self.stop.wait(0.2):
                n += 1
                c.send(Publish(topic, str(n).encode(), 1, packet_id=n % 60000 + 1))
                deadline = time.monotonic() + 10
                got = False
                while time.monotonic() < deadline and not got:
                    try:
                        packet = c.recv(0.5)
                    except TimeoutError:
                        continue
                    if isinstance(packet, Publish) and packet.payload == str(n).encode():
                        c.send(Puback(packet.packet_id))
                        got = True
                if got:
                    self.trips += 1
                else:
                    self.failures.append(f"round trip {n} not back within 10 s")


def deep_filters(b) -> None:
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("deep"))
        for i in range(10):
            c.send(Subscribe(i + 1, (Subscription("/" * 65_000 + str(i), 0),)))
            c.expect(Suback, timeout=30)


def property_blocks(b, n: int) -> None:
    block = b"\x26\x00\x00\x00\x00" * 200_000
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("props"))
        for i in range(n):
            distinct = b"\x26\x00\x04" + f"{i:04d}".encode() + b"\x00\x00"
            c.send_raw(raw_publish(f"props/{i}", distinct + block, b"x"))
        c.send(Pingreq())
        c.expect(Pingresp, timeout=120)


def long_topics(b, n: int) -> None:
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("long"))
        filler = "x" * 60_000
        for i in range(n):
            c.send(Publish(f"secret/{i}/{filler}", b"p", 1, packet_id=i % 60000 + 1))
            c.recv(30)  # PUBACK 0x90


def retained_flood(b, big: int, small: int) -> None:
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("ret"))
        for i in range(big):
            c.send(Publish(f"big/{unique_id()}/{i}", b"m" * 1_000_000, 0, True))
        for i in range(small):
            c.send(Publish(f"small/{i}", b"s" * 1000, 0, True))
        c.send(Pingreq())
        c.expect(Pingresp, timeout=120)


def tenant_churn(b, n: int) -> None:
    for i in range(n):
        with RawClient(b.host, b.port) as c:
            c.connect(f"t{i}", properties=Properties(user_properties=(("tenant", f"t{i}x"),)))
            c.send(Disconnect())


def overload_burst(b, n: int) -> None:
    """A QoS 1 burst to an online subscriber that does not acknowledge (drop policy)."""
    with RawClient(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
        sub.connect(unique_id("slow"))
        sub.subscribe("burst/t", 1)
        pub.connect(unique_id("burst"))
        chunk = b"".join(
            raw_publish("burst/t", b"", b"y" * 100, 1, i % 60000 + 1) for i in range(1000)
        )
        for _ in range(n // 1000):
            pub.send_raw(chunk)
        pub.send(Pingreq())
        deadline = time.monotonic() + 120
        while not isinstance(pub.recv(max(0.1, deadline - time.monotonic())), Pingresp):
            pass


def unfinished_packets(b, n: int) -> None:
    """``n`` connected clients each send 900 KB of a 1 MiB PUBLISH and stop (the read pool)."""
    clients = [RawClient(b.host, b.port, timeout=30) for _ in range(n)]
    try:
        for c in clients:
            c.connect(unique_id("unf"), keep_alive=0)
        push([(c.sock, publish_start(f"unf/{unique_id()}", MIB, 900_000)) for c in clients], 2.0)
    finally:
        for c in clients:
            c.close()


def slow_readers(b, n: int, seconds: float) -> None:
    """``n`` subscribers that never read, on a topic of 32 KB messages (max_write_buffer_total)."""
    readers = []
    try:
        for _ in range(n):
            r = SlowReader(b.host, b.port)
            r.connect(unique_id("nr"), keep_alive=0)
            r.subscribe("busy/nr", 0)
            readers.append(r)
        with RawClient(b.host, b.port) as pub:
            pub.connect(unique_id("busy"))
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                pub.send(Publish("busy/nr", b"b" * 32_000, 0))
            pub.send(Pingreq())
            while not isinstance(pub.recv(60), Pingresp):
                pass
    finally:
        for r in readers:
            r.close()


def population(b, clients: int, subs: int, retained: int) -> list[RawClient]:
    """``clients`` connected clients with ``subs`` subscriptions and ``retained`` retained
    messages between them (kept open by the caller)."""
    out = []
    per = subs // clients
    for i in range(clients):
        c = RawClient(b.host, b.port, timeout=30)
        c.send(Connect(5, f"pop-{i}", True, 0))
        out.append(c)
    for c in out:
        c.expect(Connack, timeout=30)
    for i, c in enumerate(out):
        c.send(Subscribe(1, tuple(Subscription(f"site/{i}/dev/{k}/+", 1) for k in range(per))))
    for c in out:
        c.expect(Suback, timeout=30)
    for i in range(retained):
        out[i % clients].send(Publish(f"site/{i % clients}/state/{i}", b"r" * 100, 0, True))
    for c in out[:retained]:
        c.send(Pingreq())
        c.expect(Pingresp, timeout=60)
    return out


def run_attacks(b, scale: float) -> None:
    deep_filters(b)
    property_blocks(b, max(1, int(16 * scale)))
    long_topics(b, int(4000 * scale))
    retained_flood(b, int(200 * scale), int(20_000 * scale))
    tenant_churn(b, int(3000 * scale))
    overload_burst(b, max(1000, int(20_000 * scale)))
    unfinished_packets(b, int(200 * scale))
    slow_readers(b, int(300 * scale), 4.0 * scale)


def test_memory_budget_ci(broker_factory):
    b = broker_factory(CONFIG)
    watch = Watch(b)
    watch.start()
    try:
        run_attacks(b, 0.25)
        time.sleep(1.0)
    finally:
        watch.stop.set()
    print(f"memory budget CI run: peak RSS {watch.peak} KiB, {watch.trips} round trips")
    assert b.alive()
    assert not watch.failures, watch.failures
    assert watch.trips >= 5
    assert watch.peak < 120 * 1024, watch.peak  # KiB: stated bound for the CI-sized run


@pytest.mark.soak
def test_memory_budget_soak(broker_factory):
    b = broker_factory(CONFIG)
    watch = Watch(b)
    watch.start()
    try:
        clients = population(b, 1000, 10_000, 10_000)
        for _ in range(2):
            run_attacks(b, 1.0)
        time.sleep(2.0)
        for c in clients:
            c.close()
    finally:
        watch.stop.set()
    print(f"memory budget soak: peak RSS {watch.peak} KiB, {watch.trips} round trips")
    assert b.alive()
    assert not watch.failures, watch.failures
    assert watch.peak < 200 * 1024, watch.peak  # KiB: the unit's MemoryMax=200M
