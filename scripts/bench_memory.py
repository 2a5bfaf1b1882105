"""Issue 16: what the broker's memory costs per idle client, per subscription and per retained
message (RSS of the broker process, default limits, persistence off).

Starts ``python -m edge_broker run``, then: ``--clients`` idle MQTT 5 clients (each CONNECT
answered), ``--subs`` subscriptions spread over them, ``--retained`` retained messages of
``--payload`` bytes; after each step the RSS growth divided by the count. The figures go to
docs/limits-memory.md and the README.

    .venv/bin/python scripts/bench_memory.py [--clients 1000] [--subs 10000] [--retained 10000]
"""

from __future__ import annotations

import argparse
import gc
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench_brokers import ONE_SOURCE, Broker, start_edge  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connack,
    Connect,
    Pingreq,
    Pingresp,
    Publish,
    Suback,
    Subscribe,
    Subscription,
)


def start() -> Broker:
    return start_edge(
        Path(tempfile.mkdtemp(prefix="bench-memory-")),
        limits={"connect_rate": 100_000, "connect_burst": 100_000, **ONE_SOURCE},
        module="edge_broker",  # as docs/limits-memory.md's figures were taken
    )


class Client:
    def __init__(self, port: int, client_id: str) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.reader = PacketReader(side="client", protocol_level=5)
        self.pending: list[object] = []
        self.sock.sendall(encode(Connect(5, client_id, True, 0), 5))

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


def settle(broker: Broker) -> int:
    gc.collect()
    time.sleep(1.0)
    return broker.rss_kib()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--subs", type=int, default=10_000)
    ap.add_argument("--retained", type=int, default=10_000)
    ap.add_argument("--payload", type=int, default=100)
    args = ap.parse_args()
    broker = start()
    try:
        base = settle(broker)
        clients = []
        for i in range(args.clients):
            c = Client(broker.port, f"mem-{i}")
            c.expect(Connack)
            clients.append(c)
        with_clients = settle(broker)
        per_client = args.subs // max(1, args.clients)
        if per_client:  # a SUBSCRIBE without a filter is a protocol error: none then
            for i, c in enumerate(clients):
                subs = tuple(Subscription(f"site/{i}/dev/{k}/+", 1) for k in range(per_client))
                c.sock.sendall(encode(Subscribe(1, subs), 5))
            for c in clients:
                c.expect(Suback)
        with_subs = settle(broker)
        payload = b"r" * args.payload
        for i in range(args.retained):  # spread over the clients: max_retained_per_client
            pub = clients[i % len(clients)]
            pub.sock.sendall(encode(Publish(f"retained/{i % 100}/{i}", payload, 0, True), 5))
        for c in clients[: args.retained]:
            c.sock.sendall(encode(Pingreq(), 5))
            c.expect(Pingresp)
        with_retained = settle(broker)
        subs = per_client * len(clients)
        print("| measure | RSS growth | per item |")
        print("|---|---:|---:|")
        print(f"| broker at start | {base / 1024:.1f} MiB | |")
        print(
            f"| {args.clients:,} idle clients | {(with_clients - base) / 1024:.1f} MiB | "
            f"{(with_clients - base) * 1024 / args.clients / 1024:.1f} KiB per client |"
        )
        print(
            f"| {subs:,} subscriptions | {(with_subs - with_clients) / 1024:.1f} MiB | "
            f"{(with_subs - with_clients) * 1024 / max(1, subs):.0f} B per subscription |"
        )
        print(
            f"| {args.retained:,} retained messages of {args.payload} B | "
            f"{(with_retained - with_subs) / 1024:.1f} MiB | "
            f"{(with_retained - with_subs) * 1024 / max(1, args.retained):.0f} B per message |"
        )
        for c in clients:
            c.sock.close()
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
