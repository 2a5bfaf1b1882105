"""Input tables in every format: JSON lines with a torn line and a wrong type, Parquet, CSV; bad
rows come back with the file, their 1-based row number and the reason; missing required columns
fail naming the file and the columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from edge_broker.pipeline.compile import TABLES
from edge_broker.pipeline.inputs import read_table
from edge_broker.pipeline.spark import PipelineError


def _bad(invalid: Any) -> list[tuple[int, str, str]]:
    return sorted((r["row"], r["key"], r["reason"]) for r in invalid.collect())


def test_json_lines_torn_line_and_wrong_type(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "gateways.json"
    path.write_text(
        '{"gateway":"gw-1","version":1}\n{"gateway":"gw-2","version":"two"}\n{"gateway":"gw-3",\n'
        '{"gateway":"gw-4","version":4,"acl_default":"allow"}\n'
    )
    rows, invalid = read_table(spark, str(path), "gateways", TABLES["gateways"])
    assert _bad(invalid) == [
        (2, "version", "version: not an integer: two"),
        (3, "(line)", "not a JSON object"),
    ]
    assert sorted((r["gateway"], r["version"], r["_row"]) for r in rows.collect()) == [
        ("gw-1", 1, 1),
        ("gw-4", 4, 4),
    ]


def test_parquet_and_csv_rows_numbered_in_order(spark: Any, tmp_path: Path) -> None:
    frame = pd.DataFrame(
        {"gateway": [f"gw-{i}" for i in range(50)], "version": [str(i + 1) for i in range(50)]}
    )
    frame.loc[17, "gateway"] = None
    frame.to_parquet(tmp_path / "gateways.parquet", index=False)
    frame.to_csv(tmp_path / "gateways.csv", index=False)
    for name in ("gateways.parquet", "gateways.csv"):
        rows, invalid = read_table(spark, str(tmp_path / name), "gateways", TABLES["gateways"])
        assert _bad(invalid) == [(18, "gateway", "gateway: missing value")]
        got = sorted((r["_row"], r["gateway"]) for r in rows.collect())
        assert got == [(i + 1, f"gw-{i}") for i in range(50) if i != 17]


def test_missing_required_column(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "devices.json").write_text('{"gateway":"gw-1","client_id":"c"}\n')
    with pytest.raises(
        PipelineError, match=r"devices.json: table 'devices' lacks required column\(s\) sets"
    ):
        read_table(spark, str(tmp_path / "devices.json"), "devices", TABLES["devices"])
    (tmp_path / "devices.txt").write_text("x")
    with pytest.raises(PipelineError, match="unknown format"):
        read_table(spark, str(tmp_path / "devices.txt"), "devices", TABLES["devices"])


def test_quoted_multi_line_csv_field_is_one_row(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "devices.csv").write_text(
        'gateway,client_id,sets\ngw-1,c1,"sensor\noperator"\ngw-1,c2,sensor\n'
    )
    rows, invalid = read_table(spark, str(tmp_path / "devices.csv"), "devices", TABLES["devices"])
    assert _bad(invalid) == []
    assert sorted((r["_row"], r["client_id"], r["sets"]) for r in rows.collect()) == [
        (1, "c1", "sensor\noperator"),
        (2, "c2", "sensor"),
    ]


def test_a_one_file_table_is_checked_on_every_core(spark: Any, tmp_path: Path) -> None:
    """A multi-line CSV is read by one task; a table of more than SPREAD_BYTES per core (the
    rows numbered in file order first) is spread over two partitions per core so the broker's
    parsers run on every core."""
    from edge_broker.pipeline.inputs import SPREAD_BYTES

    cores = int(spark.sparkContext.defaultParallelism)
    count = 2 * cores * SPREAD_BYTES // 20  # rows of about 30 bytes: more than enough
    lines = ["gateway,client_id,sets"] + [f"gw-{i % 7},dev-{i:06d},sensor" for i in range(count)]
    (tmp_path / "devices.csv").write_text("\n".join(lines) + "\n")
    rows, invalid = read_table(spark, str(tmp_path / "devices.csv"), "devices", TABLES["devices"])
    assert cores >= 2 and rows.rdd.getNumPartitions() >= 2 * cores
    per_partition = rows.rdd.glom().map(len).collect()
    assert sum(1 for n in per_partition if n) >= 2  # the rows really are spread
    assert sorted((r["_row"], r["client_id"]) for r in rows.collect()) == [
        (i + 1, f"dev-{i:06d}") for i in range(count)
    ]
    assert invalid.count() == 0


def test_a_small_table_is_checked_as_read_without_a_shuffle(spark: Any, tmp_path: Path) -> None:
    """A table of a few rows (rule sets, a small fleet's gateways) is checked in the partition
    it was read into: spreading it cost one shuffle, and one more Spark job under adaptive
    execution, per table for checks that take milliseconds."""
    lines = ["set,topic"] + [f"s{i % 3},t/{i}" for i in range(40)]
    (tmp_path / "permissions.csv").write_text("\n".join(lines) + "\n")
    rows, invalid = read_table(
        spark, str(tmp_path / "permissions.csv"), "permissions", TABLES["permissions"]
    )
    assert rows.rdd.getNumPartitions() == 1
    assert "Exchange" not in rows._jdf.queryExecution().executedPlan().toString()
    assert sorted(r["_row"] for r in rows.collect()) == list(range(1, 41))
    assert invalid.count() == 0


def test_csv_header_read_on_the_driver(spark: Any, tmp_path: Path) -> None:
    """The CSV header is read from the file's first line (a folder's first part file) and
    becomes the schema; an empty name is Spark's ``_c<i>``, a name given twice is refused with
    the file named, and an empty file lacks every required column."""
    from edge_broker.pipeline.inputs import csv_header
    from edge_broker.pipeline.storage import Storage

    storage = Storage(spark)
    (tmp_path / "a.csv").write_text('\ufeffgateway,"client_id",,sets\ngw-1,c,x,s\n')
    assert csv_header(storage, str(tmp_path / "a.csv")) == ["gateway", "client_id", "_c2", "sets"]
    (tmp_path / "parts.csv").mkdir()
    (tmp_path / "parts.csv" / "_SUCCESS").write_text("")
    (tmp_path / "parts.csv" / "part-0.csv").write_text("gateway,version\ngw-1,1\n")
    (tmp_path / "parts.csv" / "part-1.csv").write_text("gateway,version\ngw-2,2\n")
    assert csv_header(storage, (tmp_path / "parts.csv").as_uri()) == ["gateway", "version"]
    rows, invalid = read_table(
        spark, (tmp_path / "parts.csv").as_uri(), "gateways", TABLES["gateways"]
    )
    assert sorted((r["gateway"], r["version"]) for r in rows.collect()) == [
        ("gw-1", 1),
        ("gw-2", 2),
    ]
    (tmp_path / "devices.csv").write_text("gateway,sets,gateway,client_id\ngw-1,s,gw-2,c\n")
    with pytest.raises(PipelineError, match=r"devices.csv: column\(s\) gateway named twice"):
        read_table(spark, str(tmp_path / "devices.csv"), "devices", TABLES["devices"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "devices.csv").write_text("")
    with pytest.raises(PipelineError, match=r"lacks required column\(s\) gateway, client_id"):
        read_table(spark, str(tmp_path / "empty" / "devices.csv"), "devices", TABLES["devices"])


def test_bulk_writer_writes_every_file_and_raises_a_failed_write(
    spark: Any, tmp_path: Path
) -> None:
    """Bundles are written by :class:`BulkWriter`: directly on the local file system (the same
    path Hadoop would use, for plain paths and file:// URIs) or through Hadoop by a pool of
    threads; every file lands with its bytes, and a write that fails is raised, not lost."""
    from edge_broker.pipeline.storage import BulkWriter, Storage

    storage = Storage(spark)
    for name, base, direct in (
        ("plain", str(tmp_path / "plain"), True),
        ("uri", (tmp_path / "uri").as_uri(), True),
        ("hadoop", (tmp_path / "hadoop").as_uri(), False),
    ):
        with BulkWriter(storage, base, direct=direct) as writer:
            for i in range(300):
                writer.write(f"{base}/bundles/gw-{i}.cbor", bytes([i % 256]) * (i + 1))
            writer.write(f"{base}/policies/gw-0.json", b"{}\n")
        got = sorted((tmp_path / name / "bundles").iterdir())
        assert len(got) == 300, name
        assert all(
            (tmp_path / name / "bundles" / f"gw-{i}.cbor").read_bytes()
            == bytes([i % 256]) * (i + 1)
            for i in range(300)
        ), name
        assert (tmp_path / name / "policies" / "gw-0.json").read_text() == "{}\n"
        assert not list((tmp_path / name).rglob("*.crc")), name  # a bundle folder holds bundles
    (tmp_path / "blocked").write_text("a file where the folder should be")
    for direct in (True, False):
        with pytest.raises(Exception, match="blocked"):
            with BulkWriter(storage, str(tmp_path), direct=direct) as writer:
                writer.write(f"{tmp_path}/blocked/gw-1.cbor", b"x")


def _jobs(spark: Any, group: str) -> int:
    """Spark jobs started so far by this thread under job group ``group``."""
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))


def test_a_one_partition_table_is_numbered_without_a_spark_job(spark: Any, tmp_path: Path) -> None:
    """Reading a table only plans its checks: a CSV file costs no Spark job at all. Its header
    is read on the driver and given as the schema (Spark used to run one job per table to find
    the columns), and one partition is numbered without collecting per-partition counts."""
    lines = ["gateway,client_id,sets"] + [f"gw-{i % 7},dev-{i},sensor" for i in range(300)]
    (tmp_path / "devices.csv").write_text("\n".join(lines) + "\n")
    group = f"one-partition-{tmp_path.name}"
    spark.sparkContext.setJobGroup(group, "read_table")
    try:
        rows, invalid = read_table(
            spark, str(tmp_path / "devices.csv"), "devices", TABLES["devices"]
        )
        assert _jobs(spark, group) == 0
        assert sorted((r["_row"], r["client_id"]) for r in rows.collect()) == [
            (i + 1, f"dev-{i}") for i in range(300)
        ]
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert invalid.count() == 0


def test_rows_for_the_driver_are_collected_by_one_action(spark: Any) -> None:
    """compile's valid permission and grant rows and the distinct names invalid rows taint come
    back from one Spark action (the distinct's shuffle is its one extra job under adaptive
    execution), not one collect per table and kind, each under its name with its own columns."""
    from edge_broker.pipeline.compile import _collect_together

    rules = spark.createDataFrame([("s", 2, 7), ("s", 1, 9)], "set string, seq long, _row long")
    grants = spark.createDataFrame(
        [("t1", "pub", "a/b", 3)], "tenant string, direction string, rule string, _row long"
    )
    scopes = spark.createDataFrame([("s",), (None,), ("s",)], "_scope string").distinct()
    group = "collect-together"
    spark.sparkContext.setJobGroup(group, "collect")
    try:
        got = _collect_together(
            {"rule": rules, "grant": grants, "scope": scopes, "none": scopes.limit(0)}
        )
        assert _jobs(spark, group) <= 2
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert sorted((r["set"], r["seq"], r["_row"]) for r in got["rule"]) == [
        ("s", 1, 9),
        ("s", 2, 7),
    ]
    assert [(r["tenant"], r["direction"], r["rule"], r["_row"]) for r in got["grant"]] == [
        ("t1", "pub", "a/b", 3)
    ]
    assert sorted(r["_scope"] or "" for r in got["scope"]) == ["", "s"]
    assert got["none"] == []
