"""``audit``: the gateways' audit records (format v1, ``edge_broker/audit/record.py``) ->
denials by tenant, client, topic and rule; claim-flood offenders; egress-filtered deliveries;
top talkers. Written as Parquet under ``<out>/<name>/`` and summarised in ``<out>/report.html``.

- denials: ``type = decision`` and ``outcome`` deny or disconnect (every gate, every action).
- claim-flood offenders: decisions or events with ``rc = 0x97`` (Quota exceeded) on the SMOKER
  claim topics (``access/claim``, ``access/unclaim``) or from the claims gate.
- egress-filtered deliveries: ``action = deliver`` and ``outcome = deny`` (``to`` is the receiver).
- top talkers: ``event = client_stats`` summed per gateway, tenant and client.

Lines that are not JSON objects or not version 1 are counted and listed (file and text) in the
report; ``strict`` makes them fail the job.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..audit.record import FORMAT_VERSION, RECORD_FIELDS
from ..matching.reserved_topics import CLAIM_TOPIC, UNCLAIM_TOPIC
from .report import bar_chart, page, table
from .session import PipelineError, progress

QUOTA_EXCEEDED = 0x97
CLAIM_TOPICS = (CLAIM_TOPIC, UNCLAIM_TOPIC)  # defined once, in matching.reserved_topics
OUTPUTS = ("denials_by_tenant", "denials_by_client", "denials_by_topic", "denials_by_rule",
           "claim_flood", "egress_filtered", "top_talkers")


@dataclass(frozen=True, slots=True)
class AuditResult:
    records: int
    denials: int
    bad_lines: int
    out: str
    tables: dict[str, list[dict[str, Any]]]


def record_schema() -> Any:
    from pyspark.sql import types as T

    kinds = {int: T.LongType(), float: T.DoubleType(), str: T.StringType()}
    fields = [T.StructField(name, kinds[kind]) for name, kind in RECORD_FIELDS.items()]
    return T.StructType(fields + [T.StructField("_corrupt_record", T.StringType())])


def read_records(spark: Any, inputs: list[str]) -> tuple[Any, Any]:
    """(records, bad): valid v1 records with ``_file``; bad lines with file and text."""
    from pyspark.sql import functions as F

    paths = []
    for item in inputs:
        p = Path(item)
        if not p.exists():
            raise PipelineError(f"{item}: no such audit file or directory")
        if p.is_dir():
            found = sorted(str(f) for f in p.rglob("*.jsonl"))
            if not found:
                raise PipelineError(f"{item}: no audit segments (*.jsonl) in this directory")
            paths.extend(found)
        else:
            paths.append(str(p))
    df = spark.read.schema(record_schema()).option("mode", "PERMISSIVE").json(paths)
    df = df.withColumn("_file", F.input_file_name()).cache()
    problem = (F.when(F.col("_corrupt_record").isNotNull(), F.lit("not a JSON object of v1 fields"))
               .when(F.col("v").isNull() | (F.col("v") != FORMAT_VERSION), F.lit(f"not format version {FORMAT_VERSION}"))
               .when(~F.col("type").isin("decision", "event"), F.lit("type must be decision or event")))
    df = df.withColumn("_problem", problem)
    bad = df.where(F.col("_problem").isNotNull()).select(
        "_file", F.col("_problem").alias("reason"), F.coalesce(F.col("_corrupt_record"), F.to_json(F.struct("v", "type"))).alias("text"))
    good = df.where(F.col("_problem").isNull()).drop("_problem", "_corrupt_record")
    return good, bad


def audit_tables(records: Any, top: int = 20) -> dict[str, Any]:
    """The analyses as DataFrames (see the module docstring)."""
    from pyspark.sql import functions as F

    decisions = records.where(F.col("type") == "decision")
    denials = decisions.where(F.col("outcome").isin("deny", "disconnect"))
    count = F.count(F.lit(1)).alias("denials")
    tenant = F.coalesce(F.col("tenant"), F.lit("~")).alias("tenant")
    out = {
        "denials_by_tenant": denials.groupBy(tenant).agg(count).orderBy(F.desc("denials"), "tenant"),
        "denials_by_client": denials.groupBy("gw", tenant, "client").agg(count).orderBy(F.desc("denials"), "gw", "client"),
        "denials_by_topic": denials.groupBy(tenant, "action", "topic").agg(count).orderBy(F.desc("denials"), "topic"),
        "denials_by_rule": denials.groupBy("gate", F.coalesce(F.col("rule"), F.lit("(no rule)")).alias("rule"), "rc")
        .agg(count).orderBy(F.desc("denials"), "gate", "rule"),
    }
    flood = records.where((F.col("rc") == QUOTA_EXCEEDED) & (F.col("topic").isin(*CLAIM_TOPICS) | (F.col("gate") == "claims")))
    out["claim_flood"] = flood.groupBy("gw", tenant, "client").agg(
        F.count(F.lit(1)).alias("refused_claims"), F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts"),
    ).orderBy(F.desc("refused_claims"), "gw", "client")
    egress = decisions.where((F.col("action") == "deliver") & (F.col("outcome") == "deny"))
    out["egress_filtered"] = egress.groupBy("gw", tenant, "to", "topic", "gate", "rule").agg(
        F.count(F.lit(1)).alias("filtered")).orderBy(F.desc("filtered"), "gw", "to", "topic")
    stats = records.where((F.col("type") == "event") & (F.col("event") == "client_stats"))
    out["top_talkers"] = stats.groupBy("gw", tenant, "client").agg(
        F.sum(F.coalesce("msgs_in", F.lit(0))).alias("msgs_in"), F.sum(F.coalesce("msgs_out", F.lit(0))).alias("msgs_out"),
        F.sum(F.coalesce("bytes_in", F.lit(0))).alias("bytes_in"), F.sum(F.coalesce("bytes_out", F.lit(0))).alias("bytes_out"),
    ).withColumn("msgs", F.col("msgs_in") + F.col("msgs_out")).orderBy(F.desc("msgs"), "gw", "client").limit(top)
    return out


def run_audit(spark: Any, inputs: list[str], out: str, *, top: int = 20, strict: bool = False) -> AuditResult:
    from pyspark.sql import functions as F

    progress(f"reading audit records from {', '.join(inputs)}")
    records, bad = read_records(spark, inputs)
    bad_rows = [r.asDict() for r in bad.limit(50).collect()]
    bad_count = bad.count() if bad_rows else 0
    if bad_count and strict:
        first = bad_rows[0]
        raise PipelineError(f"{first['_file']}: {bad_count} bad audit line(s); first: {first['reason']}: {first['text'][:200]!r}")
    total = records.count()
    progress(f"{total} records; computing denials, claim floods, egress filtering, top talkers")
    outdir = Path(out)
    outdir.mkdir(parents=True, exist_ok=True)
    tables: dict[str, list[dict[str, Any]]] = {}
    for name, frame in audit_tables(records, top).items():
        frame.write.mode("overwrite").parquet(str(outdir / name))
        tables[name] = [r.asDict() for r in frame.limit(top).collect()]
        progress(f"wrote {outdir / name}")
    denials = records.where((F.col("type") == "decision") & F.col("outcome").isin("deny", "disconnect")).count()
    _write_report(outdir / "report.html", total, denials, bad_count, bad_rows, tables)
    (outdir / "summary.json").write_text(json.dumps({"records": total, "denials": denials, "bad_lines": bad_count}) + "\n")
    records.unpersist()
    return AuditResult(total, denials, bad_count, str(outdir), tables)


def _write_report(path: Path, total: int, denials: int, bad_count: int, bad_rows: list[dict[str, Any]],
                  tables: dict[str, list[dict[str, Any]]]) -> None:
    def chart(name: str, title: str, label: Any, value: str) -> str:
        rows = tables[name]
        return bar_chart(title, [label(r) for r in rows], [float(r[value] or 0) for r in rows])

    sections = [
        ("Summary", table([{"records": total, "denials": denials, "bad lines": bad_count}], ["records", "denials", "bad lines"])),
        ("Denials by tenant", chart("denials_by_tenant", "denials per tenant", lambda r: r["tenant"], "denials")
         + table(tables["denials_by_tenant"], ["tenant", "denials"])),
        ("Denials by rule", chart("denials_by_rule", "denials per gate/rule", lambda r: f"{r['gate']}/{r['rule']}", "denials")
         + table(tables["denials_by_rule"], ["gate", "rule", "rc", "denials"])),
        ("Denials by client", table(tables["denials_by_client"], ["gw", "tenant", "client", "denials"])),
        ("Denials by topic", table(tables["denials_by_topic"], ["tenant", "action", "topic", "denials"])),
        ("Claim-flood offenders (0x97 on claims)", chart("claim_flood", "refused claims per client",
         lambda r: f"{r['gw']}/{r['client']}", "refused_claims") + table(tables["claim_flood"], ["gw", "tenant", "client", "refused_claims"])),
        ("Egress-filtered deliveries", table(tables["egress_filtered"], ["gw", "tenant", "to", "topic", "gate", "rule", "filtered"])),
        ("Top talkers", chart("top_talkers", "messages in+out per client", lambda r: f"{r['gw']}/{r['client']}", "msgs")
         + table(tables["top_talkers"], ["gw", "tenant", "client", "msgs_in", "msgs_out", "bytes_in", "bytes_out"])),
    ]
    if bad_rows:
        sections.append(("Bad lines (first 50)", table(bad_rows, ["_file", "reason", "text"])))
    path.write_text(page("edge-broker audit report", sections), encoding="utf-8")
