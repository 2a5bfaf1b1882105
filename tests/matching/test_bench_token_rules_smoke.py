"""scripts/bench_token_rules.py keeps working (tiny run); no speed is asserted here.

Its queries are built to be half hits and half misses for every rule count and family; the
table's hit columns prove the queries ask what the benchmark says they ask.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("family", ["sites", "fleet"])
def test_bench_token_rules_runs_with_half_hits(family: str) -> None:
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "bench_token_rules.py"),
            "--family",
            family,
            "--sizes",
            "10,400",
            "--queries",
            "400",
            "--seconds",
            "0.01",
            "--rounds",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    rows = [
        line.split("|")[1:-1]
        for line in r.stdout.splitlines()
        if line.startswith("| 4") or line.startswith("| 10 ")
    ]
    assert [row[0].strip() for row in rows] == ["10", "400"], r.stdout
    for row in rows:
        assert [cell.strip() for cell in row[-2:]] == ["50%", "50%"], r.stdout
