"""Issue 16: what the broker's memory costs per idle client, per subscription and per retained
message (RSS of the broker process, default limits, persistence off).

Starts ``python -m edge_broker run``, then: ``--clients`` idle MQTT 5 clients (each CONNECT
answered), ``--subs`` subscriptions spread over them, ``--retained`` retained messages of
``--payload`` bytes; after each step the RSS growth divided by the count. The figures go to
docs/limits-memory.md and the README.

    .venv/bin/python scripts/bench_memory.py [--clients 1000] [--subs 10000] [--retained 10000]

Issue 32 adds two views, each of this tree or of another one (``--root DIR``):

- ``--fresh``: the RSS of ``python -m edge_broker run`` on the embedded default configuration
  (an anonymous listener and the admin console with a one-time login; free ports here), how
  many modules it imported (``PYTHONPROFILEIMPORTTIME``) and which of the packages a default
  broker should not load it did load;
- ``--in-process N``: what N idle MQTT 3.1.1 clients (keep alive 300 s, one QoS 1 subscription
  each) cost the broker's own objects, by tracemalloc on the in-memory broker
  (tests/broker/engine_harness.py: no socket, no asyncio transport), with the largest lines.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import socket
import subprocess
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


LAZY = ("nacl", "json5", "cbor2", "tinydb")  # what a default broker should not import
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)\s*$", re.M)


def fresh(root: Path) -> int:
    """RSS (KiB) of ``root``'s ``python -m edge_broker run`` on the embedded default."""
    from procs import free_port, stop_process, wait_port

    work = Path(tempfile.mkdtemp(prefix="bench-fresh-"))
    port, admin = free_port(), free_port()
    conf = work / "edge.toml"
    conf.write_text(
        f'[[listeners]]\nname = "default"\nport = {port}\n'
        f"[admin]\nenabled = true\none_time_login = true\nport = {admin}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPROFILEIMPORTTIME"] = "1"
    with open(work / "broker.log", "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "edge_broker", "run", "--config", str(conf)],
            cwd=root,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_port(port, process=process)
        time.sleep(1.5)
        status = Path(f"/proc/{process.pid}/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    finally:
        stop_process(process)
    names = IMPORT_LINE.findall((work / "broker.log").read_text(errors="replace"))
    ours = sum(1 for n in names if n.startswith("edge_broker"))
    loaded = sorted({n.split(".")[0] for n in names} & set(LAZY)) or ["none"]
    print(
        f"| {root} | {rss / 1024:.1f} MiB | {len(names)} ({ours} edge_broker) | "
        f"{', '.join(loaded)} |"
    )
    return rss


IN_PROCESS = """
import gc, sys, tracemalloc
sys.path[:0] = [".", "tests/broker"]
from tests.broker.engine_harness import MemoryBroker
n, top = int(sys.argv[1]), int(sys.argv[2])
mb = MemoryBroker({"limits": {"connect_rate": 100000, "connect_burst": 100000}})
def idle(name):
    c = mb.client(4)
    c.connect(name, keep_alive=300)
    c.subscribe(name.replace("-", "/") + "/cmd", 1)
    c.reader = None  # the client side's own reader is not the broker's
    return c
warm = [idle(f"warm-{i}") for i in range(20)]  # the broker's own tables grow first
gc.collect()
tracemalloc.start()
before = tracemalloc.take_snapshot()
clients = [idle(f"idle-{i}") for i in range(n)]
gc.collect()
after = tracemalloc.take_snapshot()
# the harness (clients, in-memory transports) allocates in tests/
ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "*/tests/*")]
diff = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "lineno")
print(f"{sum(d.size_diff for d in diff) / n:.0f} B per idle client")
for d in diff[:top]:
    where = d.traceback[0]
    print(f"  {d.size_diff / n:6.0f} B  {where.filename.split('edge_broker/')[-1]}:{where.lineno}")
"""


def in_process(root: Path, n: int, top: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    print(f"{root}: ", end="", flush=True)
    subprocess.run(
        [sys.executable, "-c", IN_PROCESS, str(n), str(top)], cwd=root, env=env, check=True
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--subs", type=int, default=10_000)
    ap.add_argument("--retained", type=int, default=10_000)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--fresh", action="store_true", help="fresh RSS on the embedded default")
    ap.add_argument("--in-process", type=int, default=0, metavar="N", help="tracemalloc view")
    ap.add_argument("--top", type=int, default=15, help="lines shown by --in-process")
    ap.add_argument("--root", type=Path, action="append", help="tree(s) to measure")
    args = ap.parse_args()
    roots = args.root or [Path(__file__).resolve().parent.parent]
    if args.fresh or args.in_process:
        if args.fresh:
            print("| tree | fresh RSS | modules imported | of " + ", ".join(LAZY) + " |")
            print("|---|---:|---:|---|")
            for root in roots:
                fresh(root.resolve())
        for root in roots if args.in_process else []:
            in_process(root.resolve(), args.in_process, args.top)
        return 0
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
