"""The Spark session of the pipeline jobs: ``--master`` (default ``local[*]``) and ``--conf k=v``.

Imported only by the pipeline (the optional ``[pipeline]`` extra); the broker never imports it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any


class PipelineError(Exception):
    """Bad input or arguments for a pipeline job: the message names the file, row and problem."""


DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "true",  # the stage progress bar on stderr for long jobs
    # shuffle partitions follow the data: adaptive execution coalesces the 200 default
    # partitions into ~64 MB ones after each shuffle (200 tiny tasks cost 1.6x on audit)
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "64m",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
}


def python_env(master: str, conf: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """Which Python the workers run, as environment settings for PySpark (which reads
    ``PYSPARK_PYTHON``, not ``spark.pyspark.python``, when the job is started by ``python``
    rather than ``spark-submit``): ``--conf spark.pyspark.python=…`` always wins; else an
    existing ``PYSPARK_PYTHON``; else, on ``local[*]`` only, this interpreter (its pandas,
    pyarrow and edge_broker). On a cluster the workers' Python is the cluster's business
    (``spark.pyspark.python``, or ``spark.archives`` with a packed environment; README)."""
    chosen = conf.get("spark.pyspark.python")
    if chosen:
        return {"PYSPARK_PYTHON": chosen}
    if environ.get("PYSPARK_PYTHON") or not master.startswith("local"):
        return {}
    return {"PYSPARK_PYTHON": sys.executable}


def pack_package(directory: str) -> str:
    """``edge_broker`` as a zip for ``addPyFile`` (``--ship-code``): workers that have the
    dependencies (pandas, pyarrow, cbor2, pynacl) but not this project import it from there."""
    import zipfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]  # the edge_broker package
    target = Path(directory) / "edge_broker.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*.py")):
            zf.write(path, str(path.relative_to(root.parent)))
    return str(target)


_USER_KEYS: set[str] = set()  # settings given by --conf (or a caller): never tuned by the jobs
PARTITION_BYTES = 64 * 1024 * 1024


def tune_partitions(spark: Any, input_bytes: int) -> int:
    """Shuffle partitions from the input size (unless ``--conf spark.sql.shuffle.partitions``
    was given): one per 64 MB of input, at least one per core. Spark's default of 200 makes
    200 tiny Python tasks per shuffle on a small input (1.6x on audit); adaptive execution
    coalesces plain shuffles but not those feeding cached or pandas-grouped stages."""
    if "spark.sql.shuffle.partitions" in _USER_KEYS:
        return int(spark.conf.get("spark.sql.shuffle.partitions"))
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    partitions = max(cores, min(4000, -(-input_bytes // PARTITION_BYTES)))
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    return partitions


ADAPTIVE = "spark.sql.adaptive.enabled"


@contextlib.contextmanager
def static_plans(spark: Any) -> Iterator[None]:
    """Adaptive execution off while the block runs (unless ``--conf spark.sql.adaptive.enabled``
    was given), then as before. For a job over small tables whose partitions are already chosen
    from the input size (``compile``): adaptive execution runs every shuffle of a query as a
    Spark job of its own and re-plans the rest on the driver after each one, so one action over
    a union of checks became dozens of jobs with the cores idle between them (76 jobs for a
    1,000-gateway fleet, against 14 planned once)."""
    if ADAPTIVE in _USER_KEYS:
        yield
        return
    before = spark.conf.get(ADAPTIVE, None)
    spark.conf.set(ADAPTIVE, "false")
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(ADAPTIVE)
        else:
            spark.conf.set(ADAPTIVE, before)


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PipelineError(
                f"--conf {item!r}: write KEY=VALUE, e.g. --conf spark.sql.shuffle.partitions=8"
            )
        conf[key.strip()] = value.strip()
    return conf


def get_session(
    master: str = "local[*]",
    conf: dict[str, str] | None = None,
    app: str = "edge-broker-pipeline",
    ship_code: bool = False,
) -> Any:
    """A SparkSession (the active one when there is one: tests share theirs). ``ship_code``:
    send this edge_broker package to the executors as a zip (:func:`pack_package`)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise PipelineError(
            "pyspark is not installed: pip install 'edge-broker[pipeline]'"
        ) from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    os.environ.update(python_env(master, conf or {}, dict(os.environ)))
    _USER_KEYS.update(conf or {})
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    if "spark.log.level" not in (conf or {}):
        session.sparkContext.setLogLevel(
            "ERROR"
        )  # the job prints its steps; Spark's WARNs are noise
    if ship_code:
        import tempfile

        session.sparkContext.addPyFile(pack_package(tempfile.mkdtemp(prefix="edge-broker-code-")))
    return session


def progress(message: str) -> None:
    """One line per job step on stderr (Spark's own progress bar shows the stages)."""
    print(
        f"edge-broker-pipeline [{time.strftime('%H:%M:%S')}]: {message}",
        file=sys.stderr,
        flush=True,
    )
