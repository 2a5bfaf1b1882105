"""Start-up time with a large state directory: ``edge-broker check`` (systemd's ExecStartPre)
and ``run`` until it accepts connections, one after the other as systemd runs them.

Fills a state directory through a real broker (``--messages`` QoS 1 messages of ``--payload``
bytes queued for one offline persistent session), then times ``check`` and ``run`` ``--runs``
times each (the minimum is printed) against it and against an empty state directory. ``--root``
runs another checkout's broker (the "before" figures of a change).

    .venv/bin/python scripts/bench_startup.py [--messages 20000] [--runs 5] [--root DIR]
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from procs import free_port, stop_process, wait_port  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connect,
    Properties,
    Publish,
    Subscribe,
    Subscription,
)

ROOT = Path(__file__).resolve().parent.parent


def config(state: Path, port: int) -> str:
    return (
        f'[[listeners]]\nname = "bench"\nport = {port}\n'
        "[limits]\nmax_queued_messages = 1000000\nmax_queued_bytes = 1073741824\n"
        "max_queued_bytes_total = 4294967296\n"
        f'[persistence]\nenabled = true\nstate_dir = "{state}"\ndurability = "none"\n'
        '[log]\nlevel = "warning"\n'
    )


def start(conf: Path, port: int, root: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(conf)], cwd=root
    )
    wait_port(port, 300, process)
    return process


def connect(port: int, client_id: str) -> tuple[socket.socket, PacketReader]:
    sock = socket.create_connection(("127.0.0.1", port))
    reader = PacketReader(side="client", protocol_level=5)
    props = Properties(session_expiry_interval=86_400)
    sock.sendall(encode(Connect(5, client_id, False, 60, properties=props), 5))
    while not reader.feed(sock.recv(65536)):
        pass
    return sock, reader


def fill(conf: Path, port: int, messages: int, payload: int, root: Path) -> None:
    broker = start(conf, port, root)
    try:
        sub, reader = connect(port, "bench-offline")
        sub.sendall(encode(Subscribe(1, (Subscription("q/#", 1),)), 5))
        while not reader.feed(sub.recv(65536)):
            pass
        sub.close()  # offline: what follows is queued for it, and stored
        pub, reader = connect(port, "bench-publisher")
        acked = 0
        for n in range(messages):
            packet = Publish(f"q/{n % 10}", b"x" * payload, 1, False, False, n % 65535 + 1)
            pub.sendall(encode(packet, 5))
            while n + 1 - acked > 1000:  # at most 1,000 unacknowledged
                acked += len(reader.feed(pub.recv(65536)))
        while acked < messages:
            acked += len(reader.feed(pub.recv(65536)))
        pub.close()
        time.sleep(1.0)
    finally:
        stop_process(broker)


def timings(conf: Path, port: int, runs: int, root: Path) -> tuple[float, float]:
    checks, starts = [], []
    for _ in range(runs):
        t0 = time.monotonic()
        check = subprocess.run(
            [sys.executable, "-m", "edge_broker", "check", "--config", str(conf)],
            cwd=root,
            capture_output=True,
            text=True,
        )
        checks.append(time.monotonic() - t0)
        if check.returncode != 0:
            raise RuntimeError(check.stderr)
        t0 = time.monotonic()
        broker = start(conf, port, root)
        starts.append(time.monotonic() - t0)
        stop_process(broker)
    return min(checks), min(starts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--root", type=Path, default=ROOT, help="checkout whose broker to run")
    args = ap.parse_args()
    print(f"broker from {args.root}; minimum of {args.runs} runs")
    print("| state | log size | check | run until listening | together |")
    print("|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for label, messages in (("empty", 0), (f"{args.messages:,} queued", args.messages)):
            work = Path(tmp) / str(messages)
            work.mkdir()
            port = free_port()
            conf = work / "edge.toml"
            conf.write_text(config(work / "state", port))
            if messages:
                fill(conf, port, messages, args.payload, args.root)
            log = work / "state" / "broker.log"
            size = log.stat().st_size if log.exists() else 0
            check, run = timings(conf, port, args.runs, args.root)
            print(
                f"| {label} | {size / 1e6:.1f} MB | {check:.2f} s | {run:.2f} s | "
                f"{check + run:.2f} s |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
