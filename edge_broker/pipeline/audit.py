"""``audit``: the gateways' audit records (format v1, ``edge_broker/audit/record.py``) ->
denials by tenant, client, topic and rule; claim-flood offenders; egress-filtered deliveries;
top talkers. Written as Parquet under ``<out>/<name>/`` and summarised in ``<out>/report.html``.

- denials: ``type = decision`` and ``outcome`` deny or disconnect (every gate, every action).
- claim-flood offenders: decisions or events with ``rc = 0x97`` (Quota exceeded) on the SMOKER
  claim topics (``access/claim``, ``access/unclaim``) or from the claims gate.
- egress-filtered deliveries: ``action = deliver`` and ``outcome = deny`` (``to`` is the receiver).
- top talkers: ``event = client_stats`` summed per gateway, tenant and client.

An aggregated record (one with ``count``: the broker writes repeated identical decisions once
per window) counts as ``count`` requests in every table; a default-deny denial (no rule) is
grouped under the permission set(s) that applied (its ``set``).

Lines that are not JSON objects or not version 1 are counted and listed (file and text) in the
report; ``strict`` makes them fail the job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..audit.record import FORMAT_VERSION, RECORD_FIELDS
from ..matching.names import DEFAULT_TENANT
from ..matching.reserved_topics import CLAIM_TOPIC, UNCLAIM_TOPIC
from .report import bar_chart, cut_note, page, table, utc_time
from .spark import PipelineError, progress, tune_partitions
from .storage import SHARED, Storage, join
from .weekly import TABLES as WEEKLY_TABLES
from .weekly import WEEK, weekly_section, weekly_tables

QUOTA_EXCEEDED = 0x97
CLAIM_TOPICS = (CLAIM_TOPIC, UNCLAIM_TOPIC)  # defined once, in matching.reserved_topics
OUTPUTS = (
    "denials_by_tenant",
    "denials_by_client",
    "denials_by_topic",
    "denials_by_rule",
    "denials_by_gateway",
    "denials_by_day",
    "claim_flood",
    "egress_filtered",
    "egress_by_rule",
    "top_talkers",
    *WEEKLY_TABLES,
)


@dataclass(frozen=True, slots=True)
class AuditResult:
    records: int
    denials: int
    bad_lines: int
    out: str
    tables: dict[str, list[dict[str, Any]]]


def record_schema() -> Any:
    from pyspark.sql import types as T

    kinds = {
        int: T.LongType(),
        float: T.DoubleType(),
        str: T.StringType(),
        bool: T.BooleanType(),
        list: T.ArrayType(T.StringType()),
    }
    fields = [T.StructField(name, kinds[kind]) for name, kind in RECORD_FIELDS.items()]
    # "batch": the header line of an uploaded batch (edge_broker/sync/upload.py), not a record
    return T.StructType(
        fields
        + [T.StructField("batch", T.StringType()), T.StructField("_corrupt_record", T.StringType())]
    )


@dataclass(frozen=True, slots=True)
class Records:
    records: Any  # valid v1 records (cached) with ``_file``
    bad: Any  # lines that are not v1 records: _file, reason, text (as written)
    files: int
    duplicate_batches: int  # uploaded batch files dropped because their batch id was seen before


RECORDS = "records"  # <audit out>/records: the cleaned records, by gateway and date


def write_records(records: Any, target: str) -> None:
    """The cleaned records as Parquet partitioned by ``gateway`` (the record's ``gw``) and
    ``date`` (UTC day of ``ts``): a job for one gateway (``whatif``) then reads only that
    gateway's folders. Repartitioned by the same keys first so that each (gateway, date) is one
    file, not one per input task, into a fixed number of partitions (at least two per core):
    adaptive execution would coalesce a small input into one task writing every gateway's file
    on one core (measured: 3,000 gateways, 300k records, one core busy for minutes)."""
    from pyspark.sql import functions as F

    spark = records.sparkSession
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    partitions = max(2 * cores, int(spark.conf.get("spark.sql.shuffle.partitions")))
    day = F.date_format(F.from_unixtime(F.col("ts")), "yyyy-MM-dd")
    (
        records.withColumnRenamed("gw", "gateway")
        .withColumn("date", day)
        .repartition(partitions, "gateway", "date")
        .write.mode("overwrite")
        .partitionBy("gateway", "date")
        .parquet(target)
    )


def _records_folder(storage: Storage, uri: str) -> str | None:
    """``uri`` (or ``uri/records``) when it is an audit job's records folder, else None."""
    for candidate in (uri, join(uri, RECORDS)):
        if storage.exists(join(candidate, "_SUCCESS")) and not storage.list_files(
            candidate, ".jsonl"
        ):
            return candidate
    return None


def _read_written(spark: Any, folders: list[str], gateway: str | None) -> Any:
    """Records written by :func:`write_records`. The partition columns are typed by the schema
    (a gateway named ``0001`` stays a string) and the gateway filter is on the partition column,
    so Spark lists and opens only ``gateway=<id>`` folders (partition pruning)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [
        T.StructField("gateway" if f.name == "gw" else f.name, f.dataType)
        for f in record_schema().fields
        if f.name not in ("batch", "_corrupt_record")
    ]
    schema = T.StructType(
        [*fields, T.StructField("_file", T.StringType()), T.StructField("date", T.StringType())]
    )
    df = spark.read.schema(schema).parquet(*folders)
    if gateway is not None:
        df = df.where(F.col("gateway") == gateway)
    return df.withColumnRenamed("gateway", "gw").drop("date")


def read_records(spark: Any, inputs: list[str], gateway: str | None = None) -> Records:
    """Audit segments or stored upload batches (``*.jsonl`` files, or folders searched
    recursively; paths or Hadoop URIs), read by the executors, and records folders written by
    the audit job (:func:`write_records`; read pruned to ``gateway``). A batch header line is
    not a bad line; a batch whose (gateway, batch id) another file already holds is dropped
    (uploads are at least once). Records are cached: every table below is computed from one
    read. With ``gateway``, only that gateway's lines (and unreadable ones) are kept, before
    the cache."""
    from pyspark.sql import functions as F

    storage = Storage(spark)
    folders = {i: _records_folder(storage, i) for i in inputs}
    written = [f for f in folders.values() if f is not None]
    lines = [i for i, f in folders.items() if f is None]
    if not written:
        return _read_lines(spark, lines, gateway)
    cleaned = _read_written(spark, written, gateway)
    if lines:
        read = _read_lines(spark, lines, gateway)
        both = read.records.unionByName(cleaned).cache()
        return Records(both, read.bad, read.files, read.duplicate_batches)
    bad = cleaned.limit(0).select(
        "_file",
        F.lit(None).cast("string").alias("reason"),
        F.lit(None).cast("string").alias("text"),
    )
    return Records(cleaned.cache(), bad, len(written), 0)


def _read_lines(spark: Any, inputs: list[str], gateway: str | None) -> Records:
    from pyspark.errors import AnalysisException
    from pyspark.sql import functions as F

    reader = (
        spark.read.schema(record_schema())
        .option("mode", "PERMISSIVE")
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
    )
    try:
        df = reader.json(list(inputs))
        files = df.inputFiles()
    except AnalysisException as exc:
        first = str(exc).splitlines()[0]
        if "PATH_NOT_FOUND" in first:  # the driver lists the input: executors alone do not count
            first += f"; the driver lists the input files: put them on {SHARED}"
        raise PipelineError(f"{', '.join(inputs)}: {first}") from exc
    if not files:
        raise PipelineError(f"{', '.join(inputs)}: no audit segments or batches (*.jsonl)")
    df = df.withColumn("_file", F.input_file_name())
    if gateway is not None:
        df = df.where((F.col("gw") == gateway) | F.col("gw").isNull())
    problem = (
        F.when(F.col("_corrupt_record").isNotNull(), F.lit("not a JSON object of v1 fields"))
        .when(
            F.col("v").isNull() | (F.col("v") != FORMAT_VERSION),
            F.lit(f"not format version {FORMAT_VERSION}"),
        )
        .when(~F.col("type").isin("decision", "event"), F.lit("type must be decision or event"))
    )
    # cached as parsed: the batch-header check below, the bad-line count and every table read
    # the JSON once (it was parsed three times: headers, first batch files, then the cache)
    df = df.withColumn("_problem", problem).cache()
    header = F.col("batch").isNotNull() & F.col("v").isNull() & F.col("_corrupt_record").isNull()
    headers = df.where(header).select("_file", "gw", "batch")
    firsts = headers.groupBy("gw", "batch").agg(F.min("_file").alias("_first"))
    repeated = (
        headers.join(firsts, ["gw", "batch"])
        .where(F.col("_file") != F.col("_first"))
        .select("_file")
        .distinct()
    )
    repeated_files = [
        r["_file"] for r in repeated.collect()
    ]  # at most one row per stored batch file
    if repeated_files:
        progress(f"dropping {len(repeated_files)} batch file(s) whose batch id was already read")
        df = df.where(~F.col("_file").isin(repeated_files))
    df = df.where(~header)
    bad = df.where(F.col("_problem").isNotNull()).select(
        "_file", F.col("_problem").alias("reason"), F.col("_corrupt_record").alias("text")
    )
    good = df.where(F.col("_problem").isNull()).drop("_problem", "_corrupt_record", "batch")
    return Records(good, bad, len(files), len(repeated_files))


def bad_line_sample(spark: Any, bad: Any, limit: int = 50) -> list[dict[str, Any]]:
    """Up to ``limit`` bad lines with file, 1-based line number, reason and the line as written:
    only the (at most ``limit``) files that have one are read again, whole, by the executors."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = [r["_file"] for r in bad.select("_file").distinct().limit(limit).collect()]
    if not files:
        return []
    result = T.ArrayType(
        T.StructType(
            [
                T.StructField("line", T.LongType()),
                T.StructField("reason", T.StringType()),
                T.StructField("text", T.StringType()),
            ]
        )
    )

    def scan(text: str) -> list[tuple[int, str, str]]:
        from ..audit.record import AuditRecordError, decode_record

        found = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                decode_record(line)
            except AuditRecordError as exc:
                try:
                    if "batch" in json.loads(line) and "v" not in json.loads(line):
                        continue  # an upload batch's header
                except ValueError:
                    pass
                found.append((number, str(exc), line[:300]))
                if len(found) >= limit:
                    break
        return found

    # a plain (not pandas) UDF: Spark must not guess a kind from the hints
    scan.__annotations__ = {}
    whole = spark.read.text(files, wholetext=True).withColumn("_file", F.input_file_name())
    rows = (
        whole.select("_file", F.explode(F.udf(scan, result)("value")).alias("b"))
        .select("_file", "b.line", "b.reason", "b.text")
        .orderBy("_file", "line")
        .limit(limit)
        .collect()
    )
    return [r.asDict() for r in rows]


def weight() -> Any:
    """How many requests a record stands for: its ``count`` (an aggregated record), else 1."""
    from pyspark.sql import functions as F

    return F.coalesce(F.col("count"), F.lit(1))


def rule_label() -> Any:
    """The deciding rule, or for a denial no rule decided (default deny) the permission set(s)
    that applied, from the record's ``set``: ``(no rule: set a,b)``, ``(no rule: unassigned)``;
    ``(no rule)`` when neither is known (records written before ``set``, other gates)."""
    from pyspark.sql import functions as F

    sets = F.col("set")
    return F.coalesce(
        F.col("rule"),
        F.when(sets == "unassigned", F.lit("(no rule: unassigned)")).when(
            sets.isNotNull(), F.concat(F.lit("(no rule: set "), sets, F.lit(")"))
        ),
        F.lit("(no rule)"),
    )


def denial_counts(records: Any, last_ts: float | None) -> Any:
    """Denials (``type = decision``, ``outcome`` deny or disconnect) counted per gateway, tenant
    (``~`` for none), client, action, topic, gate, rule (:func:`rule_label`: default-deny
    denials per permission set), rc, UTC day and ``week`` (1: this week, 2: the week before,
    0: earlier; :mod:`.weekly`): every denials table, this week's included, is a sum over these
    counts, and an aggregated record counts as its ``count`` requests (:func:`weight`). One
    pass over the records makes them; the tables then read this far smaller frame (cached by
    the caller) instead of all the records each."""
    from pyspark.sql import functions as F

    last = float(last_ts) if last_ts is not None else 0.0
    ts = F.col("ts")
    week = (
        F.when(F.lit(last_ts is None) | ts.isNull(), 0)
        .when((ts > F.lit(last - WEEK)) & (ts <= F.lit(last)), 1)
        .when((ts > F.lit(last - 2 * WEEK)) & (ts <= F.lit(last - WEEK)), 2)
        .otherwise(0)
    )
    denials = records.where(
        (F.col("type") == "decision") & F.col("outcome").isin("deny", "disconnect")
    )
    return denials.groupBy(
        "gw",
        F.coalesce(F.col("tenant"), F.lit(DEFAULT_TENANT)).alias("tenant"),
        "client",
        "action",
        "topic",
        "gate",
        rule_label().alias("rule"),
        "rc",
        F.date_format(F.from_unixtime(ts), "yyyy-MM-dd").alias("day"),
        week.alias("week"),
    ).agg(F.sum(weight()).alias("n"))


def audit_tables(records: Any, top: int = 20, denials: Any = None) -> dict[str, Any]:
    """The analyses as DataFrames (see the module docstring); ``denials``: the
    :func:`denial_counts` of ``records`` (computed here when not given)."""
    from pyspark.sql import functions as F

    if denials is None:
        denials = denial_counts(records, None)
    decisions = records.where(F.col("type") == "decision")
    count = F.sum("n").alias("denials")
    tenant = F.coalesce(F.col("tenant"), F.lit(DEFAULT_TENANT)).alias("tenant")
    out = {
        "denials_by_tenant": denials.groupBy("tenant")
        .agg(count)
        .orderBy(F.desc("denials"), "tenant"),
        "denials_by_client": denials.groupBy("gw", "tenant", "client")
        .agg(count)
        .orderBy(F.desc("denials"), "gw", "client"),
        "denials_by_topic": denials.groupBy("tenant", "action", "topic")
        .agg(count)
        .orderBy(F.desc("denials"), "topic"),
        "denials_by_rule": denials.groupBy(
            "gate", F.coalesce(F.col("rule"), F.lit("(no rule)")).alias("rule"), "rc"
        )
        .agg(count)
        .orderBy(F.desc("denials"), "gate", "rule"),
    }
    flood = records.where(
        (F.col("rc") == QUOTA_EXCEEDED)
        & (F.col("topic").isin(*CLAIM_TOPICS) | (F.col("gate") == "claims"))
        & ((F.col("type") == "decision") | F.col("event").isin("claim", "unclaim"))
    )
    out["claim_flood"] = (
        flood.groupBy("gw", tenant, "client")
        .agg(
            F.sum(weight()).alias("refused_claims"),
            F.min("ts").alias("first_ts"),
            F.max("ts").alias("last_ts"),
        )
        .orderBy(F.desc("refused_claims"), "gw", "client")
    )
    egress = decisions.where((F.col("action") == "deliver") & (F.col("outcome") == "deny"))
    out["egress_filtered"] = (
        egress.groupBy("gw", tenant, "to", "topic", "gate", rule_label().alias("rule"))
        .agg(F.sum(weight()).alias("filtered"))
        .orderBy(F.desc("filtered"), "gw", "to", "topic")
    )
    out["egress_by_rule"] = (
        egress.groupBy("gate", rule_label().alias("rule"))
        .agg(F.sum(weight()).alias("filtered"))
        .orderBy(F.desc("filtered"), "gate", "rule")
    )
    out["denials_by_gateway"] = denials.groupBy("gw").agg(count).orderBy(F.desc("denials"), "gw")
    out["denials_by_day"] = denials.groupBy("day").agg(count).orderBy("day")
    stats = records.where((F.col("type") == "event") & (F.col("event") == "client_stats"))
    out["top_talkers"] = (
        stats.groupBy("gw", tenant, "client")
        .agg(
            F.sum(F.coalesce("msgs_in", F.lit(0))).alias("msgs_in"),
            F.sum(F.coalesce("msgs_out", F.lit(0))).alias("msgs_out"),
            F.sum(F.coalesce("bytes_in", F.lit(0))).alias("bytes_in"),
            F.sum(F.coalesce("bytes_out", F.lit(0))).alias("bytes_out"),
        )
        .withColumn("msgs", F.col("msgs_in") + F.col("msgs_out"))
        .orderBy(F.desc("msgs"), "gw", "client")
        .limit(top)
    )
    return out


def run_audit(
    spark: Any,
    inputs: list[str],
    out: str,
    *,
    top: int = 20,
    strict: bool = False,
    records_out: bool = True,
) -> AuditResult:
    """The audit job; ``records_out=False`` (``--no-records``) skips writing ``<out>/records``
    (one small file per gateway and day: about half again the job's time for 3,000 gateways
    with 100 records each)."""
    from pyspark.sql import functions as F

    storage = Storage(spark)
    storage.mkdirs(out)  # fails now, naming the URI, if its file system is not available
    partitions = tune_partitions(spark, sum(storage.size(i) for i in inputs))
    progress(f"reading audit records from {', '.join(inputs)} ({partitions} shuffle partitions)")
    read = read_records(spark, inputs)
    records = read.records
    bad_count = read.bad.count()
    bad_rows = bad_line_sample(spark, read.bad) if bad_count else []
    if bad_count and strict:
        first = bad_rows[0] if bad_rows else {"_file": "?", "line": "?", "reason": "?", "text": ""}
        raise PipelineError(
            f"{first['_file']} line {first['line']}: {first['reason']}: {first['text'][:200]!r} "
            f"({bad_count} bad audit line(s) in all)"
        )
    overview = records.agg(
        F.count(F.lit(1)).alias("n"),
        F.min("ts").alias("first"),
        F.max("ts").alias("last"),
        F.countDistinct("gw").alias("gateways"),
    ).first()
    total = int(overview["n"])
    if records_out:
        records_dir = join(out, RECORDS)
        progress(f"writing the cleaned records by gateway and date to {records_dir}")
        write_records(records, records_dir)
        storage.check_landed(records_dir, "Parquet")
    progress(f"{total} records; computing denials, claim floods, egress filtering, top talkers")
    tables: dict[str, list[dict[str, Any]]] = {}
    sizes: dict[str, int] = {}
    denials_cube = denial_counts(records, overview["last"]).cache()
    frames = {
        **audit_tables(records, top, denials_cube),
        **weekly_tables(records, overview["last"], denials_cube),
    }
    for name, frame in frames.items():
        frame = frame.cache()  # computed once: written, counted and sampled from the cache
        target = join(out, name)
        frame.write.mode("overwrite").parquet(target)
        storage.check_landed(target, "Parquet")
        sizes[name] = frame.count()
        tables[name] = [r.asDict() for r in frame.limit(top).collect()]
        frame.unpersist()
        progress(f"wrote {target}")
    denials = sum(
        int(r["denials"]) for r in spark.read.parquet(join(out, "denials_by_tenant")).collect()
    )
    week = (
        spark.read.parquet(join(out, "week_denials_by_gateway"))
        .agg(F.sum("this_week").alias("this_week"), F.sum("before").alias("before"))
        .first()
    )
    last = overview["last"]
    summary = {
        "records": total,
        "denials": denials,
        "bad_lines": bad_count,
        "files": read.files,
        "gateways": int(overview["gateways"]),
        "first_ts": overview["first"],
        "last_ts": overview["last"],
        "duplicate_batches": read.duplicate_batches,
        "rows": sizes,
        "week": {
            "first": None if last is None else last - WEEK,
            "last": last,
            "this_week": int(week["this_week"] or 0),
            "before": int(week["before"] or 0),
        },
    }
    storage.write_text(
        join(out, "report.html"), _report_html(summary, bad_rows, tables, sizes, top)
    )
    storage.write_text(join(out, "summary.json"), json.dumps(summary) + "\n")
    denials_cube.unpersist()
    records.unpersist()
    return AuditResult(total, denials, bad_count, out, tables)


def _report_html(
    summary: dict[str, Any],
    bad_rows: list[dict[str, Any]],
    tables: dict[str, list[dict[str, Any]]],
    sizes: dict[str, int],
    top: int,
) -> str:
    def chart(name: str, title: str, label: Any, value: str) -> str:
        rows = tables[name]
        return bar_chart(title, [label(r) for r in rows], [float(r[value] or 0) for r in rows])

    def cut(name: str) -> str:
        return cut_note(name, sizes, top)

    when = utc_time

    for r in tables["denials_by_rule"]:
        r["rc_hex"] = None if r.get("rc") is None else f"0x{int(r['rc']):02X}"
    head = [
        {
            "records": summary["records"],
            "denials": summary["denials"],
            "bad lines": summary["bad_lines"],
            "gateways": summary["gateways"],
            "files": summary["files"],
            "from": when(summary["first_ts"]),
            "to": when(summary["last_ts"]),
            "duplicate batches dropped": summary["duplicate_batches"],
        }
    ]
    sections = [
        ("Summary", table(head, list(head[0]))),
        ("What changed this week", weekly_section(tables, sizes, top, summary["week"])),
        (
            "Denials over time (per day, UTC)",
            chart("denials_by_day", "denials per day", lambda r: r["day"], "denials")
            + cut("denials_by_day")
            + table(tables["denials_by_day"], ["day", "denials"]),
        ),
        (
            "Denials by gateway",
            chart("denials_by_gateway", "denials per gateway", lambda r: r["gw"], "denials")
            + cut("denials_by_gateway")
            + table(tables["denials_by_gateway"], ["gw", "denials"]),
        ),
        (
            "Denials by tenant",
            chart("denials_by_tenant", "denials per tenant", lambda r: r["tenant"], "denials")
            + cut("denials_by_tenant")
            + table(tables["denials_by_tenant"], ["tenant", "denials"]),
        ),
        (
            "Denials by rule",
            chart(
                "denials_by_rule",
                "denials per gate/rule",
                lambda r: f"{r['gate']}/{r['rule']}",
                "denials",
            )
            + cut("denials_by_rule")
            + table(tables["denials_by_rule"], ["gate", "rule", "rc_hex", "denials"]),
        ),
        (
            "Denials by client",
            cut("denials_by_client")
            + table(tables["denials_by_client"], ["gw", "tenant", "client", "denials"]),
        ),
        (
            "Denials by topic",
            cut("denials_by_topic")
            + table(tables["denials_by_topic"], ["tenant", "action", "topic", "denials"]),
        ),
        (
            "Claim-flood offenders (0x97 on claims)",
            chart(
                "claim_flood",
                "refused claims per client",
                lambda r: f"{r['gw']}/{r['client']}",
                "refused_claims",
            )
            + cut("claim_flood")
            + table(tables["claim_flood"], ["gw", "tenant", "client", "refused_claims"]),
        ),
        (
            "Egress-filtered deliveries by rule",
            cut("egress_by_rule") + table(tables["egress_by_rule"], ["gate", "rule", "filtered"]),
        ),
        (
            "Egress-filtered deliveries (to = receiver)",
            cut("egress_filtered")
            + table(
                tables["egress_filtered"],
                ["gw", "tenant", "to", "topic", "gate", "rule", "filtered"],
            ),
        ),
        (
            "Top talkers",
            chart(
                "top_talkers",
                "messages in+out per client",
                lambda r: f"{r['gw']}/{r['client']}",
                "msgs",
            )
            + table(
                tables["top_talkers"],
                ["gw", "tenant", "client", "msgs_in", "msgs_out", "bytes_in", "bytes_out"],
            ),
        ),
    ]
    if bad_rows:
        sections.append(
            (
                f"Bad lines (first {len(bad_rows)} of {summary['bad_lines']})",
                table(bad_rows, ["_file", "line", "reason", "text"]),
            )
        )
    return page("edge-broker audit report", sections)
