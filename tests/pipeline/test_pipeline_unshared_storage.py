"""A real Spark standalone cluster on this host whose one worker sees a folder the driver does
not: the worker runs in its own mount namespace with a tmpfs over ``private/`` (what a worker's
own local disk is on another host). That is what users get when job input or output is not on
shared storage (issue 18, "Executor writes that land" and "Storage through Spark"): the job fails
with exit status 2 and one line that names the URI and says what to share, never a report over
empty folders. The same cluster with a shared folder runs compile and audit to the end, so the
failures are the storage's, not the cluster's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from edge_broker.pipeline.fleet import make_fleet
from edge_broker.sync.bundle import verify_bundle
from tests.pipeline.conftest import ISSUED_AT, Keys

ROOT = Path(__file__).resolve().parents[2]
SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
# A standalone cluster (master, worker and driver JVMs) started by the first test of the module:
# on the 2-core CI machine it runs beside the local Spark group (tests/conftest.py puts that on
# the other worker), and under that load setting up and running it took just over the global
# 300 s once; its own bound, not a soak mark, keeps the real-cluster path in CI.
pytestmark = pytest.mark.timeout(600)
MASTER_RE = re.compile(r"Starting Spark master at (spark://\S+)")


def _own_mounts() -> list[str] | None:
    """The ``unshare`` prefix that gives a process its own mount table (root, or an
    unprivileged user namespace), or None where neither is allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for prefix in (
        [unshare, "--mount", "--propagation", "private"],
        [unshare, "--user", "--map-root-user", "--mount", "--propagation", "private"],
    ):
        probe = [*prefix, "sh", "-c", "mount -t tmpfs tmpfs /mnt"]
        if subprocess.run(probe, capture_output=True).returncode == 0:
            return prefix
    return None


def _wait_for(log: Path, pattern: re.Pattern[str], process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = pattern.search(log.read_text(errors="replace"))
        if found:
            return found.group(1) if pattern.groups else found.group(0)
        if process.poll() is not None:
            break
        time.sleep(0.2)
    raise AssertionError(f"{log.name}: no {pattern.pattern!r}:\n{log.read_text()[-3000:]}")


@dataclass(frozen=True)
class Cluster:
    master: str
    shared: Path  # the driver and the worker see the same files here
    private: Path  # the worker sees its own tmpfs here, the driver an empty folder
    fleet: Path  # compile input and audit logs, shared


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if shutil.which("java") is None:
        pytest.skip("no Java runtime (scripts/test installs default-jre-headless)")
    prefix = _own_mounts()
    if prefix is None:
        pytest.skip("unshare cannot give the worker its own mounts (no root, no user namespaces)")
    base = tmp_path_factory.mktemp("cluster")
    shared, private, work = base / "shared", base / "private", base / "work"
    for folder in (shared, private, work):
        folder.mkdir()
    fleet = make_fleet(str(shared / "fleet"), gateways=3, devices_per_gateway=4, audit_records=300)
    env = {**os.environ, "SPARK_HOME": str(SPARK_CLASS.parent.parent)}
    started: list[subprocess.Popen[bytes]] = []
    try:
        master_log = base / "master.log"
        with open(master_log, "wb") as out:
            master = subprocess.Popen(
                [str(SPARK_CLASS), "org.apache.spark.deploy.master.Master", "--host",
                 "127.0.0.1", "--port", "0", "--webui-port", "0"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        started.append(master)
        url = _wait_for(master_log, MASTER_RE, master)
        # the worker's view: its own empty tmpfs over private/, then a copy of the fleet in it
        inner = (
            f"mount -t tmpfs tmpfs {private} && mkdir {private}/in && "
            f"cp -r {fleet.directory}/. {private}/in/ && exec {SPARK_CLASS} "
            f"org.apache.spark.deploy.worker.Worker --host 127.0.0.1 --cores 2 --memory 1G "
            f"--work-dir {work} --webui-port 0 {url}"
        )
        worker_log = base / "worker.log"
        with open(worker_log, "wb") as out:
            worker = subprocess.Popen(
                [*prefix, "sh", "-c", inner],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )  # fmt: skip
        started.append(worker)
        _wait_for(worker_log, re.compile("Successfully registered with master"), worker)
        yield Cluster(url, shared, private, Path(fleet.directory))
    finally:
        for process in reversed(started):
            try:
                os.killpg(process.pid, 9)
            except ProcessLookupError:
                pass
            process.wait(30)


def _run(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYSPARK_PYTHON", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker.pipeline",
            "--master",
            cluster.master,
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            "--conf",
            f"spark.executorEnv.PYTHONPATH={ROOT}",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.executor.memory=512m",
            "--conf",
            "spark.ui.showConsoleProgress=false",
            *args,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _one_line(result: subprocess.CompletedProcess[str], command: str) -> str:
    lines = [
        line
        for line in result.stderr.splitlines()
        if line.startswith(f"edge-broker-pipeline {command}:")
    ]
    assert len(lines) == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "Py4JJavaError" not in result.stderr
    return lines[0]


def test_a_report_the_executors_wrote_to_their_own_disk_fails_the_job(cluster: Cluster) -> None:
    out = cluster.private / "report"
    result = _run(cluster, "audit", str(cluster.fleet / "audit"), "-o", out.as_uri())
    assert result.returncode == 2, result.stderr[-3000:]
    line = _one_line(result, "audit")
    assert f"{out.as_uri()}/records" in line or f"{out}/records" in line, line
    assert "executors' Parquet files are not there (only _SUCCESS)" in line, line
    assert "driver and every executor share" in line, line
    assert "report" not in result.stdout  # no "report …/report.html" over empty folders
    assert (out / "records" / "_SUCCESS").exists()  # what the driver saw: the commit, no data


def test_input_only_the_executors_see_is_named_in_one_line(cluster: Cluster, keys: Keys) -> None:
    audit_in = (cluster.private / "in" / "audit").as_uri()
    result = _run(cluster, "audit", audit_in, "-o", (cluster.shared / "unused").as_uri())
    assert result.returncode == 2, result.stderr[-3000:]
    line = _one_line(result, "audit")
    assert "Path does not exist" in line and "the driver lists the input files" in line, line

    compiled = _run(
        cluster,
        "compile",
        "--input",
        (cluster.private / "in").as_uri(),
        "--key",
        str(keys.key_path),
        "-o",
        (cluster.shared / "unused2").as_uri(),
    )
    assert compiled.returncode == 2, compiled.stderr[-3000:]
    line = _one_line(compiled, "compile")
    assert "no such folder where the driver looks" in line and "share" in line, line


def test_shared_storage_on_the_same_cluster_compiles_and_reports(
    cluster: Cluster, keys: Keys
) -> None:
    compiled = _run(
        cluster,
        "compile",
        "--input",
        cluster.fleet.as_uri(),
        "--key",
        str(keys.key_path),
        "-o",
        (cluster.shared / "out").as_uri(),
        "--issued-at",
        str(ISSUED_AT),
    )
    assert compiled.returncode == 0, compiled.stderr[-3000:]
    bundles = sorted((cluster.shared / "out" / "bundles").glob("*.cbor"))
    assert len(bundles) == 3
    assert verify_bundle(bundles[0].read_bytes(), [keys.key.verify_key]).gateway == bundles[0].stem

    report = cluster.shared / "report"
    audited = _run(cluster, "audit", str(cluster.fleet / "audit"), "-o", report.as_uri())
    assert audited.returncode == 0, audited.stderr[-3000:]
    assert (report / "report.html").exists()
    assert list((report / "records").rglob("part-*"))  # the executors' files landed
