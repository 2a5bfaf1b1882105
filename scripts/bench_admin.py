"""What the admin API costs: RSS with ``[admin]`` enabled and nobody watching (against the same
broker without it), the per-message cost with it enabled (a QoS 0 publish loop, CPU seconds of
the broker per message, side by side), and how long API calls take with ``--clients`` clients
connected (each subscribed, some retained messages).

    .venv/bin/python scripts/bench_admin.py [--clients 2000] [--calls 50] [--messages 20000]

Prints one line per figure; docs/admin-api.md "Measured" quotes them. Besides the answer
times (wall clock, which a loaded machine stretches) it prints the broker's CPU time per call,
which is what an idle core would need.
"""

from __future__ import annotations

import argparse
import http.client
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_brokers import ONE_SOURCE, Broker, free_port, start_edge  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connack,
    Connect,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)

LIMITS = {
    "connect_rate": 100_000,
    "connect_burst": 100_000,
    "max_connections": 10_000,
    **ONE_SOURCE,
}


def start(admin: bool) -> tuple[Broker, int]:
    workdir = Path(tempfile.mkdtemp(prefix="bench-admin-"))
    port = free_port()
    extra = ""
    if admin:
        users = workdir / "admin-users"
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edge_broker",
                "admin",
                "add",
                str(users),
                "bench",
                "--role",
                "operator",
                "--password-stdin",
            ],
            input=b"bench-password",
            check=True,
            capture_output=True,
        )
        extra = f'[admin]\nenabled = true\nport = {port}\nusers_file = "{users}"\n'
    return start_edge(workdir, extra, limits=LIMITS, module="edge_broker"), port


def connect(port: int, client_id: str, topic: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(encode(Connect(5, client_id, True, 0), 5))
    sock.sendall(encode(Subscribe(1, (Subscription(topic, 0),)), 5))
    reader = PacketReader(side="client", protocol_level=5)
    got: list[object] = []
    while not any(isinstance(p, Suback) for p in got):
        got += reader.feed(sock.recv(4096))
    assert isinstance(got[0], Connack) and got[0].reason_code == 0
    return sock


def login(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"user": "bench", "password": "bench-password"})
    conn.request("POST", "/api/v1/login", body, {"Content-Type": "application/json"})
    response = conn.getresponse()
    response.read()
    assert response.status == 200, response.status
    return response.getheader("Set-Cookie", "").split(";", 1)[0]


def timed_calls(port: int, cookie: str, path: str, calls: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    took = []
    for _ in range(calls):
        started = time.perf_counter()
        conn.request("GET", path, headers={"Cookie": cookie})
        response = conn.getresponse()
        response.read()
        took.append((time.perf_counter() - started) * 1000)
        assert response.status == 200, (path, response.status)
    conn.close()
    return took


def publish_cpu(broker: Broker, messages: int) -> float:
    """Broker CPU microseconds per QoS 0 publish routed to one subscriber."""
    sub = connect(broker.port, "bench-sub", "bench/t")
    pub = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    pub.sendall(encode(Connect(5, "bench-pub", True, 0), 5))
    reader = PacketReader(side="client", protocol_level=5)
    while not reader.feed(pub.recv(4096)):
        pass
    packet = encode(Publish("bench/t", b"x" * 32, 0, False), 5)
    before = broker.cpu_seconds()
    batch = packet * 100
    for _ in range(messages // 100):
        pub.sendall(batch)
    received = 0
    sub_reader = PacketReader(side="client", protocol_level=5)
    while received < messages:
        received += len(sub_reader.feed(sub.recv(1 << 16)))
    spent = broker.cpu_seconds() - before
    pub.close()
    sub.close()
    return spent / messages * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20000)
    args = parser.parse_args()
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one socket per client here

    rss = {}
    cpu = {}
    for admin in (False, True):
        broker, _ = start(admin)
        try:
            time.sleep(3)  # settle after start
            rss[admin] = broker.rss_kib()
            cpu[admin] = publish_cpu(broker, args.messages)
        finally:
            broker.stop()
    print(
        f"idle RSS: {rss[False] / 1024:.1f} MiB without [admin], {rss[True] / 1024:.1f} MiB "
        f"with it (+{(rss[True] - rss[False]) / 1024:.2f} MiB)"
    )
    print(
        f"broker CPU per QoS 0 publish ({args.messages} messages, one subscriber): "
        f"{cpu[False]:.1f} us without [admin], {cpu[True]:.1f} us with it, nobody watching"
    )

    broker, admin_port = start(True)
    sockets = []
    try:
        for i in range(args.clients):
            sockets.append(connect(broker.port, f"dev-{i:05d}", f"site/dev-{i:05d}/cmd"))
        retained = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        retained.sendall(encode(Connect(5, "retainer", True, 0), 5))
        for i in range(200):
            retained.sendall(encode(Publish(f"site/dev-{i:05d}/state", b"ok", 0, True), 5))
        time.sleep(1)
        cookie = login(admin_port)
        print(f"with {args.clients} clients connected ({args.calls} calls each, ms):")
        for path in (
            "/api/v1/overview",
            "/api/v1/clients?limit=100",
            "/api/v1/clients?id=dev-01*&limit=100",
            f"/api/v1/clients/dev-{args.clients // 2:05d}",
            "/api/v1/sessions",
            "/api/v1/subscriptions",
            "/api/v1/retained?limit=100",
            "/api/v1/denials",
        ):
            cpu_before = broker.cpu_seconds()
            took = timed_calls(admin_port, cookie, path, args.calls)
            cpu_ms = (broker.cpu_seconds() - cpu_before) / args.calls * 1000
            took.sort()
            p95 = took[int(len(took) * 0.95) - 1]
            print(
                f"  GET {path:<40} median {statistics.median(took):6.1f}  p95 {p95:6.1f}  "
                f"max {took[-1]:6.1f}  broker CPU per call {cpu_ms:5.1f}"
            )
    finally:
        for sock in sockets:
            sock.close()
        broker.stop()


if __name__ == "__main__":
    main()
