"""scripts/run on a machine where it has not run before: it says what it is doing.

The first run creates .venv and installs the project (half a minute on a Pi) before the broker
starts; it used to do that silently. A fake interpreter stands in for Python so the test needs
neither the network nor a real install: its ``-m venv`` makes .venv/bin/python (the fake again)
and its ``-m pip install`` prints pip-like lines and creates .venv/bin/edge-broker.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

FAKE_PYTHON = r"""#!/usr/bin/env bash
if [ "$1 $2" = "-m venv" ]; then
  mkdir -p "$3/bin"; cp "$0" "$3/bin/python"; exit 0
fi
if [ "$1 $2 $3" = "-m pip install" ]; then
  echo "Collecting paho-mqtt"; echo "noise that is not shown"
  echo "Successfully installed edge-broker"
  printf '#!/usr/bin/env bash\necho "broker ran with: $*"\n' > "$(dirname "$0")/edge-broker"
  chmod +x "$(dirname "$0")/edge-broker"; exit 0
fi
exit 3
"""


def _project_copy(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    (project / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "run", project / "scripts" / "run")
    fake = tmp_path / "fake-python"
    fake.write_text(FAKE_PYTHON)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return project, fake


def test_first_run_reports_progress_then_starts(tmp_path: Path) -> None:
    project, fake = _project_copy(tmp_path)
    env = {**os.environ, "PYTHON": str(fake)}
    done = subprocess.run(
        ["bash", "scripts/run", "--log-level", "debug"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "first run" in done.stderr
    assert "Collecting paho-mqtt" in done.stderr
    assert "noise" not in done.stderr
    assert "starting the broker" in done.stderr
    assert done.stdout.strip() == "broker ran with: run --log-level debug"

    again = subprocess.run(
        ["bash", "scripts/run"], cwd=project, env=env, capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 0
    assert again.stderr == ""  # later runs start straight away, quietly


def test_failed_install_says_so(tmp_path: Path) -> None:
    project, fake = _project_copy(tmp_path)
    fake.write_text(
        FAKE_PYTHON.replace("printf", "true || printf")
    )  # pip "succeeds", installs nothing
    done = subprocess.run(
        ["bash", "scripts/run"],
        cwd=project,
        env={**os.environ, "PYTHON": str(fake)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "the install failed" in done.stderr
