"""What the socket-buffer tests and scripts/bench_socket_buffers.py send to a broker that may
stop reading (issue 16): the first bytes of a large PUBLISH, pushed without ever blocking.
One copy for both (tests import it as ``scripts.flood``)."""

from __future__ import annotations

import socket
import time

from edge_broker.mqtt.wire import encode_varint


def publish_start(topic: str, size: int, sent: int) -> bytes:
    """The first ``sent`` bytes of a QoS 0 PUBLISH of ``size`` bytes in all (no properties):
    the codec builds whole packets, these are the bytes of one that never finishes."""
    t = topic.encode()
    body = next(n for n in range(size - 5, size) if 1 + len(encode_varint(n)) + n == size)
    head = b"\x30" + encode_varint(body) + len(t).to_bytes(2, "big") + t + b"\x00"
    return (head + b"x" * (sent - len(head)))[:sent]


def send_some(sock: socket.socket, data: bytes) -> int:
    """Send what the kernel takes now, never block (the broker may have stopped reading);
    returns how many bytes went. The socket is left with a 5 s timeout."""
    sock.setblocking(False)
    sent = 0
    try:
        while sent < len(data):
            sent += sock.send(data[sent : sent + 65536])
    except (BlockingIOError, InterruptedError):
        pass
    finally:
        sock.settimeout(5.0)
    return sent


def push(pieces: list[tuple[socket.socket, bytes]], seconds: float) -> None:
    """Keep sending each socket's bytes for ``seconds`` without ever blocking: what the broker
    reads leaves room in the kernel for more."""
    left = [[sock, data] for sock, data in pieces]
    deadline = time.monotonic() + seconds
    while left and time.monotonic() < deadline:
        for item in left:
            item[1] = item[1][send_some(item[0], item[1]) :]
        left = [item for item in left if item[1]]
        time.sleep(0.02)
