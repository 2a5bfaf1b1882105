"""Reading the pipeline's input tables (Parquet, CSV with a header, or JSON lines) by extension.

Every table is read as strings first, then checked against its declared columns: a missing
required column fails the job (naming the file and the columns it has); a value of the wrong type
or a line that is not JSON becomes an *invalid row* (file, 1-based row number, reason) that the
job reports with the rule errors. Rows keep ``_file`` and ``_row`` so every later error can
name them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .spark import PipelineError
from .storage import Storage, join

FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
INVALID_COLUMNS = ("table", "file", "row", "key", "reason")


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: str = "string"  # "string" or "long"
    required: bool = False


def find_table(storage: Storage, directory: str, table: str) -> str | None:
    """``<directory>/<table>.parquet|.csv|.json|.jsonl`` (a file or a Parquet directory), looked
    up through Hadoop (``directory`` may be a path or a ``file://``, ``hdfs://``, ``s3a://``
    URI)."""
    for ext in FORMATS:
        path = join(directory, f"{table}{ext}")
        if storage.exists(path):
            return path
    return None


def read_table(
    spark: Any, path: str, table: str, columns: tuple[Column, ...], scope: str | None = None
) -> tuple[Any, Any]:
    """(rows, invalid): rows with the declared columns (typed), ``_file`` and ``_row``; invalid
    rows as (table, file, row, key, reason, _scope), ``_scope`` being the value of column
    ``scope`` (what an invalid row taints: its permission set, its gateway)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    ext = "." + path.rsplit(".", 1)[-1].lower() if "." in path.rsplit("/", 1)[-1] else ""
    fmt = FORMATS.get(ext)
    if fmt is None:
        raise PipelineError(
            f"{path}: unknown format; name the file .parquet, .csv or .json (JSON lines)"
        )
    names = [c.name for c in columns]
    storage = Storage(spark)
    if fmt == "csv":
        # the header is read here on the driver (its first line only) and given as the schema,
        # every column a string: Spark then runs no job to find the columns before the checks.
        # multiLine: a quoted field with a line break is one value of one row, as in every CSV tool
        header = csv_header(storage, path)
        df = (
            spark.createDataFrame([], T.StructType([]))
            if not header
            else (
                spark.read.schema(T.StructType([T.StructField(n, T.StringType()) for n in header]))
                .option("header", "true")
                .option("enforceSchema", "true")  # the schema is the header itself, in its order
                .option("mode", "PERMISSIVE")
                .option("multiLine", "true")
                .csv(path)
            )
        )
    elif fmt == "json":
        schema = T.StructType(
            [T.StructField(n, T.StringType()) for n in names]
            + [T.StructField("_corrupt_record", T.StringType())]
        )
        df = spark.read.schema(schema).option("mode", "PERMISSIVE").json(path)
    else:
        df = spark.read.parquet(path)
    present = set(df.columns)
    missing = [c.name for c in columns if c.required and c.name not in present]
    if fmt == "json":
        # with an explicit schema every column is "present": a required one that is null in every
        # row is a missing column (checked on a sample-free aggregate, one pass)
        counts = df.agg(
            *[F.count(F.col(n)).alias(n) for n in names], F.count(F.lit(1)).alias("_n")
        ).first()
        if counts["_n"] > 0:
            missing = [c.name for c in columns if c.required and counts[c.name] == 0]
    if missing:
        have = ", ".join(sorted(c for c in present if not c.startswith("_"))) or "none"
        raise PipelineError(
            f"{path}: table {table!r} lacks required column(s) {', '.join(missing)} (it has: "
            f"{have})"
        )
    for c in columns:
        if c.name not in present:
            df = df.withColumn(c.name, F.lit(None).cast("string"))
        else:
            df = df.withColumn(c.name, F.col(c.name).cast("string"))
    corrupt = "_corrupt_record" in df.columns
    keep = names + (["_corrupt_record"] if corrupt else [])
    read_partitions = df.rdd.getNumPartitions()
    rows = _numbered(df.select(*keep), read_partitions).withColumn("_file", F.lit(path))
    problems = []
    if corrupt:
        problems.append(
            F.when(F.col("_corrupt_record").isNotNull(), F.lit("(line)|not a JSON object"))
        )
    for c in columns:
        if c.required:
            problems.append(
                F.when(
                    F.col(c.name).isNull() | (F.trim(F.col(c.name)) == ""),
                    F.lit(f"{c.name}|missing value"),
                )
            )
        if c.kind == "long":
            problems.append(
                F.when(
                    F.col(c.name).isNotNull() & ~F.col(c.name).rlike(r"^\s*-?[0-9]{1,18}\s*$"),
                    F.concat(F.lit(f"{c.name}|not an integer: "), F.col(c.name)),
                )
            )
    problem = F.coalesce(*problems) if problems else F.lit(None).cast("string")
    rows = _spread(spark, rows.withColumn("_problem", problem), read_partitions, storage.size(path))
    rows = rows.cache()  # read, numbered once
    invalid = rows.where(F.col("_problem").isNotNull()).select(
        F.lit(table).alias("table"),
        F.col("_file").alias("file"),
        F.col("_row").alias("row"),
        F.split(F.col("_problem"), r"\|", 2)[0].alias("key"),
        # the reason names its column, as the broker's own messages do ("version: not an integer")
        F.when(
            F.split(F.col("_problem"), r"\|", 2)[0] == "(line)",
            F.split(F.col("_problem"), r"\|", 2)[1],
        )
        .otherwise(
            F.concat_ws(
                ": ",
                F.split(F.col("_problem"), r"\|", 2)[0],
                F.split(F.col("_problem"), r"\|", 2)[1],
            )
        )
        .alias("reason"),
        (F.col(scope) if scope else F.lit(None).cast("string")).alias("_scope"),
    )
    good = rows.where(F.col("_problem").isNull()).drop("_problem")
    if corrupt:
        good = good.drop("_corrupt_record")
    for c in columns:
        if c.kind == "long":
            good = good.withColumn(c.name, F.trim(F.col(c.name)).cast("long"))
    return good, invalid


