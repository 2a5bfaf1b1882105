"""CPU per bridged QoS 1 message in one process, without sockets.

``scripts/bench_bridge.py`` measures a gateway over loopback beside a Mosquitto gateway; on a
shared machine its figures move with the load. This one runs the whole bridged path of a real
``Broker`` in process: a device's MQTT 5 QoS 1 PUBLISHes are fed to ``Connection.data_received``
(an in-memory transport keeps the PUBACKs the broker writes), the broker routes them to a bridge
that maps ``bench/#`` to ``site/`` at QoS 1, and the bridge's link talks to an in-memory remote
that answers CONNECT with CONNACK and every QoS 1 PUBLISH with a PUBACK on the link's next read.
So everything the gateway does per bridged message runs (decode, policy, route, the bridge queue
and its log, the uplink PUBLISH, the remote's PUBACK, the local PUBACK), without the kernel::

    python scripts/bench_bridge_path.py [--durability none|sync|interval] [--messages 5000]
    cd /other/tree && python /this/tree/scripts/bench_bridge_path.py   # another tree

It imports ``edge_broker`` from the working directory (the tree to measure). ``none`` runs
without ``[persistence]`` (the bridge queue in memory, as ``scripts/bench_bridge.py`` with
durability ``none``). The device sends 200 PUBLISHes per batch (the socket bench's window) and
the next batch once all of them are acknowledged. Prints µs of CPU per bridged message (best of
``--repeat``) and, with a durable queue, messages per fsync of the bridge queue log.

For instruction counts (steady on a shared machine, docs/performance.md), run it under
``valgrind --tool=callgrind`` with ``PYTHONHASHSEED=0 --repeat 1`` at two message counts and
divide the difference by the difference of the counts. The in-memory remote's own parsing is
counted too (the same in every tree: a few hundred instructions per message).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_session_path import SinkTransport, _pubacks  # noqa: E402

import edge_broker.bridge.transport as bridge_transport  # noqa: E402
from edge_broker.bridge.service import Bridges  # noqa: E402
from edge_broker.broker.connection import Connection  # noqa: E402
from edge_broker.broker.server import Broker  # noqa: E402
from edge_broker.config import parse_config  # noqa: E402
from edge_broker.mqtt.codec import encode  # noqa: E402
from edge_broker.mqtt.packets import Connect, Publish  # noqa: E402

CONNACK_5 = b"\x20\x03\x00\x00\x00"  # MQTT 5 CONNACK: no session, success, no properties


class Goal:
    """Wakes the bench once both counts reached their targets (no polling: the loop runs only
    the broker's own work while the bench waits)."""

    def __init__(self) -> None:
        self.acked_remote = 0  # PUBACKs the remote sent the link
        self.acked_local = 0  # bytes the broker wrote to the device (4 per PUBACK)
        self.want_remote = 0
        self.want_local = 0
        self.future: asyncio.Future[None] | None = None

    def check(self) -> None:
        future = self.future
        if (
            future is not None
            and self.acked_remote >= self.want_remote
            and self.acked_local >= self.want_local
        ):
            self.future = None
            future.set_result(None)

    async def reach(self, remote: int, local: int) -> None:
        self.want_remote, self.want_local = remote, local
        self.future = asyncio.get_running_loop().create_future()
        self.check()
        await asyncio.wait_for(self.future, 60)


class CountTransport(SinkTransport):
    """The device's transport: counts the bytes of the PUBACKs the broker writes."""

    def __init__(self, goal: Goal) -> None:
        super().__init__()
        self.goal = goal

    def write(self, data: Any) -> None:
        self.goal.acked_local += len(data)
        self.goal.check()


class MemoryRemote:
    """The remote broker as the link sees it (``bridge/transport.py`` ``Stream``): CONNACK
    for the CONNECT, a PUBACK for every QoS 1 PUBLISH, read by the link's next ``read``."""

    def __init__(self, goal: Goal) -> None:
        self.goal = goal
        self.inbox: list[bytes] = []
        self.waiter: asyncio.Future[None] | None = None
        self.connected = False
        self.acked = 0

    async def read(self) -> bytes:
        while not self.inbox:
            self.waiter = asyncio.get_running_loop().create_future()
            await self.waiter
        data = b"".join(self.inbox)
        self.inbox.clear()
        return data

    def write(self, data: bytes) -> None:
        if not self.connected:
            self.connected = True
            answer = CONNACK_5
        else:
            answer = _pubacks(data)
            self.goal.acked_remote += len(answer) // 4
        if answer:
            self.inbox.append(answer)
            waiter, self.waiter = self.waiter, None
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def drain(self) -> None:
        pass

    def close(self) -> None:
        pass


def config(durability: str, state_dir: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "sys": {"interval": 0},
        "limits": {"max_queued_messages": 1_000_000},
        "bridges": [
            {
                "name": "cloud",
                "address": "127.0.0.1",
                "port": 1,
                "protocol": "5",
                "drain_rate": 0,
                "max_inflight": 200,
                "queue_max_messages": 1_000_000,
                "queue_max_bytes": 1 << 30,
                "topics": [
                    {"direction": "out", "local": "bench/#", "remote_prefix": "site/", "qos": 1}
                ],
            }
        ],
    }
    if durability != "none":
        data["persistence"] = {"state_dir": state_dir, "durability": durability}
    return data


async def _until(check: Any, limit: int = 100_000) -> None:
    for _ in range(limit):
        if check():
            return
        await asyncio.sleep(0)
    raise SystemExit("the bridged messages did not arrive (the bench is broken)")


async def run(durability: str, messages: int, batch: int = 200) -> tuple[float, float | None]:
    """(µs of CPU per bridged message, messages per fsync of the bridge log or None)."""
    state_dir = tempfile.mkdtemp(prefix="bench-bridge-path-")
    goal = Goal()
    remote = MemoryRemote(goal)

    async def open_stream(_config: Any) -> MemoryRemote:
        return remote

    bridge_transport.open_stream = open_stream  # type: ignore[assignment]
    broker = Broker(parse_config(config(durability, state_dir)))
    try:
        if broker.config.persistence.enabled:
            broker._open_persistence()
        bridges = broker.bridges = Bridges.open(broker)
        bridges.start()
        link = bridges.bridges[0].link
        await _until(lambda: link.stats.connected)
        out = CountTransport(goal)
        pub = Connection(broker, broker.config.listeners[0])
        pub.connection_made(out)
        pub.data_received(encode(Connect(5, "bench-pub", True, 0), 5))
        await goal.reach(0, 1)
        goal.acked_local = 0
        chunks = [
            b"".join(
                encode(Publish(f"bench/{i % 8}", b"x" * 64, 1, packet_id=i % 60000 + 1), 5)
                for i in range(start, min(start + batch, messages))
            )
            for start in range(0, messages, batch)
        ]
        started = time.process_time()
        for n, data in enumerate(chunks):
            pub.data_received(data)
            want = min((n + 1) * batch, messages)
            await goal.reach(want, 4 * want)
        spent = time.process_time() - started
        per_fsync = None
        store = bridges.bridges[0].store
        if getattr(store, "durable", False):
            stats = store.log.stats()
            per_fsync = messages / stats.fsyncs if stats.fsyncs else None
        await bridges.close()
        if broker.persistence is not None:
            await broker.persistence.aclose()
        return spent / messages * 1e6, per_fsync
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--durability", choices=("none", "interval", "sync"), default="none")
    ap.add_argument("--messages", type=int, default=5_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch", type=int, default=200, help="PUBLISHes per batch (the window)")
    args = ap.parse_args()
    results = [
        asyncio.run(run(args.durability, args.messages, args.batch)) for _ in range(args.repeat)
    ]
    best = min(results)
    fsync = f", {best[1]:.1f} messages per fsync" if best[1] is not None else ""
    print(
        f"bridged QoS 1, durability {args.durability}: {best[0]:.2f} µs CPU per message "
        f"(best of {args.repeat}, {args.messages} messages, batches of {args.batch}){fsync}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
