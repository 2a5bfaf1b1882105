"""scripts/bench keeps working (tiny run, edge-broker only); no speed is asserted here."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_and_delivers_everything():
    r = subprocess.run(
        [
            str(ROOT / "scripts" / "bench"),
            "--scale",
            "0.01",
            "--brokers",
            "edge-broker",
            "--idle",
            "20",
            "--kill-messages",
            "100",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [
        line for line in r.stdout.splitlines() if line.startswith("| ") and "edge-broker |" in line
    ]
    # four scenarios, the persistent-session scenario's two store modes, idle clients
    assert len(rows) == 7, r.stdout
    assert not any("got " in row for row in rows), r.stdout  # nothing lost
    persistent = [row for row in rows if "durability" in row]
    assert len(persistent) == 2, r.stdout
    # nothing acknowledged is lost on kill -9 (the last column)
    assert all(row.rstrip(" |").endswith("| 0") for row in persistent), r.stdout