HEADER_BYTES = 1024 * 1024  # a CSV header longer than this is refused, not read whole


def csv_header(storage: Storage, path: str) -> list[str]:
    """The column names in the first record of the CSV file ``path`` (of the first data file
    when ``path`` is a folder of parts), read through Hadoop on the driver: at most
    HEADER_BYTES, never the table. Named as Spark names them (an empty name is ``_c<i>``); a
    name given twice is refused, since which column was meant is unknown."""
    import csv
    import io

    source = path
    if storage.is_dir(path):
        parts = [
            f for f in storage.list_files(path) if not f.rsplit("/", 1)[-1].startswith(("_", "."))
        ]
        if not parts:
            raise PipelineError(f"{path}: a folder with no CSV file in it")
        source = parts[0]
    data, whole = storage.read_head(source, HEADER_BYTES)
    text = data.decode("utf-8", errors="replace").removeprefix("\ufeff")
    records = csv.reader(io.StringIO(text if whole else text[: text.rfind("\n") + 1]))
    first = next(records, None)
    if not first:
        if whole and not text.strip():
            return []  # no columns: the caller names the required ones that are missing
        raise PipelineError(
            f"{source}: no header line in the first {HEADER_BYTES} bytes; the first line must "
            "name the columns"
        )
    names = [name or f"_c{i}" for i, name in enumerate(first)]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise PipelineError(
            f"{source}: column(s) {', '.join(twice)} named twice in the header; name each "
            "column once"
        )
    return names


SPREAD_BYTES = 64 * 1024  # input bytes per partition of the checks (about 1,500 device rows)


def _spread(spark: Any, df: Any, partitions: int, size: int) -> Any:
    """``df`` (read as ``partitions``, from ``size`` bytes) over one partition per SPREAD_BYTES,
    at most two per core: a CSV read with ``multiLine`` (or one small file) is one partition,
    and every check after it (the broker's parsers, in Python) would run as one task on one
    core while the others wait. A table smaller than that (a few rule or gateway rows) stays
    as read: a shuffle of it costs more than its checks. Numbered before, so row numbers stay
    those of the file."""
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    target = min(2 * cores, size // SPREAD_BYTES)
    if target < 2 or partitions >= target:
        return df
    return df.repartition(target)


def _numbered(df: Any, partitions: int) -> Any:
    """``df`` (read as ``partitions``) with ``_row``: the 1-based row number in read order (a
    file's line order for CSV and JSON lines), computed in the JVM. One partition (a CSV file
    read with ``multiLine``, any small file) is numbered by ``monotonically_increasing_id``
    alone, without a Spark job; more need a job for the per-partition counts, then each
    partition's offset plus the record's index within it (the low 33 bits of that id)."""
    from pyspark.sql import functions as F

    if partitions == 1:
        return df.withColumn("_row", (F.monotonically_increasing_id() + 1).cast("long"))
    tagged = df.withColumn("_pid", F.spark_partition_id()).withColumn(
        "_mid", F.monotonically_increasing_id()
    )
    counts = sorted((r["_pid"], r["count"]) for r in tagged.groupBy("_pid").count().collect())
    offsets: list[Any] = []
    total = 0
    for pid, count in counts:
        offsets += [F.lit(pid), F.lit(total)]
        total += count
    offset = F.create_map(*offsets)[F.col("_pid")] if offsets else F.lit(0)
    index = F.col("_mid") - F.col("_pid").cast("long") * F.lit(1 << 33)
    return tagged.withColumn("_row", (offset + index + 1).cast("long")).drop("_pid", "_mid")
