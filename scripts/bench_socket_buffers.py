#!/usr/bin/env python3
"""What unfinished packets and unread deliveries cost the real broker, default limits
(issue 16: ``read_buffer_size`` / ``read_pool_size`` and ``max_write_buffer_total``,
docs/limits-memory.md "Socket buffers").

1. ``readers``: R connected clients each send the first 900 KB of a 1 MiB PUBLISH and stop, and
   P unauthenticated ones the first 12 KB of a 16 KB CONNECT. Prints the broker's peak RSS
   growth, a well-behaved client's QoS 1 round trip meanwhile, and how many of the R were
   closed within ``read_pool_timeout`` + 5 s and with what.
2. ``slow``: S subscribers that never read (4 KiB receive buffers) on a topic that gets 32 KB
   QoS 0 messages for 5 s. Prints the peak RSS growth and the round trip.

``--root`` runs another checkout's broker (the "before" figures; only default limits are set,
so any checkout reads the configuration).

    .venv/bin/python scripts/bench_socket_buffers.py [--readers 200] [--pre-auth 300] [--slow 300]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_pre_auth import rss_mib, start  # noqa: E402
from flood import publish_start, push  # noqa: E402
from procs import PeakRss  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connack,
    Connect,
    Disconnect,
    Packet,
    Publish,
    Subscribe,
    Subscription,
)

MIB = 1024 * 1024
CONFIG = """
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
[broker]
connect_timeout = 60
[limits]
connect_rate = 100000
connect_burst = 100000
"""


class Client:
    def __init__(self, port: int, rcvbuf: int = 0) -> None:
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect(("127.0.0.1", port))
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending: list[Packet] = []

    def send(self, packet: Packet) -> None:
        self.sock.sendall(encode(packet, 5))

    def recv(self, timeout: float) -> Packet | None:
        """The next packet; None at EOF."""
        self.sock.settimeout(timeout)
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def connect(self, client_id: str) -> None:
        self.send(Connect(5, client_id, True, 0))
        assert isinstance(self.recv(10), Connack)


def roundtrip(port: int) -> str:
    c = Client(port)
    try:
        c.connect(f"ok-{time.monotonic_ns()}")
        c.send(Subscribe(1, (Subscription("ok/t", 1),)))
        c.recv(10)
        start_at = time.monotonic()
        c.send(Publish("ok/t", b"hello", 1, packet_id=2))
        while True:
            p = c.recv(30)
            if p is None:
                return "closed"
            if isinstance(p, Publish):
                return f"{(time.monotonic() - start_at) * 1000:.0f} ms"
    except (OSError, AssertionError) as exc:
        return f"failed ({exc.__class__.__name__})"
    finally:
        c.sock.close()


def readers(root: Path, n: int, pre_auth: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(root, Path(tmp), CONFIG)
        try:
            roundtrip(port)
            before = rss_mib(proc.pid)
            peak = PeakRss(proc.pid)
            peak.start()
            big = []
            for i in range(n):
                c = Client(port)
                c.connect(f"big-{i}")
                big.append(c)
            small = [socket.create_connection(("127.0.0.1", port)) for _ in range(pre_auth)]
            connect = encode(Connect(5, "pre", True, 0, password=b"p" * 16_000), 5)
            push(
                [(c.sock, publish_start(f"big/{i}", MIB, 900_000)) for i, c in enumerate(big)]
                + [(s, connect[:12_000]) for s in small],
                3.0,
            )
            trip = roundtrip(port)
            grown = peak.stop() / 1024 - before  # MiB
            print(
                f"readers: {n} × 900 KB of a 1 MiB PUBLISH + {pre_auth} × 12 KB of a 16 KB "
                f"CONNECT: RSS {before:.1f} MiB before, +{grown:.1f} MiB at the peak; "
                f"round trip meanwhile {trip}"
            )
            deadline = time.monotonic() + 15
            answers: dict[str, int] = {}
            for c in big:
                got = "still open"
                try:
                    while True:
                        p = c.recv(max(0.01, deadline - time.monotonic()))
                        if p is None:
                            got = got if got != "still open" else "closed"
                            break
                        if isinstance(p, Disconnect):
                            got = f"DISCONNECT 0x{p.reason_code:02X}"
                except (TimeoutError, OSError):
                    pass
                answers[got] = answers.get(got, 0) + 1
            print(f"  within 15 s the {n} got: {answers}")
        finally:
            proc.kill()
            proc.wait()


def slow(root: Path, n: int, seconds: float = 5.0) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(root, Path(tmp), CONFIG)
        clients = []
        try:
            for i in range(n):
                c = Client(port, rcvbuf=4096)
                c.connect(f"slow-{i}")
                c.send(Subscribe(1, (Subscription("busy/t", 0),)))
                c.recv(10)
                clients.append(c)
            before = rss_mib(proc.pid)
            peak = PeakRss(proc.pid)
            peak.start()
            pub = Client(port)
            pub.connect("pub")
            payload = b"m" * 32_000
            sent = 0
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                pub.send(Publish("busy/t", payload, 0))
                sent += 1
            trip = roundtrip(port)
            grown = peak.stop() / 1024 - before  # MiB
            print(
                f"slow: {n} subscribers that never read, {sent} messages of 32 KB in "
                f"{seconds:g} s: RSS {before:.1f} MiB before, +{grown:.1f} MiB at the peak; "
                f"round trip afterwards {trip}"
            )
        finally:
            for c in clients:
                c.sock.close()
            proc.kill()
            proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--readers", type=int, default=200)
    ap.add_argument("--pre-auth", type=int, default=300)
    ap.add_argument("--slow", type=int, default=300)
    ap.add_argument("--root", default=str(ROOT), help="checkout whose broker to run")
    args = ap.parse_args()
    root = Path(args.root).resolve()
    print(f"broker from {root}")
    if args.readers:
        readers(root, args.readers, args.pre_auth)
    if args.slow:
        slow(root, args.slow)


if __name__ == "__main__":
    main()
