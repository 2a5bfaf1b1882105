"""Publish throughput and broker CPU per delivered message with 0, 1k and 100k default
permissions (issue 4), using the raw-socket multi-process generator of scripts/bench_load.py
(pre-encoded packets; its own CPU is reported so one can see it is not the bottleneck).

Every client gets one permission set: N DENY rules on unrelated topics (``zone/<i>/secret/#``)
and a final ``ALLOW #``. The "recheck" rows add one DENY that overlaps the subscribers'
wildcard filter, so every delivery through it is checked on its concrete topic.

    .venv/bin/python scripts/bench_authz.py [--scale 0.5] [--sizes 0,1000,100000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_brokers import Broker, start_edge  # noqa: E402
from bench_load import Scenario, run  # noqa: E402

SCENARIOS = [
    Scenario("1→1 QoS 0", 1, 1, 1, 0, False, 200_000),
    Scenario("1→1 QoS 1", 1, 1, 1, 1, False, 60_000),
    Scenario("4→4 + QoS 0", 4, 4, 2, 0, True, 50_000),
]


def permissions(rules: int, overlap: bool) -> str:
    """N unrelated DENY rules and ALLOW #, for every client (module docstring)."""
    if not (rules or overlap):
        return ""
    lines = ["[permissions.sets.bench]\nrules = [\n"]
    if overlap:
        lines.append('  { id = "overlap", topic = "bench/+/never/data", type = "DENY" },\n')
    lines.extend(
        f'  {{ id = "d{i}", topic = "zone/{i}/secret/#", type = "DENY" }},\n' for i in range(rules)
    )
    lines.append('  { id = "all", topic = "#" },\n]\n[[permissions.assign]]\nsets = ["bench"]\n')
    return "".join(lines)


def start(rules: int, overlap: bool) -> Broker:
    workdir = Path(tempfile.mkdtemp(prefix="bench-authz-"))
    return start_edge(workdir, permissions(rules, overlap), module="edge_broker")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", type=float, default=0.5)
    parser.add_argument("--sizes", default="0,1000,100000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(
        "| permissions | scenario | msg/s | broker µs/msg | generator CPU s | delivered/expected |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for size in sizes:
        for overlap in (False, True):
            if overlap and size == 0:
                continue
            broker = start(size, overlap)
            try:
                for scenario in SCENARIOS:
                    if overlap and not scenario.wildcard:
                        continue
                    result = run(scenario, broker.port, broker.cpu_seconds, args.scale)
                    label = f"{size}{' + recheck' if overlap else ''}"
                    print(
                        f"| {label} | {scenario.name} | {result.rate:,.0f} | "
                        f"{result.us_per_msg:.1f} | "
                        f"{result.generator_cpu:.2f} | {result.delivered}/{result.expected} |",
                        flush=True,
                    )
            finally:
                broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
