"""The Spark session of the pipeline jobs: ``--master`` (default ``local[*]``) and ``--conf k=v``.

Imported only by the pipeline (the optional ``[pipeline]`` extra); the broker never imports it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from typing import Any


class PipelineError(Exception):
    """Bad input or arguments for a pipeline job: the message names the file, row and problem."""


DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.showConsoleProgress": "true",  # the stage progress bar on stderr for long jobs
}


def parse_conf(items: Sequence[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise PipelineError(f"--conf {item!r}: write KEY=VALUE, e.g. --conf spark.sql.shuffle.partitions=8")
        conf[key.strip()] = value.strip()
    return conf


def get_session(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "edge-broker-pipeline") -> Any:
    """A SparkSession (the active one when there is one: tests share theirs)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise PipelineError("pyspark is not installed: pip install 'edge-broker[pipeline]'") from exc
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # the Python workers must be this interpreter (its pandas, pyarrow and edge_broker)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def progress(message: str) -> None:
    """One line per job step on stderr (Spark's own progress bar shows the stages)."""
    print(f"edge-broker-pipeline [{time.strftime('%H:%M:%S')}]: {message}", file=sys.stderr, flush=True)
