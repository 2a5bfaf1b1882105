"""scripts/bench keeps working (tiny run, edge-broker only, every section); no speed is asserted
here."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_runs_every_section_and_delivers_everything():
    r = subprocess.run(
        [
            str(ROOT / "scripts" / "bench"),
            "--edge",
            "edge-broker=.",
            "--others",
            "",
            "--rounds",
            "1",
            "--scale",
            "0.01",
            "--scenarios",
            "1to1-qos0,1to1-qos1",
            "--bridge-messages",
            "200",
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
        line
        for line in r.stdout.splitlines()
        if line.startswith("| edge-broker") or (line.startswith("| ") and "| edge-broker" in line)
    ]
    messages = [
        row for row in rows if row.split("|")[1].strip() in ("anonymous", "gated", "durable")
    ]
    # anonymous and gated: both scenarios; durable: QoS 1 only, with interval and sync
    assert len(messages) == 6, r.stdout
    assert all(row.rstrip(" |").endswith("100%") for row in messages), r.stdout  # nothing lost
    sync = [row for row in messages if "edge-broker:sync" in row]
    assert len(sync) == 1 and sync[0].split("|")[8].strip() != "-", r.stdout  # msg per fsync
    bridged = [row for row in rows if row.startswith("| edge-broker:")]
    assert len(bridged) == 2, r.stdout  # durability none and sync
    kill = [row for row in rows if "durability" in row]
    assert len(kill) == 2, r.stdout
    # nothing acknowledged is lost on kill -9 (the last column)
    assert all(row.rstrip(" |").endswith("| 0") for row in kill), r.stdout
