#!/usr/bin/env python3
"""What clients that never authenticate cost the real broker (issue 16, pre-authentication).

1. ``connects``: K sockets each send a CONNECT with ~1 MB of empty user properties and the
   SMOKER authentication method, then wait. Prints the broker's RSS growth one second later
   and what the clients got back.
2. ``websockets``: W sockets connect to a WebSocket listener and never finish the HTTP upgrade
   (half of them send half a request). Prints how many the broker has closed after 1 s and
   after ``connect_timeout`` + 2 s (connect_timeout = 3 s), and whether a real WebSocket client
   then gets a CONNACK.

``--root`` runs another checkout's broker (the "before" figures).

    .venv/bin/python scripts/bench_pre_auth.py [--connects 20] [--websockets 300]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from nacl.signing import SigningKey  # noqa: E402
from procs import rss_kib  # noqa: E402

from edge_broker.claims.smoker_id import smoker_id  # noqa: E402
from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import Connect, Properties  # noqa: E402


def start(root: Path, workdir: Path, config: str) -> tuple[subprocess.Popen[bytes], int]:
    path = workdir / "broker.toml"
    path.write_text(config)
    log = workdir / "broker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge_broker", "run", "--config", str(path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=dict(os.environ, PYTHONPATH=str(root)),
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, int(found.group(1))
        if proc.poll() is not None:
            raise SystemExit(log.read_text())
        time.sleep(0.05)
    raise SystemExit("broker did not start")


def rss_mib(pid: int) -> float:
    return rss_kib(pid) / 1024


def closed(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(65536) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def answer(sock: socket.socket) -> str:
    sock.settimeout(3)
    reader = PacketReader(side="client", protocol_level=5)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return "closed"
            packets = reader.feed(data)
            if packets:
                p = packets[0]
                return f"{type(p).__name__.upper()} 0x{p.reason_code:02X}"  # type: ignore[attr-defined]
    except TimeoutError:
        return "nothing (waiting)"
    except OSError:
        return "reset"


def bench_connects(root: Path, k: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = (
            f'[claims]\nstore_dir = "{tmp}/claims"\nfsync = "never"\n\n'
            "[broker]\nconnect_timeout = 30\n\n"
            '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
            'auth_methods = ["smoker", "anonymous"]\n'
        )
        proc, port = start(root, Path(tmp), config)
        try:
            time.sleep(1.0)
            before = rss_mib(proc.pid)
            socks = []
            for _ in range(k):
                props = Properties(
                    authentication_method="SMOKER", user_properties=(("", ""),) * 200_000
                )
                data = encode(
                    Connect(
                        5, smoker_id(SigningKey.generate().verify_key), True, 60, properties=props
                    ),
                    5,
                )
                s = socket.create_connection(("127.0.0.1", port))
                try:
                    s.sendall(data)
                except OSError:
                    pass
                socks.append(s)
            time.sleep(1.0)
            after = rss_mib(proc.pid)
            answers = [answer(s) for s in socks]
            kinds = {a: answers.count(a) for a in sorted(set(answers))}
            print(
                f"| {k} CONNECTs x 1 MB user properties (SMOKER) | RSS {before:.0f} -> {after:.0f} "
                f"MiB (+{after - before:.0f}) | {kinds} |"
            )
            for s in socks:
                s.close()
        finally:
            proc.terminate()
            proc.wait(15)


def bench_websockets(root: Path, w: int) -> None:
    from websockets.sync.client import connect as ws_connect

    with tempfile.TemporaryDirectory() as tmp:
        config = (
            "[broker]\nconnect_timeout = 3\n\n[limits]\nmax_connections = 100\n\n"
            '[[listeners]]\nname = "ws"\nbind = "127.0.0.1"\nport = 0\ntransport = "websocket"\n'
        )
        proc, port = start(root, Path(tmp), config)
        try:
            socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(w)]
            for s in socks[::2]:
                s.sendall(b"GET /mqtt HTTP/1.1\r\nHost: gateway\r\n")
            time.sleep(1.0)
            early = sum(closed(s) for s in socks)
            time.sleep(4.0)
            late = sum(closed(s) for s in socks)
            try:
                with ws_connect(
                    f"ws://127.0.0.1:{port}/mqtt", subprotocols=["mqtt"], open_timeout=5
                ) as ws:
                    ws.send(encode(Connect(5, "real-client"), 5))
                    packets = PacketReader(side="client", protocol_level=5).feed(ws.recv(timeout=5))
                    real = f"CONNACK 0x{packets[0].reason_code:02X}"  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - reported, that is the measurement
                real = f"failed: {type(exc).__name__}"
            print(
                f"| {w} half-open WebSockets (max_connections 100, connect_timeout 3 s) | "
                f"closed after 1 s: {early}, after 5 s: {late} | real client: {real} |"
            )
            for s in socks:
                s.close()
        finally:
            proc.terminate()
            proc.wait(15)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connects", type=int, default=20)
    parser.add_argument("--websockets", type=int, default=300)
    parser.add_argument("--root", default=str(ROOT))
    args = parser.parse_args()
    print(f"broker: {args.root}")
    bench_connects(Path(args.root), args.connects)
    bench_websockets(Path(args.root), args.websockets)


if __name__ == "__main__":
    main()
