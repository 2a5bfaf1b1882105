"""scripts/bench: edge-broker source trees and Mosquitto 2 (and amqtt 0.12) side by side, one run.

Every figure is broker CPU (utime+stime from /proc/<pid>/stat) per delivered message, never wall
time: the machine may be shared. Each broker starts fresh for each measurement; rounds are
interleaved (round 1 of every broker, then round 2 …) so a change in the machine's load falls on
all of them alike, and the tables give the median with the spread (min–max) over ``--rounds``.
The load generator's own CPU (all its processes, % of one core) is printed beside each row to
show it is not the bottleneck; the load average is printed at the start and the end.

Policies (``--policies``), applied alike to every broker:

- ``anonymous``: no login, no policy.
- ``gated``: password login (one ``mosquitto_passwd`` file for both), permissions granting
  bench/# and idle/# only (edge-broker: a permission set with a DENY rule and ``unassigned =
  "deny"``; Mosquitto: its ACL file), and on edge-broker a site ACL with an egress deny rule.
- ``durable``: ``gated`` plus persistent sessions (subscribers connect with clean session 0):
  edge-broker ``[persistence] durability = "interval"`` (50 ms) and, as a second row,
  ``"sync"`` (``edge:sync``); Mosquitto ``persistence true``. Only the QoS 1 scenarios run.

Then the bridge (``--bridge-messages``): a device publishes QoS 1 to a gateway that bridges
``bench/#`` at QoS 1 to a cloud Mosquitto (scripts/bench_bridge.py), edge-broker with the queue
durability ``none`` and ``sync`` beside a Mosquitto gateway; and the idle memory
(``--idle``): fresh RSS of ``python -m edge_broker run`` (what the service runs) and per idle
client.

    scripts/bench [--edge before=/tmp/before,after=.] [--others mosquitto] [--rounds 3]
        [--policies anonymous,gated,durable] [--scenarios 1to1-qos0,...] [--scale 0.5]
        [--bridge-messages 20000] [--idle 1000] [--kill-messages 2000]

``--edge``: LABEL=PATH of each edge-broker source tree (``git worktree add /tmp/before main``
makes one). A tree with its own ``.venv`` runs under that interpreter, so the same code with
and without the optional ``speed`` extra (uvloop) can run side by side: a directory holding a
symlink to the code (``edge_broker``) and a ``.venv`` with uvloop installed is such a tree.
``BENCH_PROFILE=/tmp/x.prof`` runs edge-broker under cProfile (one run: use
``--rounds 1`` and a single tree).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_brokers import (  # noqa: E402
    BENCH_PASSWORD,
    BENCH_USER,
    Broker,
    edge_gated,
    mosquitto_gated,
    start_amqtt,
    start_edge,
    start_mosquitto,
)
from bench_load import Result, Scenario, idle_connections, run  # noqa: E402
from procs import stop_process  # noqa: E402

SCENARIOS = {
    "1to1-qos0": Scenario("1→1 QoS 0 64 B", 1, 1, 1, 0, False, 200_000),
    "1to1-qos1": Scenario("1→1 QoS 1 64 B", 1, 1, 1, 1, False, 60_000),
    "fanout-qos0": Scenario("1→50 fan-out QoS 0", 1, 50, 2, 0, False, 8_000),
    "wildcard-qos0": Scenario("4→4 `+` wildcard QoS 0", 4, 4, 2, 0, True, 40_000),
    "idle-qos0": Scenario("1,000 idle + 1→1 QoS 0", 1, 1, 1, 0, False, 200_000, idle=1000),
}
# amqtt is an order of magnitude slower: fewer messages keep its runs to seconds.
OTHER_SCALE = {"mosquitto": 1.0, "amqtt": 0.1}
STORE_STATS_RE = re.compile(r"store closed: (\d+) appends, (\d+) fsyncs")


@dataclass(frozen=True)
class Target:
    """One broker column: an edge-broker tree (``root``) or another broker (root None)."""

    label: str
    kind: str  # "edge", "mosquitto", "amqtt"
    root: Path | None = None
    durability: str = "interval"  # edge-broker under the durable policy


def start_target(target: Target, policy: str, workdir: Path) -> Broker:
    gated = policy in ("gated", "durable")
    if target.kind == "edge":
        assert target.root is not None
        listener, extra = edge_gated(workdir) if gated else ("", "")
        if policy == "durable":
            extra += (
                f'[persistence]\nstate_dir = "{workdir / "state"}"\n'
                f'durability = "{target.durability}"\ninterval_ms = 50\n'
            )
        return start_edge(
            workdir,
            extra,
            target.root,
            listener=listener,
            log_level="info" if policy == "durable" else "warning",
        )
    if target.kind == "mosquitto":
        extra = mosquitto_gated(workdir) if gated else ""
        if policy == "durable":
            extra += f"persistence true\npersistence_location {workdir}/\nautosave_interval 1\n"
        return start_mosquitto(workdir, extra)
    if gated:
        raise SystemExit("amqtt runs the anonymous policy only")
    return start_amqtt(workdir)


def measure(target: Target, policy: str, scenario: Scenario, scale: float) -> tuple[Result, str]:
    """One fresh broker, one scenario; (result, messages per fsync or "")."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-{target.kind}-"))
    broker = start_target(target, policy, workdir)
    auth = (BENCH_USER, BENCH_PASSWORD) if policy != "anonymous" else None
    if policy == "durable":
        scenario = dataclasses.replace(scenario, persistent=True)
    try:
        result = run(scenario, broker.port, broker.cpu_seconds, scale, auth)
    finally:
        stop_process(broker.process)  # not broker.stop(): the store's log is read below
        per_fsync = ""
        log = workdir / "broker.log"
        found = STORE_STATS_RE.search(log.read_text(errors="replace")) if log.exists() else None
        if found and target.durability == "sync":
            per_fsync = f"{result.delivered / max(1, int(found.group(2))):.1f}"
        if policy == "durable" and target.kind == "edge" and not found:
            print(f"no store statistics in {log}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return result, per_fsync


def spread(values: list[float]) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.1f}"
    return f"{med:.1f} ({min(values):.1f}–{max(values):.1f})"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def bench_messages(targets: list[Target], args: argparse.Namespace) -> None:
    policies = [p for p in args.policies.split(",") if p]
    keys = [k for k in args.scenarios.split(",") if k]
    cells: dict[tuple[str, str, str], list[Result]] = {}
    fsyncs: dict[tuple[str, str, str], list[str]] = {}
    plan: list[tuple[str, str, Target]] = []
    for policy in policies:
        for key in keys:
            if policy == "durable" and not SCENARIOS[key].qos:
                continue
            for target in targets:
                if target.kind == "amqtt" and policy != "anonymous":
                    continue
                if target.kind == "edge" and policy == "durable":
                    plan.append((policy, key, target))
                    plan.append(
                        (policy, key, Target(f"{target.label}:sync", "edge", target.root, "sync"))
                    )
                    continue
                plan.append((policy, key, target))
    for r in range(args.rounds):
        for policy, key, target in plan:
            scale = args.scale * (OTHER_SCALE.get(target.kind, 1.0))
            result, per_fsync = measure(target, policy, SCENARIOS[key], scale)
            cells.setdefault((policy, key, target.label), []).append(result)
            fsyncs.setdefault((policy, key, target.label), []).append(per_fsync)
            lost = "" if result.delivered >= result.expected else " INCOMPLETE"
            print(
                f"round {r + 1}: {policy} {key} {target.label}: {result.us_per_msg:.1f} µs/msg, "
                f"{result.rate:,.0f} msg/s, generator {result.generator_cpu / result.seconds:.0%}"
                f"{lost}",
                file=sys.stderr,
                flush=True,
            )
    mosq = next((t.label for t in targets if t.kind == "mosquitto"), None)
    print(
        "\n| policy | scenario | broker | CPU µs/msg median (min–max) | ÷ mosquitto | msg/s | "
        "generator CPU | msg/fsync | delivered |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for policy in policies:
        for key in keys:
            base = cells.get((policy, key, mosq)) if mosq else None
            base_us = statistics.median(r.us_per_msg for r in base) if base else None
            labels = [t for (p, k, t) in cells if (p, k) == (policy, key)]
            for label in labels:
                results = cells[(policy, key, label)]
                us = [r.us_per_msg for r in results]
                ratio = f"{statistics.median(us) / base_us:.2f}" if base_us else "-"
                rate = statistics.median(r.rate for r in results)
                gen = statistics.median(r.generator_cpu / r.seconds for r in results)
                got = min(r.delivered / r.expected for r in results)
                per_fsync = ",".join(f for f in fsyncs[(policy, key, label)] if f)
                print(
                    f"| {policy} | {SCENARIOS[key].name} | {label} | {spread(us)} | {ratio} | "
                    f"{rate:,.0f} | {gen:.0%} | {per_fsync or '-'} | {got:.0%} |"
                )


def bench_bridge(targets: list[Target], args: argparse.Namespace) -> None:
    import bench_bridge as bb

    work = Path(tempfile.mkdtemp(prefix="bench-bridge-"))
    payload = os.urandom(64)
    rows: dict[str, list[tuple[float, float, str]]] = {}
    try:
        for r in range(args.rounds):
            cloud_port = bb.free_port()
            cloud = bb.mosquitto(work, f"cloud{r}", cloud_port)
            try:
                for target in targets:
                    if target.kind == "amqtt":
                        continue
                    modes = ("none", "sync") if target.kind == "edge" else ("",)
                    for mode in modes:
                        label = f"{target.label}:{mode}" if mode else target.label
                        rows.setdefault(label, []).append(
                            bb.run_gateway(work, target.root, mode, cloud_port, args, payload)
                        )
                        rate, us, per_fsync = rows[label][-1]
                        print(
                            f"round {r + 1}: bridge {label}: {us:.1f} µs/msg, {rate:,.0f} msg/s "
                            f"{per_fsync}",
                            file=sys.stderr,
                            flush=True,
                        )
            finally:
                bb.stop_process(cloud)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mosq = next((t.label for t in targets if t.kind == "mosquitto"), None)
    base = statistics.median(us for _, us, _ in rows[mosq]) if mosq in rows else None
    print(
        f"\nBridged QoS 1 ({args.bridge_messages:,} messages of 64 B, device → gateway → cloud "
        "Mosquitto; gateway CPU per bridged message)\n"
    )
    print("| gateway | CPU µs/msg median (min–max) | ÷ mosquitto | bridged msg/s | msg/fsync |")
    print("|---|---:|---:|---:|---:|")
    for label, results in rows.items():
        us = [u for _, u, _ in results]
        ratio = f"{statistics.median(us) / base:.2f}" if base else "-"
        rate = statistics.median(r for r, _, _ in results)
        per_fsync = ",".join(f for _, _, f in results if f) or "-"
        print(f"| {label} | {spread(us)} | {ratio} | {rate:,.0f} | {per_fsync} |")


def bench_idle(targets: list[Target], args: argparse.Namespace) -> None:
    rows: dict[str, list[tuple[int, int]]] = {}
    for _ in range(args.rounds):
        for target in targets:
            workdir = Path(tempfile.mkdtemp(prefix=f"bench-idle-{target.kind}-"))
            if target.kind == "edge":
                assert target.root is not None
                broker = start_edge(workdir, root=target.root, module="edge_broker")
            elif target.kind == "mosquitto":
                broker = start_mosquitto(workdir)
            else:
                broker = start_amqtt(workdir)
            try:
                rows.setdefault(target.label, []).append(
                    idle_connections(broker.port, args.idle, broker.rss_kib)
                )
            finally:
                broker.stop()
    print(f"\n| broker | fresh RSS | RSS with {args.idle:,} idle clients | per client |")
    print("|---|---:|---:|---:|")
    for label, results in rows.items():
        fresh = [b / 1024 for b, _ in results]
        full = [a / 1024 for _, a in results]
        per = [(a - b) / args.idle for b, a in results]
        print(f"| {label} | {spread(fresh)} MB | {spread(full)} MB | {spread(per)} KB |")


def bench_kill(targets: list[Target], args: argparse.Namespace) -> None:
    """What a kill -9 loses right after ``--kill-messages`` QoS 1 messages were acknowledged
    for an offline persistent subscriber (scripts/bench_persistence.py's kill test)."""
    import bench_persistence as bp

    base = Path(tempfile.mkdtemp(prefix="bench-kill-"))
    print(f"\n| broker | store | lost on kill -9 (of {args.kill_messages:,} acknowledged) |")
    print("|---|---|---:|")
    try:
        for target in targets:
            modes: tuple[str, ...] = ()
            if target.kind == "edge":
                assert target.root is not None
                bp.SOURCES[target.label] = target.root
                modes = (f"interval@{target.label}", f"sync@{target.label}")
            elif target.kind == "mosquitto":
                modes = ("mosquitto",)
            for mode in modes:
                acked, got = bp.kill_loss(base, mode, args.kill_messages)
                store = mode.partition("@")[0]
                store = "persistence true" if store == "mosquitto" else f"durability {store}"
                print(f"| {target.label} | {store} | {max(0, acked - got):,} |", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--edge", default="edge-broker=.", help="LABEL=PATH,... edge-broker trees")
    ap.add_argument("--others", default="mosquitto", help="mosquitto,amqtt or ''")
    ap.add_argument("--policies", default="anonymous,gated,durable")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--scale", type=float, default=1.0, help="multiply message counts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bridge-messages", type=int, default=20_000, help="0: skip the bridge")
    ap.add_argument("--idle", type=int, default=1000, help="idle clients (0: skip)")
    ap.add_argument("--kill-messages", type=int, default=2000, help="kill -9 test (0: skip)")
    args = ap.parse_args()
    targets = [
        Target(label, "edge", Path(path).resolve())
        for label, _, path in (item.partition("=") for item in args.edge.split(",") if item)
    ]
    targets += [Target(name, name) for name in args.others.split(",") if name]
    print(
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}; load average at start {loadavg()}"
    )
    steps: list[Callable[[list[Target], argparse.Namespace], None]] = []
    if args.policies and args.scenarios:
        steps.append(bench_messages)
    if args.bridge_messages:
        steps.append(bench_bridge)
    if args.idle:
        steps.append(bench_idle)
    if args.kill_messages:
        steps.append(bench_kill)
    for step in steps:
        step(targets, args)
    print(f"\nLoad average at the end: {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
