"""Issue 16: a QoS 1 burst to one online QoS 1 subscriber, under both ``[limits]
queue_overflow`` policies.

A paho publisher (1,000 messages in flight) sends ``--messages`` QoS 1 messages as fast as it
can to one topic; one paho subscriber (QoS 1) reads them. Prints, per policy: messages PUBACKed
to the publisher, delivered to the subscriber, lost (acknowledged but never delivered), the
broker's dropped counter, the time until the last delivery and the broker's peak RSS.

    .venv/bin/python scripts/bench_overload.py [--messages 20000] [--policies drop,backpressure]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_brokers import Broker, start_edge  # noqa: E402


def start(policy: str) -> Broker:
    return start_edge(
        Path(tempfile.mkdtemp(prefix="bench-overload-")),
        "[sys]\ninterval = 1\n",
        limits={"queue_overflow": policy},
        module="edge_broker",  # as docs/limits-memory.md's peak RSS was taken
    )


def run(policy: str, messages: int) -> dict[str, float]:
    broker = start(policy)
    peak = broker.rss_kib()
    stop_sampling = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop_sampling.wait(0.05):
            peak = max(peak, broker.rss_kib())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    received: set[int] = set()
    last_rx = [time.monotonic()]
    dropped = [-1]
    sub = paho.Client(CallbackAPIVersion.VERSION2, client_id="overload-sub")

    def on_message(_c: object, _u: object, msg: paho.MQTTMessage) -> None:
        if msg.topic.startswith("$SYS"):
            dropped[0] = int(msg.payload)
            return
        received.add(int.from_bytes(msg.payload[:4], "big"))
        last_rx[0] = time.monotonic()

    sub.on_message = on_message
    sub.connect("127.0.0.1", broker.port)
    sub.subscribe("overload/t", 1)
    sub.loop_start()
    pub = paho.Client(CallbackAPIVersion.VERSION2, client_id="overload-pub")
    pub.max_inflight_messages_set(1000)
    pub.max_queued_messages_set(0)
    acked = [0]

    def on_publish(*_: object) -> None:
        acked[0] += 1

    pub.on_publish = on_publish
    pub.connect("127.0.0.1", broker.port)
    pub.loop_start()
    time.sleep(0.5)
    start_t = time.monotonic()
    payload = b"x" * 60
    for i in range(messages):
        pub.publish("overload/t", i.to_bytes(4, "big") + payload, 1)
    deadline = time.monotonic() + 120
    while acked[0] < messages and time.monotonic() < deadline:
        time.sleep(0.05)
    while time.monotonic() - last_rx[0] < 3 and len(received) < messages:
        time.sleep(0.05)
    elapsed = last_rx[0] - start_t
    sub.subscribe("$SYS/broker/publish/messages/dropped", 0)
    time.sleep(1.5)
    stop_sampling.set()
    pub.loop_stop()
    sub.loop_stop()
    pub.disconnect()
    sub.disconnect()
    broker.stop()
    return {
        "acked": acked[0],
        "delivered": len(received),
        "lost": acked[0] - len(received),
        "dropped": dropped[0],
        "seconds": elapsed,
        "peak_rss_mib": peak / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--messages", type=int, default=20_000)
    ap.add_argument("--policies", default="drop,backpressure")
    args = ap.parse_args()
    print(
        "| queue_overflow | PUBACKed | delivered | lost | $SYS dropped | seconds | peak RSS MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for policy in args.policies.split(","):
        r = run(policy, args.messages)
        print(
            f"| {policy} | {r['acked']:,.0f} | {r['delivered']:,.0f} | {r['lost']:,.0f} | "
            f"{r['dropped']:,.0f} | {r['seconds']:.1f} | {r['peak_rss_mib']:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
