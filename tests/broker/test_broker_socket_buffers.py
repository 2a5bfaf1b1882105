"""Issue 16: the bytes of packets being read and of unsent output are bounded broker-wide
(``[limits] read_buffer_size``, ``read_pool_size``, ``read_pool_timeout``,
``max_write_buffer_total``; broker/limits/read_pool.py, broker/limits/write_budget.py), over real
sockets against the real broker. Without them ``max_connections × max_packet_size`` and
``max_connections × write_buffer_high`` were the worst case (2.5 GiB with the defaults)."""

from __future__ import annotations

import socket
import ssl
import time

import pytest
from broker_raw import RawClient, rss_kib, unique_id
from test_broker_listeners import pki, tls_client, tls_config  # noqa: F401 (pki: a fixture)
from test_broker_memory_limits import sys_value

from edge_broker.config import ConfigError, loads_config
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connect, Disconnect, Pingreq, Pingresp, Puback, Publish
from edge_broker.mqtt.reason_codes import ReasonCode
from scripts.flood import publish_start, push, send_some
from scripts.procs import PeakRss

MIB = 1024 * 1024
OPEN = {"connect_rate": 100_000, "connect_burst": 100_000, "max_connections": 5000}


class SlowReader(RawClient):
    """A client with a 4 KiB receive buffer, so that what it does not read stays in the
    broker rather than in the kernel."""

    def __init__(self, host: str, port: int) -> None:
        self.level = 5
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.settimeout(5.0)
        self.sock.connect((host, port))
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending = []
        self.eof = False


def roundtrip(b) -> float:
    """A well-behaved client gets its QoS 1 message back; the time it took."""
    topic = f"ok/{unique_id()}"
    with RawClient(b.host, b.port) as c:
        c.connect(unique_id("ok"), keep_alive=0)
        c.subscribe(topic, 1)
        start = time.monotonic()
        c.send(Publish(topic, b"hello", 1, packet_id=7))
        while True:
            packet = c.recv(5)
            if isinstance(packet, Publish):
                assert packet.payload == b"hello"
                return time.monotonic() - start


def test_unfinished_largest_packets_wait_for_the_read_pool_and_are_closed_with_0x97(
    broker_factory,
):
    """60 connected clients each send 900 KB of a 1 MiB PUBLISH and stop; 300 unauthenticated
    ones each the first 12 KB of a 16 KB CONNECT. Before: every connection kept what it had
    read (+55 MiB here; max_connections × max_packet_size = 2 GiB by default). Now at most
    read_pool_size beyond 8 KiB each is held, the waiting clients stop being read and get
    DISCONNECT 0x97 with a Reason String at read_pool_timeout, counted; a well-behaved client
    keeps round-tripping."""
    b = broker_factory(
        {
            "limits": {**OPEN, "read_pool_size": 2 * MIB, "read_pool_timeout": 3.0},
            "broker": {"connect_timeout": 30},
            "sys": {"interval": 0.5},
        }
    )
    roundtrip(b)
    before = rss_kib(b.pid)
    peak = PeakRss(b.pid)
    peak.start()
    big: list[RawClient] = []
    small: list[socket.socket] = []
    try:
        for _ in range(60):
            c = RawClient(b.host, b.port)
            c.connect(unique_id("big"), keep_alive=0)
            big.append(c)
        connect = encode(Connect(5, unique_id("pre"), True, 0, password=b"p" * 16_000), 5)
        for _ in range(300):
            small.append(socket.create_connection((b.host, b.port), timeout=5))
        push(
            [(c.sock, publish_start(f"big/{unique_id()}", MIB, 900_000)) for c in big]
            + [(s, connect[:12_000]) for s in small],
            2.0,
        )
        assert roundtrip(b) < 2.0  # the broker still serves everyone else at once
        grown = peak.stop() - before
        print(f"RSS {before} KiB before, +{grown} KiB at the peak")
        assert grown < 24 * 1024, f"broker grew by {grown} KiB while clients held partial packets"
        closed = []
        for c in big:
            try:
                closed.append(c.closed(8.0))
            except AssertionError:
                pass  # one of the few that got the pool's bytes: it is still being read
        assert len(closed) >= 50, f"only {len(closed)} of 60 waiting clients were closed"
        disconnects = [p for got in closed for p in got if isinstance(p, Disconnect)]
        assert len(disconnects) == len(closed)
        assert all(d.reason_code == ReasonCode.QUOTA_EXCEEDED for d in disconnects)
        assert "read_pool_size" in (disconnects[0].properties.reason_string or "")
        roundtrip(b)
        hits = int(sys_value(b, "limits/limits_read_pool_size/hits"))
        assert hits >= len(closed)
    finally:
        for c in big:
            c.close()
        for s in small:
            s.close()


