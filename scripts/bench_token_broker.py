#!/usr/bin/env python3
"""Token clients against the real broker (issue 5): CONNECT rate and routing rate.

Starts ``python -m edge_broker run`` with a ``[tokens]`` config (Ed25519 key, a seed001 listener)
and measures, over loopback TCP with the project's codec:

- CONNECT → CONNACK round trips per second, with one token reused (the verifier's compiled-grant
  cache hits) and with a fresh token per connection (new grants compiled each time), against an
  anonymous baseline;
- QoS 0 messages per second from one token publisher to one token subscriber, through an MQTT
  filter (``bench/#``) and through a runtime pattern (``bench/d*``), against anonymous clients.
  The token publisher passes the token gate (publish rules) on every message.

Prints a markdown table with two rates per row: per wall-clock second, and per CPU second of
the broker process (from /proc; stable when the machine is busy with other work).

    .venv/bin/python scripts/bench_token_broker.py [--connects 300] [--messages 20000]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from procs import cpu_seconds  # noqa: E402

from edge_broker.auth.token import create_token
from edge_broker.auth.token_keys import TokenKey
from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import (
    NO_PROPERTIES,
    Connect,
    Pingreq,
    Pingresp,
    Publish,
    Subscribe,
    Subscription,
)

ROOT = Path(__file__).resolve().parent.parent


class Raw:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending: list[object] = []

    def send(self, packet: object) -> None:
        self.sock.sendall(encode(packet, 5))  # type: ignore[arg-type]

    def recv(self) -> object:
        while not self.pending:
            data = self.sock.recv(1 << 20)
            if not data:
                raise EOFError
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def connect(self, client_id: str, password: bytes | None) -> int:
        self.send(
            Connect(
                5,
                client_id,
                True,
                60,
                username="u" if password else None,
                password=password,
                properties=NO_PROPERTIES,
            )
        )
        return int(self.recv().reason_code)  # type: ignore[attr-defined]

    def close(self) -> None:
        self.sock.close()


def start(directory: Path, public_pem: bytes) -> tuple[subprocess.Popen[bytes], int]:
    key = directory / "ed.pub.pem"
    key.write_bytes(public_pem)
    config = directory / "broker.toml"
    config.write_text(f"""
[sys]
interval = 0
[limits]
connect_rate = 1000000.0
connect_burst = 1000000
[[listeners]]
name = "tcp"
port = 0
auth_methods = ["token", "anonymous"]
subscription_patterns = "seed001"
[[tokens.keys]]
file = {json.dumps(str(key))}
""")
    log = directory / "broker.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(config)],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if "listening on" in text:
            port = int(text.split("listening on ")[1].split()[0].rsplit(":", 1)[1])
            return proc, port
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(log.read_text())


def measured(pid: int, run: Callable[[], int]) -> tuple[float, float]:
    """(events per wall second, events per broker CPU second) of ``run`` (returns events)."""
    cpu0, t0 = cpu_seconds(pid), time.perf_counter()
    n = run()
    wall, cpu = time.perf_counter() - t0, cpu_seconds(pid) - cpu0
    return n / wall, n / max(cpu, 1e-9)


def connects(port: int, passwords: list[bytes | None]) -> int:
    for i, password in enumerate(passwords):
        c = Raw(port)
        assert c.connect(f"bench-c{i}", password) == 0
        c.close()
    return len(passwords)


def messages(port: int, password: bytes | None, sub_filter: str, n: int) -> int:
    sub, pub = Raw(port), Raw(port)
    assert sub.connect("bench-sub", password) == 0 and pub.connect("bench-pub", password) == 0
    sub.send(Subscribe(1, (Subscription(sub_filter, 0),)))
    sub.recv()
    batch = b"".join(encode(Publish(f"bench/d{i % 10}", b"x" * 32, 0), 5) for i in range(1000))
    for _ in range(n // 1000):
        pub.sock.sendall(batch)
    got = 0
    while got < (n // 1000) * 1000:
        if isinstance(sub.recv(), Publish):
            got += 1
    pub.send(Pingreq())
    assert isinstance(pub.recv(), Pingresp)
    sub.close()
    pub.close()
    return got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connects", type=int, default=300)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    key = TokenKey.from_pem(pem)
    public = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )

    def token(i: int) -> bytes:
        grants = [
            {
                "tenant_ids": ["~"],
                "allow_channels_pub": ["bench/#", f"x{i}/#"],
                "allow_channels_sub": ["bench/#", f"x{i}/#"],
            }
        ]
        return create_token(key, grants, ttl=3600).encode()

    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start(Path(tmp), public)
        try:
            n = args.connects
            same = token(0)
            fresh = [token(i + 1) for i in range(n)]
            m = args.messages
            pid = proc.pid
            rows = [
                ("CONNECT, anonymous", measured(pid, lambda: connects(port, [None] * n))),
                ("CONNECT, one token reused", measured(pid, lambda: connects(port, [same] * n))),
                ("CONNECT, a new token each", measured(pid, lambda: connects(port, fresh))),
                (
                    "QoS 0 message, anonymous, bench/#",
                    measured(pid, lambda: messages(port, None, "bench/#", m)),
                ),
                (
                    "QoS 0 message, token, bench/#",
                    measured(pid, lambda: messages(port, same, "bench/#", m)),
                ),
                (
                    "QoS 0 message, token, pattern bench/d*",
                    measured(pid, lambda: messages(port, same, "bench/d*", m)),
                ),
            ]
        finally:
            proc.terminate()
            proc.wait(10)
    print("| per second of | wall clock | broker CPU |\n|---|---:|---:|")
    for name, (wall, cpu) in rows:
        print(f"| {name} | {wall:,.0f} | {cpu:,.0f} |")


if __name__ == "__main__":
    main()
