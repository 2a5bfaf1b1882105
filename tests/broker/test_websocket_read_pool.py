"""The WebSocket read path is bounded by the broker-wide read pool like TCP (issue 34,
broker/websocket.py, broker/limits/read_pool.py): the bytes of a frame being received, which
the ``websockets`` parser keeps until the frame is whole, count against
``limits.read_buffer_size`` and ``read_pool_size``, over real sockets against the real broker."""

from __future__ import annotations

import base64
import os
import socket
import time

from broker_raw import rss_kib, unique_id
from hypothesis import given, settings
from hypothesis import strategies as st
from test_broker_memory_limits import sys_value
from websockets.sync.client import connect as ws_connect

from edge_broker.broker.websocket import FrameSizes
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect, Publish, Subscribe, Subscription
from scripts.flood import publish_start, push
from scripts.procs import PeakRss

MIB = 1024 * 1024
OPEN = {"connect_rate": 100_000, "connect_burst": 100_000, "max_connections": 5000}
ZERO_MASK = b"\x00\x00\x00\x00"  # a valid mask key that leaves the payload as it is


def frame_header(size: int) -> bytes:
    """A masked binary frame's header announcing ``size`` payload bytes (RFC 6455 §5.2)."""
    if size < 126:
        return bytes([0x82, 0x80 | size]) + ZERO_MASK
    if size < 65536:
        return bytes([0x82, 0x80 | 126]) + size.to_bytes(2, "big") + ZERO_MASK
    return bytes([0x82, 0x80 | 127]) + size.to_bytes(8, "big") + ZERO_MASK


