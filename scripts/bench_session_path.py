"""CPU per delivered message through the broker's connection path, in one process.

``scripts/bench`` measures the broker over sockets against other brokers; its figures move by
±10 % with the load of a shared machine. This one feeds encoded PUBLISH packets straight into
``Connection.data_received`` of a real ``Broker`` (no sockets: in-memory transports that count
and drop what the broker writes) and reads ``time.process_time``, so two versions of the code
can be compared run for run on the same machine::

    python scripts/bench_session_path.py                 # this tree
    cd /other/tree && python /this/tree/scripts/bench_session_path.py   # another tree

It imports ``edge_broker`` from the working directory (the tree to measure). Prints the best of
``--repeat`` runs per scenario in µs per delivered message.

``--policy`` applies the policies of ``scripts/bench`` (anonymous by default): ``gated`` (every
client logs in with a password from a ``mosquitto_passwd`` file, a permission set with a DENY
rule, a site ACL with an egress deny rule) and ``durable`` (``gated`` plus ``[persistence]
durability = "interval"`` and a persistent subscriber; only the QoS 1 round trip runs).
``--only`` picks one scenario (for instruction counts under callgrind: N2 minus N1 messages).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.getcwd())
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

from bench_brokers import BENCH_PASSWORD, BENCH_USER, edge_gated  # noqa: E402

from edge_broker.broker.connection import Connection  # noqa: E402
from edge_broker.broker.server import Broker  # noqa: E402
from edge_broker.config import Config, loads_config  # noqa: E402
from edge_broker.mqtt.codec import encode  # noqa: E402
from edge_broker.mqtt.packets import Connect, Subscribe, Subscription  # noqa: E402


class SinkTransport(asyncio.Transport):
    """Counts what the broker writes and drops it."""

    def __init__(self) -> None:
        super().__init__()
        self.written = 0

    def write(self, data: Any) -> None:
        self.written += len(data)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0  # everything written is gone at once (Connection.flush asks, issue 16)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 40000), "sockname": ("127.0.0.1", 1883)}.get(
            name, default
        )


async def _settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


class KeepTransport(SinkTransport):
    """Keeps what the broker writes, for a subscriber that acknowledges what it got."""

    def __init__(self) -> None:
        super().__init__()
        self.chunks: list[bytes] = []

    def write(self, data: Any) -> None:
        self.chunks.append(bytes(data))


def _publish(topic: bytes, payload: bytes, qos: int, packet_id: int, level: int) -> bytes:
    """A PUBLISH without properties, written here rather than by the codec of the tree being
    measured: the input costs every tree the same (instruction counts include it)."""
    body = len(topic).to_bytes(2, "big") + topic
    if qos:
        body += packet_id.to_bytes(2, "big")
    if level == 5:
        body += b"\x00"  # property length 0
    body += payload
    assert len(body) < 128, "one byte of Remaining Length"
    return bytes((0x30 | (qos << 1), len(body))) + body


def _pubacks(data: bytes) -> bytes:
    """A PUBACK (MQTT 3.1.1) for every QoS 1 PUBLISH in ``data``, a stream of whole packets."""
    acks = []
    i, end = 0, len(data)
    while i < end:
        header = data[i]
        length, shift, j = 0, 0, i + 1
        while True:
            byte = data[j]
            length |= (byte & 0x7F) << shift
            j += 1
            if byte < 0x80:
                break
            shift += 7
        if header >> 4 == 3 and header & 0x06:
            topic_len = (data[j] << 8) | data[j + 1]
            pid = j + 2 + topic_len
            acks.append(b"\x40\x02" + data[pid : pid + 2])
        i = j + length
    return b"".join(acks)


POLICIES = ("anonymous", "gated", "durable")


def make_config(policy: str, workdir: Path) -> Config:
    """The broker's configuration under ``policy`` (see the module docstring)."""
    listener, extra = edge_gated(workdir) if policy != "anonymous" else ("", "")
    if policy == "durable":
        extra += (
            f'[persistence]\nstate_dir = "{workdir / "state"}"\n'
            'durability = "interval"\ninterval_ms = 50\n'
        )
    return loads_config(
        f'[[listeners]]\nname = "bench"\nport = 1883\n{listener}[sys]\ninterval = 0\n{extra}'
    )


def make_broker(policy: str, workdir: Path) -> Broker:
    """A broker of its own for each run (a fresh state directory: nothing restored)."""
    broker = Broker(make_config(policy, Path(tempfile.mkdtemp(dir=workdir))))
    if broker.config.persistence.enabled:
        broker._open_persistence()  # what Broker.start does, without its listeners
    return broker


async def close_broker(broker: Broker) -> None:
    if broker.persistence is not None:
        await broker.persistence.aclose()


