"""scripts/bench: edge-broker, Mosquitto 2 and amqtt 0.12 side by side on this machine.

For each scenario and broker: delivered messages per second, broker CPU µs per delivered
message (utime+stime from /proc/<pid>/stat over the run), and the load generator's CPU (all its
processes, as a percentage of one core) to show it is not the bottleneck. Then 1,000 idle
clients and the broker's resident memory. Prints a Markdown table.

The persistent-session scenario (issue 17) runs QoS 1 into one persistent subscriber (clean
session 0) with edge-broker's store (``durability = "interval"``, 50 ms, and ``"sync"``) beside
Mosquitto with ``persistence true`` and ``autosave_interval 1`` (its counterpart of
``interval``), then kills each broker with SIGKILL right after acknowledged messages for an
offline subscriber and counts what a restart still delivers. It reuses the load and the kill
test of scripts/bench_persistence.py (``--persistent-messages 0`` skips it; amqtt has no
persistence to compare and is left out).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_brokers import start  # noqa: E402
from bench_load import Scenario, idle_connections, run  # noqa: E402
from bench_persistence import kill_loss, throughput  # noqa: E402

SCENARIOS = {
    "1to1-qos0": Scenario("1→1 QoS 0 64 B", 1, 1, 1, 0, False, 200_000),
    "1to1-qos1": Scenario("1→1 QoS 1 64 B", 1, 1, 1, 1, False, 60_000),
    "fanout-qos0": Scenario("1→50 fan-out QoS 0", 1, 50, 2, 0, False, 8_000),
    "wildcard-qos0": Scenario("4→4 `+` wildcard QoS 0", 4, 4, 2, 0, True, 40_000),
}
# amqtt is an order of magnitude slower: fewer messages keep its runs to seconds.
BROKER_SCALE = {
    "edge-broker": 1.0,
    "edge-broker+acl": 1.0,  # an egress deny rule the bench topics never meet (issue 21)
    "edge-broker+claims": 1.0,  # SMOKER claims enabled, no subscription reaches restricted/
    "mosquitto": 1.0,
    "amqtt": 0.1,
}
TARGET_NOTE = (
    "Targets: CPU per delivered message within 3x of Mosquitto and at least 4x below "
    "amqtt; < 40 MB RSS with 1,000 idle clients."
)
# The persistent-session scenario: bench_persistence.py modes per broker, with their labels.
PERSISTENT_MODES = {
    "edge-broker": (
        ("interval", 'durability = "interval" (50 ms)'),
        ("sync", 'durability = "sync"'),
    ),
    "mosquitto": (("mosquitto", "persistence true, autosave_interval 1"),),
}


def persistent_table(brokers: list[str], messages: int, kill_messages: int) -> list[str]:
    """Markdown rows: QoS 1 into one persistent subscriber (4 publishers, window 32), broker
    CPU per message, and what a kill -9 right after ``kill_messages`` acknowledged messages for
    an offline persistent subscriber loses."""
    base = Path(tempfile.mkdtemp(prefix="bench-persistent-"))
    rows = [
        f"| broker | store | msg/s | broker CPU µs/msg | lost on kill -9 (of {kill_messages:,}) |",
        "|---|---|---:|---:|---:|",
    ]
    try:
        for name in brokers:
            for mode, label in PERSISTENT_MODES.get(name, ()):
                rate, us, _ = throughput(base, mode, messages, 4, 32)
                acked, got = kill_loss(base, mode, kill_messages)
                rows.append(
                    f"| {name} | {label} | {rate:,.0f} | {us:.1f} | {max(0, acked - got):,} |"
                )
                print(rows[-1], file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    ap.add_argument(
        "--brokers",
        default="edge-broker,mosquitto,amqtt",
        help=f"any of {','.join(BROKER_SCALE)}",
    )
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--idle", type=int, default=1000, help="idle clients (0: skip)")
    ap.add_argument(
        "--persistent-messages",
        type=int,
        default=20_000,
        help="QoS 1 messages of the persistent-session scenario (scaled; 0: skip it)",
    )
    ap.add_argument(
        "--kill-messages",
        type=int,
        default=2_000,
        help="acknowledged messages before the kill -9 of the persistent-session scenario",
    )
    args = ap.parse_args()
    brokers = args.brokers.split(",")
    scenarios = [key for key in args.scenarios.split(",") if key]  # "": only the others
    rows: list[str] = []
    per_msg: dict[tuple[str, str], float] = {}
    for key in scenarios:
        scenario = SCENARIOS[key]
        for name in brokers:
            broker = start(name)
            try:
                r = run(scenario, broker.port, broker.cpu_seconds, args.scale * BROKER_SCALE[name])
            finally:
                broker.stop()
            per_msg[(key, name)] = r.us_per_msg
            lost = "" if r.delivered >= r.expected else f" (got {r.delivered}/{r.expected})"
            rows.append(
                f"| {scenario.name} | {name} | {r.rate:,.0f} | {r.us_per_msg:.1f} | "
                f"{r.broker_cpu / r.seconds * 100:.0f}% | {r.generator_cpu / r.seconds * 100:.0f}% "
                f"| {r.delivered:,}{lost} |"
            )
            print(rows[-1], file=sys.stderr, flush=True)
    print(
        f"\nMachine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}"
    )
    if rows:
        print()
        print(
            "| scenario | broker | delivered msg/s | broker CPU µs/msg | broker CPU | "
            "generator CPU | delivered |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        print("\n".join(rows))
    if rows and "edge-broker" in brokers:
        print()
        print("| scenario | edge ÷ mosquitto (CPU/msg) | amqtt ÷ edge (CPU/msg) |")
        print("|---|---:|---:|")
        for key in scenarios:
            edge = per_msg.get((key, "edge-broker"))
            mosq = per_msg.get((key, "mosquitto"))
            amq = per_msg.get((key, "amqtt"))
            ratio_m = f"{edge / mosq:.2f}x" if edge and mosq else "-"
            ratio_a = f"{amq / edge:.2f}x" if edge and amq else "-"
            print(f"| {SCENARIOS[key].name} | {ratio_m} | {ratio_a} |")
    persistent = int(args.persistent_messages * args.scale) // 4 * 4
    if persistent:
        print()
        print(
            "Persistent session: QoS 1 64 B into one persistent subscriber (clean session 0), "
            "4 publishers"
        )
        print()
        print("\n".join(persistent_table(brokers, persistent, args.kill_messages)))
    if args.idle:
        print()
        print(f"| broker | RSS before | RSS with {args.idle} idle clients | per client |")
        print("|---|---:|---:|---:|")
        for name in brokers:
            broker = start(name)
            try:
                before, after = idle_connections(broker.port, args.idle, broker.rss_kib)
            finally:
                broker.stop()
            print(
                f"| {name} | {before / 1024:.1f} MB | {after / 1024:.1f} MB | "
                f"{(after - before) / args.idle:.1f} KB |"
            )
    print()
    print(TARGET_NOTE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