def ws_mqtt_client(host: str, port: int) -> socket.socket:
    """A raw socket that has done the upgrade and logged in (CONNACK 0x00 read)."""
    sock = socket.create_connection((host, port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        (
            f"GET /mqtt HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mqtt\r\n\r\n"
        ).encode()
    )
    connect = encode(Connect(5, unique_id("big"), True, 0), 5)
    sock.sendall(frame_header(len(connect)) + connect)
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(4096)
    head, rest = got.split(b"\r\n\r\n", 1)
    assert head.startswith(b"HTTP/1.1 101"), head
    while len(rest) < 2 or len(rest) < 2 + rest[1]:
        rest += sock.recv(4096)
    packets = PacketReader(side="client", protocol_level=5).feed(rest[2 : 2 + rest[1]])
    assert isinstance(packets[0], Connack) and packets[0].reason_code == 0, packets
    return sock


def ws_subscribe(ws, name: str, topic: str) -> PacketReader:
    """CONNECT and SUBSCRIBE over ``ws``, CONNACK and SUBACK read; the reader for what follows."""
    reader = PacketReader(side="client", protocol_level=5)
    ws.send(encode(Connect(5, unique_id(name), True, 0), 5))
    ws.send(encode(Subscribe(1, (Subscription(topic, 0),)), 5))
    packets: list = []
    while len(packets) < 2:
        packets += reader.feed(ws.recv(timeout=5))
    return reader


def ws_roundtrip(b) -> float:
    """A well-behaved WebSocket client gets its own message back; the time it took."""
    topic = f"ok/{unique_id()}"
    with ws_connect(f"ws://{b.host}:{b.ports['ws']}/mqtt", subprotocols=["mqtt"]) as ws:
        reader = ws_subscribe(ws, "victim", topic)
        start = time.monotonic()
        ws.send(encode(Publish(topic, b"hello", 0), 5))
        while True:
            for packet in reader.feed(ws.recv(timeout=5)):
                if isinstance(packet, Publish):
                    assert packet.payload == b"hello"
                    return time.monotonic() - start


def test_websocket_clients_sending_the_start_of_1_mib_frames_stay_within_the_read_pool(
    broker_factory,
):
    """60 logged-in WebSocket clients each send the header of a 1 MiB binary frame and 900 KB
    of it, then stop. Before: the websockets parser kept every frame's bytes until the frame
    was whole (+52 MiB here; max_connections × max_packet_size by default), outside the read
    pool. Now at most read_pool_size beyond read_buffer_size each is held; the waiting clients
    stop being read and are closed at read_pool_timeout, counted; a WebSocket victim is
    served throughout."""
    b = broker_factory(
        {
            "listeners": [{"name": "tcp"}, {"name": "ws", "transport": "websocket"}],
            "limits": {**OPEN, "read_pool_size": 2 * MIB, "read_pool_timeout": 3.0},
            "broker": {"connect_timeout": 30},
            "sys": {"interval": 0.5},
        }
    )
    ws_roundtrip(b)
    before = rss_kib(b.pid)
    peak = PeakRss(b.pid)
    peak.start()
    big: list[socket.socket] = []
    try:
        for _ in range(60):
            big.append(ws_mqtt_client(b.host, b.ports["ws"]))
        publish = publish_start(f"big/{unique_id()}", MIB, 900_000)
        push([(s, frame_header(MIB) + publish) for s in big], 2.0)
        assert ws_roundtrip(b) < 2.0  # the broker still serves everyone else at once
        grown = peak.stop() - before
        print(f"RSS {before} KiB before, +{grown} KiB at the peak")
        assert grown < 20 * 1024, f"broker grew by {grown} KiB while frames were unfinished"
        hits = int(sys_value(b, "limits/limits_read_pool_size/hits", timeout=10))
        assert hits >= 40, f"only {hits} waiting WebSocket clients were closed at the timeout"
        ws_roundtrip(b)
    finally:
        for s in big:
            s.close()


def test_a_whole_1_mib_publish_over_websocket_is_delivered(broker_factory):
    """The reservation is given back: two 1 MiB PUBLISHes in one frame each, one after the
    other through a pool that holds one, both delivered."""
    b = broker_factory(
        {
            "listeners": [{"name": "tcp"}, {"name": "ws", "transport": "websocket"}],
            "limits": {**OPEN, "read_pool_size": MIB},
        }
    )
    topic = f"big/{unique_id()}"
    url = f"ws://{b.host}:{b.ports['ws']}/mqtt"
    with (
        ws_connect(url, subprotocols=["mqtt"], max_size=None) as sub,
        ws_connect(url, subprotocols=["mqtt"], max_size=None) as pub,
    ):
        sub_reader = ws_subscribe(sub, "sub", topic)
        pub.send(encode(Connect(5, unique_id("pub"), True, 0), 5))
        PacketReader(side="client", protocol_level=5).feed(pub.recv(timeout=5))
        payload = b"p" * (MIB - 100)
        for _ in range(2):
            pub.send(encode(Publish(topic, payload, 0), 5))
        got = []
        while len(got) < 2:
            got += [p for p in sub_reader.feed(sub.recv(timeout=10)) if isinstance(p, Publish)]
        assert [len(p.payload) for p in got] == [len(payload)] * 2


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 70_000), min_size=1, max_size=6),
    st.lists(st.integers(1, 5000), min_size=1, max_size=40),
    st.booleans(),
)
def test_frame_sizes_follow_frame_boundaries_across_any_split(sizes, cuts, masked):
    """Whatever the reads' boundaries, FrameSizes knows what the frame under way holds and
    its whole size once the header is in, and nothing once it is whole."""
    request = b"GET /mqtt HTTP/1.1\r\nHost: x\r\n\r\n"
    frames = []
    for size in sizes:
        head = frame_header(size)
        if not masked:
            head = bytes([head[0], head[1] & 0x7F]) + head[2:-4]
        frames.append(head + b"x" * size)
    stream = request + b"".join(frames)
    ends, pos = [], len(request)  # (start, end) of each frame in the stream
    for frame in frames:
        ends.append((pos, pos + len(frame)))
        pos += len(frame)
    tracker = FrameSizes(limit=1 << 40)
    at, i = 0, 0
    while at < len(stream):
        step = cuts[i % len(cuts)]
        i += 1
        tracker.feed(stream[at : at + step])
        at = min(at + step, len(stream))
        inside = [(s, e) for s, e in ends if s < at < e]
        if not inside:
            assert (tracker.held, tracker.frame_size) == (0, 0)
            continue
        start, end = inside[0]
        assert tracker.held == at - start
        header = len(frames[ends.index((start, end))]) - sizes[ends.index((start, end))]
        if at - start >= header:
            assert tracker.frame_size == end - start
