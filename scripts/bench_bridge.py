#!/usr/bin/env python3
"""Bridge benchmark (issue 19): bridged messages per second and CPU per bridged message, an
edge-broker gateway bridging to Mosquitto beside a Mosquitto gateway bridging to the same
Mosquitto (its own ``connection`` bridge), one run on loopback; and the broker's RSS with a
large outbound backlog (``--backlog``).

    PYTHONPATH=$PWD .venv/bin/python scripts/bench_bridge.py [--messages 20000] [--payload 64]
    PYTHONPATH=$PWD .venv/bin/python scripts/bench_bridge.py --backlog 100000 [--durable]

``BENCH_PROFILE=/tmp/gw.prof`` runs the edge-broker gateway under cProfile (written at its exit).

Throughput: one publisher sends ``--messages`` QoS 1 PUBLISHes (window of 200 unacknowledged)
to the gateway on ``bench/<n % 8>``; the gateway bridges ``bench/#`` at QoS 1 to the cloud
Mosquitto, where a QoS 0 subscriber counts arrivals. Bridged msgs/s = messages / (first publish
→ last arrival); CPU per message = the gateway process's user+system CPU time over the run /
messages. Backlog: the cloud is down; the publisher queues ``--backlog`` messages; the gateway's
VmRSS before and after is printed (``--durable``: with ``[persistence]``, the queue on disk).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_brokers import tree_python  # noqa: E402
from procs import Mosquitto, cpu_seconds, free_port, rss_kib, stop_process, wait_port  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import (  # noqa: E402
    Connect,
    Puback,
    Publish,
    Subscribe,
    Subscription,
)

ROOT = Path(__file__).resolve().parent.parent


def mosquitto(workdir: Path, name: str, port: int, extra: str = "") -> subprocess.Popen[bytes]:
    """Mosquitto as the tests start it, without their per-packet log (its CPU is measured)."""
    process = Mosquitto(workdir / name, extra, port, verbose=False).start().process
    assert process is not None
    return process


def edge_gateway(
    workdir: Path, port: int, cloud: int, durability: str, root: Path = ROOT
) -> subprocess.Popen[bytes]:
    """An edge-broker gateway from the source tree ``root``; ``durability``: "" (no
    ``[persistence]``: the bridge queue in memory) or the store's durability mode."""
    conf = workdir / "gw.toml"
    shutil.rmtree(workdir / "state", ignore_errors=True)
    persistence = (
        f'[persistence]\nstate_dir = "{workdir}/state"\ndurability = "{durability}"\n'
        if durability
        else ""
    )
    conf.write_text(f"""[[listeners]]
name = "tcp"
port = {port}

[limits]
max_queued_messages = 1000000

{persistence}
[[bridges]]
name = "cloud"
address = "127.0.0.1"
port = {cloud}
protocol = "5"
drain_rate = 0
max_inflight = 200
queue_max_messages = 1000000
queue_max_bytes = 1073741824
reconnect_min = 0.1
reconnect_max = 0.5

[[bridges.topics]]
direction = "out"
local = "bench/#"
remote_prefix = "site/"
qos = 1
""")
    env = dict(os.environ, PYTHONPATH=str(root))
    profile = (
        ["-m", "cProfile", "-o", os.environ["BENCH_PROFILE"]]
        if os.environ.get("BENCH_PROFILE")
        else []
    )
    proc = subprocess.Popen(
        [tree_python(root), *profile, "-m", "edge_broker", "run", "--config", str(conf)],
        stdout=open(workdir / "gw.log", "wb"),
        stderr=subprocess.STDOUT,
        env=env,
        cwd=root,
    )
    wait_port(port, process=proc)
    return proc


async def publisher(port: int, count: int, payload: bytes, window: int = 200) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(Connect(5, "bench-pub", True, 60), 5))
    packets = PacketReader(side="client", protocol_level=5)
    while not packets.feed(await reader.read(65536)):
        pass
    free = asyncio.Semaphore(window)

    async def acks() -> None:
        done = 0
        while done < count:
            data = await reader.read(65536)
            if not data:
                raise RuntimeError("the gateway closed the publisher's connection")
            for packet in packets.feed(data):
                if isinstance(packet, Puback):
                    done += 1
                    free.release()

    ack_task = asyncio.create_task(acks())
    for n in range(count):
        await free.acquire()
        writer.write(encode(Publish(f"bench/{n % 8}", payload, 1, False, False, n % 65535 + 1), 5))
        if n % 64 == 0:
            await writer.drain()
    await writer.drain()
    await ack_task
    writer.close()


