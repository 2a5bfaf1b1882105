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
    assert len(rows) == 5, r.stdout  # four scenarios and the idle-clients row
    assert not any("got " in row for row in rows), r.stdout  # nothing lost
