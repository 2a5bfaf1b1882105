"""Running where the workers are not this machine's Python: ``--conf spark.pyspark.python`` is
the workers' Python (not silently replaced), ``--ship-code`` sends edge_broker to workers that
lack it, and a job that fails on the executors says so in one line with exit status 3."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.pipeline.spark import python_env
from edge_broker.sync.bundle import verify_bundle
from tests.pipeline.conftest import ISSUED_AT, Keys

ROOT = Path(__file__).resolve().parents[2]


def test_python_env_keeps_the_users_choice() -> None:
    assert python_env(
        "local[*]", {"spark.pyspark.python": "/opt/py"}, {"PYSPARK_PYTHON": "/x"}
    ) == {"PYSPARK_PYTHON": "/opt/py"}
    assert python_env("local[2]", {}, {"PYSPARK_PYTHON": "/x"}) == {}
    assert python_env("local[2]", {}, {}) == {"PYSPARK_PYTHON": sys.executable}
    assert (
        python_env("spark://master:7077", {}, {}) == {}
    )  # the driver's path means nothing on a worker


def _fleet(directory: Path) -> None:
    directory.mkdir()
    (directory / "gateways.csv").write_text("gateway,version\ngw-a,1\n")
    (directory / "devices.csv").write_text("gateway,client_id,sets\ngw-a,c1,s\n")
    (directory / "permissions.csv").write_text("set,topic\ns,a/#\n")


def test_workers_without_the_project(keys: Keys, tmp_path: Path) -> None:
    if shutil.which("java") is None:
        pytest.skip("no Java runtime")
    shadow = tmp_path / "shadow" / "edge_broker"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ImportError('edge_broker is not installed on this worker')\n"
    )
    marker = tmp_path / "worker-python-used"
    wrapper = tmp_path / "worker-python"
    wrapper.write_text(
        f'#!/bin/sh\necho used >> {marker}\nPYTHONPATH={shadow.parent} exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    _fleet(tmp_path / "in")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_PYTHON", None)

    def run(*extra: str, out: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "edge_broker.pipeline",
                "--master",
                "local[1]",
                "--conf",
                f"spark.pyspark.python={wrapper}",
                "--conf",
                "spark.ui.showConsoleProgress=false",
                "--conf",
                "spark.sql.shuffle.partitions=1",
                *extra,
                "compile",
                "--input",
                (tmp_path / "in").as_uri(),
                "--key",
                str(keys.key_path),
                "-o",
                (tmp_path / out).as_uri(),
                "--issued-at",
                str(ISSUED_AT),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )

    failed = run(out="o1")
    assert marker.exists(), failed.stderr[-3000:]  # the --conf Python ran the workers
    assert failed.returncode == 3, failed.stderr[-3000:]
    lines = [
        line
        for line in failed.stderr.splitlines()
        if line.startswith("edge-broker-pipeline compile:")
    ]
    assert len(lines) == 1 and "edge_broker is not installed on this worker" in lines[0], (
        failed.stderr[-3000:]
    )
    # no driver-side Python traceback (Spark's own executor log lines may still show the worker's)
    assert "pipeline/cli.py" not in failed.stderr and "Py4JJavaError" not in failed.stderr

    shipped = run("--ship-code", out="o2")
    assert shipped.returncode == 0, shipped.stderr[-3000:]
    data = (tmp_path / "o2" / "bundles" / "gw-a.cbor").read_bytes()
    assert verify_bundle(data, [keys.key.verify_key]).gateway == "gw-a"
    assert not (tmp_path / "file:").exists()