async def counter(port: int, topic: str, count: int, ready: asyncio.Event) -> float:
    """Subscribe at QoS 0; return the time the ``count``-th message arrived."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(encode(Connect(5, f"bench-sink-{os.getpid()}", True, 60), 5))
    writer.write(encode(Subscribe(1, (Subscription(topic, 0),)), 5))
    packets = PacketReader(side="client", protocol_level=5, max_packet_size=1 << 20)
    got = 0
    subscribed = False
    while got < count:
        data = await reader.read(1 << 16)
        if not data:
            raise RuntimeError("the cloud closed the counter's connection")
        for packet in packets.feed(data):
            if isinstance(packet, Publish):
                got += 1
            elif not subscribed and type(packet).__name__ == "Suback":
                subscribed = True
                ready.set()
    writer.close()
    return time.monotonic()


async def measure(
    gw_port: int, cloud_port: int, pid: int, count: int, payload: bytes
) -> tuple[float, float]:
    ready = asyncio.Event()
    sink = asyncio.create_task(counter(cloud_port, "site/#", count, ready))
    await asyncio.wait_for(ready.wait(), 10)
    await asyncio.sleep(1.0)  # the gateway's bridge is connected and subscribed
    cpu0 = cpu_seconds(pid)
    t0 = time.monotonic()
    await publisher(gw_port, count, payload)
    t1 = await asyncio.wait_for(sink, 600)
    cpu = cpu_seconds(pid) - cpu0
    return count / (t1 - t0), cpu / count * 1e6


# the bridge queue's log (what a bridged message's PUBACK waits for with ``sync``)
STORE_STATS_RE = re.compile(r"bridge queue log \S+ closed: (\d+) appends, (\d+) fsyncs")


def run_gateway(
    work: Path, root: Path | None, durability: str, cloud_port: int, args: Any, payload: bytes
) -> tuple[float, float, str]:
    """One gateway bridging to the cloud Mosquitto on ``cloud_port``: an edge-broker from
    ``root`` with the store's ``durability`` ("": no store, the queue in memory), or (root
    None) a Mosquitto gateway. (bridged msg/s, gateway CPU µs per message, messages per fsync
    of the edge-broker bridge queue's log or "")."""
    gw_port = free_port()
    if root is None:
        gw = mosquitto(
            work,
            "gateway",
            gw_port,
            f"connection cloud\naddress 127.0.0.1:{cloud_port}\n"
            'topic bench/# out 1 "" site/\ncleansession false\nmax_inflight_messages 200\n',
        )
    else:
        gw = edge_gateway(work, gw_port, cloud_port, durability, root)
    try:
        rate, cpu_us = asyncio.run(
            measure(gw_port, cloud_port, gw.pid, args.bridge_messages, payload)
        )
    finally:
        stop_process(gw)
    found = STORE_STATS_RE.findall((work / "gw.log").read_text(errors="replace")) if root else []
    fsyncs = sum(int(f) for _, f in found)
    per_fsync = f"{args.bridge_messages / fsyncs:.1f}" if durability == "sync" and fsyncs else ""
    return rate, cpu_us, per_fsync


def throughput(args: argparse.Namespace, work: Path) -> None:
    payload = os.urandom(args.payload)
    cloud_port = free_port()
    cloud = mosquitto(work, "cloud", cloud_port)
    results = []
    try:
        for name in ("edge-broker", "mosquitto"):
            gw_port = free_port()
            if name == "edge-broker":
                gw = edge_gateway(work, gw_port, cloud_port, "sync" if args.durable else "")
            else:
                gw = mosquitto(
                    work,
                    "gateway",
                    gw_port,
                    f"connection cloud\naddress 127.0.0.1:{cloud_port}\n"
                    'topic bench/# out 1 "" site/\ncleansession false\n'
                    f"max_inflight_messages 200\n",
                )
            try:
                rate, cpu_us = asyncio.run(
                    measure(gw_port, cloud_port, gw.pid, args.messages, payload)
                )
            finally:
                stop_process(gw)
            results.append((name, rate, cpu_us))
    finally:
        stop_process(cloud)
    print(
        f"bridged {args.messages} QoS 1 messages of {args.payload} bytes to Mosquitto over "
        f"loopback ({'durable queue, sync' if args.durable else 'memory queue'} for edge-broker):"
    )
    for name, rate, cpu_us in results:
        print(
            f"  {name:12} {rate:10.0f} msgs/s   {cpu_us:8.1f} us CPU per bridged message (gateway "
            "process)"
        )


def backlog(args: argparse.Namespace, work: Path) -> None:
    gw_port, cloud_port = free_port(), free_port()  # nothing listens on cloud_port
    gw = edge_gateway(work, gw_port, cloud_port, "sync" if args.durable else "")
    try:
        time.sleep(1.0)
        before = rss_kib(gw.pid) / 1024
        t0 = time.monotonic()
        asyncio.run(publisher(gw_port, args.backlog, os.urandom(args.payload)))
        took = time.monotonic() - t0
        time.sleep(1.0)
        after = rss_kib(gw.pid) / 1024
    finally:
        stop_process(gw)
    print(
        f"backlog of {args.backlog} messages of {args.payload} bytes "
        f"({'durable queue' if args.durable else 'memory queue'}), queued in {took:.1f} s: "
        f"VmRSS {before:.1f} MiB before, {after:.1f} MiB after "
        f"({(after - before) * 1024 * 1024 / args.backlog:.0f} bytes per queued message)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--payload", type=int, default=64)
    parser.add_argument(
        "--backlog", type=int, default=0, help="measure RSS with this many queued messages"
    )
    parser.add_argument(
        "--durable", action="store_true", help="edge-broker with [persistence] (sync)"
    )
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    try:
        if args.backlog:
            backlog(args, work)
        else:
            throughput(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
