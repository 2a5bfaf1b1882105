"""scripts/bench_journal.py keeps working (tiny runs); no speed is asserted here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIGURE = re.compile(r"^10 subscriber\(s\): [0-9.]+ µs per message, [0-9.]+ µs per reference")


@pytest.mark.parametrize("part", ["all", "no-write", "harness", "floor", "floor-no-write"])
def test_bench_journal_runs_each_part_and_leaves_no_reference(part: str) -> None:
    r = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "bench_journal.py")]
        + ["--messages", "200", "--repeat", "1", "--subscribers", "10", "--part", part],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    # the script exits non-zero when references are left after the run
    assert r.returncode == 0, r.stderr[-2000:]
    assert FIGURE.match(r.stdout), r.stdout
    assert f"part {part})" in r.stdout, r.stdout
