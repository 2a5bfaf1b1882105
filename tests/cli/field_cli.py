"""``edge-broker`` as an operator runs it: a subprocess from ``/``, with this tree on the path
and no state directory from the environment (the config names it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def cli_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("EDGE_BROKER_STATE_DIR", None)
    env.pop("STATE_DIRECTORY", None)
    return env


def cli(
    *args: str, timeout: float = 60, input: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", *args],
        input=input,
        capture_output=True,
        text=True,
        cwd="/",
        env=cli_env(),
        timeout=timeout,
    )