def test_a_largest_packet_waits_for_another_to_finish_then_is_delivered(broker_factory):
    """The pool holds one largest packet: the second waits (not read, not closed) and is read
    and delivered as soon as the first has arrived whole."""
    b = broker_factory({"limits": {**OPEN, "read_pool_size": MIB}})
    topic = f"big/{unique_id()}"
    with (
        RawClient(b.host, b.port) as sub,
        RawClient(b.host, b.port) as first,
        RawClient(b.host, b.port) as second,
    ):
        sub.connect(unique_id("sub"), keep_alive=0)
        sub.subscribe(topic, 0)
        first.connect(unique_id("first"), keep_alive=0)
        second.connect(unique_id("second"), keep_alive=0)
        whole = publish_start(topic, MIB, MIB)
        send_some(first.sock, whole[:600_000])
        time.sleep(0.3)
        send_some(second.sock, whole[:600_000])
        time.sleep(0.5)
        first.sock.sendall(whole[600_000:])
        got = sub.expect(Publish, timeout=5)
        assert len(got.payload) > MIB - 100
        second.sock.sendall(whole[600_000:])
        assert sub.expect(Publish, timeout=5).payload == got.payload
        for c in (first, second):
            c.send(Pingreq())
            c.expect(Pingresp)


def test_slow_readers_are_held_back_by_max_write_buffer_total(broker_factory):
    """100 subscribers that never read their sockets, on a topic that gets 32 KB messages.
    Before: each transport kept up to write_buffer_high (256 KiB) and more (+25 MiB here;
    2,000 × 256 KiB = 500 MiB by default). Now, past max_write_buffer_total, a connection
    that cannot send gets no more deliveries until it has read what it has: counted, and a
    well-behaved client keeps round-tripping."""
    b = broker_factory(
        {"limits": {**OPEN, "max_write_buffer_total": MIB}, "sys": {"interval": 0.5}}
    )
    topic = f"busy/{unique_id()}"
    slow: list[RawClient] = []
    try:
        for _ in range(100):
            c = SlowReader(b.host, b.port)
            c.connect(unique_id("slow"), keep_alive=0)
            c.subscribe(topic, 0)
            slow.append(c)
        roundtrip(b)
        before = rss_kib(b.pid)
        peak = PeakRss(b.pid)
        peak.start()
        payload = b"m" * 32_000
        with RawClient(b.host, b.port) as pub:
            pub.connect(unique_id("pub"), keep_alive=0)
            deadline = time.monotonic() + 4.0
            n = 0
            while time.monotonic() < deadline:
                pub.send(Publish(topic, payload, 0))
                n += 1
                if n % 20 == 0:
                    pub.send(Pingreq())
                    pub.expect(Pingresp, timeout=10)
            assert roundtrip(b) < 2.0
        grown = peak.stop() - before
        print(f"{n} messages of 32 KB; RSS {before} KiB before, +{grown} KiB at the peak")
        assert grown < 12 * 1024, f"broker grew by {grown} KiB for 100 slow readers"
        assert int(sys_value(b, "limits/limits_max_write_buffer_total/hits")) > 0
    finally:
        for c in slow:
            c.close()


def test_a_read_pool_too_small_for_a_largest_packet_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        loads_config("[limits]\nmax_packet_size = 1048576\nread_pool_size = 65536\n")
    text = str(info.value)
    assert "limits.read_pool_size" in text and "max_packet_size" in text
    limits = loads_config("[limits]\nmax_packet_size = 65536\nread_pool_size = 57344\n").limits
    assert (limits.read_pool_size, limits.read_buffer_size) == (57344, 8192)


N_HELD = 200  # 6.4 MB: more than the kernel's socket buffers take