async def _connect(
    broker: Broker,
    client_id: str,
    level: int = 5,
    transport: SinkTransport | None = None,
    clean: bool = True,
) -> Connection:
    conn = Connection(broker, broker.config.listeners[0])
    conn.connection_made(transport or SinkTransport())
    login: dict[str, Any] = {}
    if broker.config.listeners[0].auth_methods != ("anonymous",):
        login = {"username": BENCH_USER, "password": BENCH_PASSWORD}
    conn.data_received(encode(Connect(level, client_id, clean, 0, **login), level))
    for _ in range(1000):  # a password login is checked off the loop
        await _settle()
        if conn.session is not None:
            return conn
        await asyncio.sleep(0.001)
    raise SystemExit(f"{client_id}: not connected")


async def round_trip(messages: int, policy: str, workdir: Path) -> float:
    """µs of CPU per message, 1→1 QoS 1 both ways with MQTT 3.1.1 (the socket bench's
    ``1to1-qos1``): a batch of 100 PUBLISH, then the subscriber acknowledges what it got
    until it has all of them, so most messages wait in its session queue behind the
    in-flight window, as over a socket.
    The time spent finding the packet ids to acknowledge is the bench's, not counted.
    Under ``durable`` the subscriber's session is persistent (clean session 0)."""
    broker = make_broker(policy, workdir)
    out = KeepTransport()
    sub = await _connect(broker, "sub", 4, out, clean=policy != "durable")
    sub.data_received(encode(Subscribe(1, (Subscription("bench/t", 1),)), 4))
    pub = await _connect(broker, "pub", 4)
    await _settle()
    out.chunks.clear()
    chunks = [
        b"".join(
            _publish(b"bench/t", b"x" * 64, 1, (i % 60000) + 1, 4)
            for i in range(start, start + 100)
        )
        for start in range(0, messages, 100)
    ]
    bench = 0.0
    acked = 0
    started = time.process_time()
    for data in chunks:
        pub.data_received(data)
        for _ in range(1000):  # until the subscriber has everything the batch sent it
            await asyncio.sleep(0)
            t = time.process_time()
            acks = _pubacks(b"".join(out.chunks))
            out.chunks.clear()
            bench += time.process_time() - t
            if not acks:
                break
            acked += len(acks) // 4
            sub.data_received(acks)
    await _settle()
    spent = time.process_time() - started - bench
    await close_broker(broker)
    if acked != messages:
        raise SystemExit(f"round trip: {acked} of {messages} messages delivered")
    return spent / messages * 1e6


async def scenario(subscribers: int, qos: int, messages: int, policy: str, workdir: Path) -> float:
    """µs of CPU per delivered message for one publisher and ``subscribers`` QoS 0 subscribers."""
    broker = make_broker(policy, workdir)
    subs = [await _connect(broker, f"sub{i}") for i in range(subscribers)]
    for conn in subs:
        conn.data_received(encode(Subscribe(1, (Subscription("bench/t", 0),)), 5))
    pub = await _connect(broker, "pub")
    await _settle()
    batch = 100
    chunks = []
    for start in range(0, messages, batch):
        data = b"".join(
            _publish(b"bench/t", b"x" * 64, qos, (i % 60000) + 1, 5)
            for i in range(start, start + batch)
        )
        chunks.append(data)
    started = time.process_time()
    for data in chunks:
        pub.data_received(data)
        await asyncio.sleep(0)  # the broker's write flush runs once per loop iteration
    await _settle()
    spent = time.process_time() - started
    await close_broker(broker)
    return spent / (messages * subscribers) * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--policy", choices=POLICIES, default="anonymous")
    ap.add_argument("--only", choices=("qos0", "qos1-in", "fanout", "round-trip"))
    args = ap.parse_args()
    cases = {
        "qos0": ("1→1 QoS 0", 1, 0, args.messages),
        "qos1-in": ("1→1 QoS 1 in", 1, 1, args.messages),
        "fanout": ("1→50 fan-out QoS 0", 50, 0, args.messages // 10),
    }
    wanted = [args.only] if args.only else [*cases, "round-trip"]
    if args.policy == "durable":  # a durable session matters to QoS 1 deliveries only
        wanted = [key for key in wanted if key == "round-trip"]
    workdir = Path(tempfile.mkdtemp(prefix="bench-session-path-"))
    try:
        print(f"| scenario ({args.policy}) | CPU µs per delivered message (best of runs) |")
        print("|---|---:|")
        for key in wanted:
            if key == "round-trip":
                name = "1→1 QoS 1 both ways, 3.1.1"
                runs = [round_trip(args.messages, args.policy, workdir) for _ in range(args.repeat)]
            else:
                name, subscribers, qos, messages = cases[key]
                runs = [
                    scenario(subscribers, qos, messages, args.policy, workdir)
                    for _ in range(args.repeat)
                ]
            best = min(asyncio.run(run) for run in runs)
            print(f"| {name} | {best:.2f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
