"""One local SparkSession per test session (local[2], few shuffle partitions, no UI, a JVM tuned
for short jobs; tests/conftest.py runs every test using it on one xdist worker) and one
compile run of a small generated fleet with every kind of invalid row, shared by the tests."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nacl.signing
import pytest

pyspark = pytest.importorskip("pyspark")

from edge_broker.keys import write_signing_key, write_verify_key  # noqa: E402
from edge_broker.pipeline.fleet import INVALID_KINDS, Fleet, make_fleet  # noqa: E402
from edge_broker.pipeline.spark import PipelineError, get_session  # noqa: E402

ISSUED_AT = 1_790_000_000


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None:
        pytest.skip("no Java runtime (scripts/test installs default-jre-headless)")
    session = get_session(
        "local[2]",
        {
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": "1g",
            # the test jobs are tiny and short: the JVM's quick JIT tier and the serial
            # collector cost about half the CPU of the defaults (startup and each job) and
            # change no result; Spark's own execution (codegen, adaptive plans) is untouched
            "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@dataclass(frozen=True)
class Keys:
    key: nacl.signing.SigningKey
    key_path: Path
    pub_path: Path


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    d = tmp_path_factory.mktemp("keys")
    key = nacl.signing.SigningKey(bytes(range(32)))
    write_signing_key(str(d / "cloud.key"), key)
    write_verify_key(str(d / "cloud.pub"), key.verify_key)
    return Keys(key, d / "cloud.key", d / "cloud.pub")


@dataclass(frozen=True)
class Compiled:
    fleet: Fleet
    out: Path
    error: str


@pytest.fixture(scope="session")
def compiled(spark: Any, keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """gateways x devices fleet (CSV) with one invalid row of every kind, compiled without
    --skip-invalid: the job must report every invalid row, sign nothing and fail."""
    from edge_broker.pipeline.compile import run_compile

    base = tmp_path_factory.mktemp("fleet")
    fleet = make_fleet(
        str(base / "in"),
        gateways=4,
        devices_per_gateway=6,
        tenants=2,
        invalid=len(INVALID_KINDS),
        audit_records=0,
        seed=7,
    )
    out = base / "out"
    with pytest.raises(PipelineError) as caught:
        run_compile(
            spark, fleet.directory, str(out), key=keys.key, issued_at=ISSUED_AT, emit_policies=True
        )
    return Compiled(fleet, out, str(caught.value))


@pytest.fixture(scope="session")
def compiled_valid(spark: Any, keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Compiled:
    """The same fleet without invalid rows, compiled: one bundle per gateway. The input and the
    output are given as file:// URIs (read and written through Hadoop, not the driver's disk)."""
    from edge_broker.pipeline.compile import run_compile

    base = tmp_path_factory.mktemp("fleet-valid")
    fleet = make_fleet(
        str(base / "in"), gateways=4, devices_per_gateway=6, tenants=2, audit_records=0, seed=7
    )
    out = base / "out"
    run_compile(
        spark,
        (base / "in").as_uri(),
        out.as_uri(),
        key=keys.key,
        issued_at=ISSUED_AT,
        emit_policies=True,
    )
    return Compiled(fleet, out, "")