def test_a_held_back_qos1_subscriber_gets_its_messages_from_the_session_queue(broker_factory):
    """Held back by max_write_buffer_total (not by its own write_buffer_high), a QoS 1
    subscriber that stopped reading gets no more bytes in its transport; its messages wait in
    the session queue and all arrive, in order, once it reads again."""
    b = broker_factory(
        {
            "limits": {
                **OPEN,
                "max_write_buffer_total": 65536,
                "write_buffer_high": 64 * MIB,  # only the broker-wide bound holds it back
                "max_inflight": 1000,  # the in-flight window does not stop it either
                "max_queued_bytes": 16 * MIB,
                "max_queued_bytes_total": 64 * MIB,
            },
            "sys": {"interval": 0.5},
        }
    )
    topic = f"held/{unique_id()}"
    with SlowReader(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
        sub.connect(unique_id("held"), keep_alive=0)
        sub.subscribe(topic, 1)
        pub.connect(unique_id("pub"), keep_alive=0)
        for i in range(N_HELD):
            pub.send(Publish(topic, i.to_bytes(2, "big") * 16_000, 1, packet_id=i + 1))
            pub.expect(Puback)
        time.sleep(0.5)
        assert int(sys_value(b, "limits/limits_max_write_buffer_total/hits")) > 0
        got: list[int] = []
        deadline = time.monotonic() + 20
        while len(got) < N_HELD and time.monotonic() < deadline:
            got += [int.from_bytes(p.payload[:2], "big") for p in sub.publishes(0.5)]
        assert got == list(range(N_HELD))


class TlsClient(RawClient):
    def __init__(self, host: str, port: int, ctx: ssl.SSLContext) -> None:
        self.level = 5
        self.sock = ctx.wrap_socket(
            socket.create_connection((host, port), timeout=5), server_hostname=host
        )
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending = []
        self.eof = False


def test_the_read_pool_is_all_given_back_after_large_packets_over_tls(
    broker_factory,
    pki,  # noqa: F811 (the fixture imported above)
):
    """TLS reads often bring nothing (a partial record): what the pool lent for such a read
    must come back. After 300 KB packets from two clients have been read and delivered, the
    pool and the write-buffer count are back to 0 ($SYS/broker/limits/read_pool/bytes,
    …/write_buffers/bytes)."""
    b = broker_factory({**tls_config(pki, require=False), "sys": {"interval": 0.5}})
    ctx = tls_client(pki, cert=False)
    topic = f"tls/{unique_id()}"
    with (
        TlsClient(b.host, b.port, ctx) as sub,
        TlsClient(b.host, b.port, ctx) as a,
        TlsClient(b.host, b.port, ctx) as c,
    ):
        sub.connect(unique_id("sub"), keep_alive=0)
        sub.subscribe(topic, 1)
        for pub in (a, c):
            pub.connect(unique_id("pub"), keep_alive=0)
        for i in range(5):
            for pub in (a, c):
                pub.send(Publish(topic, bytes([i]) * 300_000, 1, packet_id=i + 1))
            for pub in (a, c):
                pub.expect(Puback)
        got = []
        while len(got) < 10:
            got += sub.publishes(1.0)
        assert sorted(p.payload[0] for p in got) == sorted(list(range(5)) * 2)
        # every byte is given back: the next $SYS values say so (the deadline bounds a hang)
        wanted = {"read_pool", "write_buffers"}
        deadline, values = time.monotonic() + 30, {}
        with TlsClient(b.host, b.port, ctx) as s:
            s.connect(unique_id("sys"))
            s.subscribe("$SYS/broker/limits/+/bytes")
            while not all(values.get(name) == b"0" for name in wanted):
                assert time.monotonic() < deadline, values
                for p in s.publishes(0.6):
                    values[p.topic.split("/")[-2]] = p.payload
        assert values["read_pool"] == values["write_buffers"] == b"0"


def test_unauthenticated_connections_take_at_most_half_of_the_read_pool(broker_factory):
    """200 sockets each send 12 KB of a 16 KB CONNECT and wait: each needs 4 KiB of the pool
    beyond its own 8 KiB. They may hold only half of it, so a logged-in client's 500 KB
    PUBLISH is read and delivered at once rather than waiting for them to time out."""
    b = broker_factory(
        {
            "limits": {**OPEN, "max_packet_size": 512 * 1024, "read_pool_size": MIB},
            "broker": {"connect_timeout": 30},
        }
    )
    topic = f"half/{unique_id()}"
    connect = encode(Connect(5, unique_id("pre"), True, 0, password=b"p" * 16_000), 5)
    socks = [socket.create_connection((b.host, b.port), timeout=5) for _ in range(200)]
    try:
        push([(s, connect[:12_000]) for s in socks], 2.0)
        with RawClient(b.host, b.port) as sub, RawClient(b.host, b.port) as pub:
            sub.connect(unique_id("sub"), keep_alive=0)
            sub.subscribe(topic, 0)
            pub.connect(unique_id("pub"), keep_alive=0)
            pub.sock.sendall(publish_start(topic, 500_000, 500_000))
            assert len(sub.expect(Publish, timeout=5).payload) > 499_000
    finally:
        for s in socks:
            s.close()
