"""``whatif``: replay logged requests against a candidate bundle -> every decision that changes.

The requests are the audit log's ``publish`` and ``subscribe`` decisions (denials are always
logged; allowed ones only with ``[audit] log_allowed = true`` on the gateway: without them the
job cannot see what a stricter candidate would newly refuse). Identical requests are replayed
once, grouped with their weight: the sum of the records' ``count`` (an aggregated record stands
for ``count`` identical requests; absent = 1). Each is judged by :func:`.judge.judge`, which
decides every value an attribute the record lacks could take and reports the request as
*cannot judge* (with the missing attributes and the rules reached) when they disagree. The
*before* verdict is the logged outcome, or, with
``--baseline BUNDLE``, the baseline bundle's own verdict (both decided by
``edge_broker.pipeline.replay.decide``: the broker's gate code). A bundle for one gateway is
replayed against that gateway's records only; a ``*`` bundle against all.

Outputs: ``<out>/changes`` (Parquet: one row per changed request with before/after outcome, gate
and rule, and how often it was logged) and ``<out>/changes_by_rule`` (grouped by tenant and the
rule that decides after, and before), ``<out>/cannot_judge`` (requests that cannot be judged,
by missing attributes and rules), and ``<out>/summary.json``. A run with requests that cannot be
judged fails (:class:`CannotJudge`) after writing everything, unless ``accept_unjudged``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..matching.names import DEFAULT_TENANT
from .audit import read_records
from .judge import merge_witnesses, witnesses
from .spark import PipelineError, progress, tune_partitions
from .storage import Storage, join

KEYS = ["gw", "client", "user", "tenant", "method", "action", "topic", "qos"]
# What the gates read besides KEYS (audit/record.py); older records lack them (null).
ATTRIBUTES = ["retain", "roles", "cn", "iface", "grants", "msg"]


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    requests: int
    changed: int
    out: str
    by_rule: list[dict[str, Any]]
    unjudged: int = 0  # distinct requests that cannot be judged
    unjudged_logged: int = 0  # the requests they stand for (sum of counts)
    unjudged_by_rule: tuple[dict[str, Any], ...] = ()


class CannotJudge(PipelineError):
    """Some logged requests cannot be judged against the candidate (the outputs are written)."""

    def __init__(self, result: WhatIfResult) -> None:
        rows = ", ".join(
            f"{r['rules']} ({r['missing']}: {r['logged']})" for r in result.unjudged_by_rule[:5]
        )
        super().__init__(
            f"{result.unjudged} of {result.requests} distinct requests ({result.unjudged_logged} "
            f"logged) cannot be judged: their records lack what the rules read (rules (missing "
            f"attributes: logged requests): {rows}"
            f"{', ...' if len(result.unjudged_by_rule) > 5 else ''}"
            f"); see {result.out}/summary.json. Gateways write qos, retain, roles, cn, iface "
            "and grants in every decision since this version; pass --accept-unjudged to accept "
            "a diff without them"
        )
        self.result = result


def load_bundle(path: str, trust: list[str]) -> Any:
    """A verified bundle (``--trust`` public keys) or, without keys, its unverified body."""
    from ..keys import KeyFileError, load_verify_key
    from ..sync.bundle import BundleError, PolicyBundle, read_envelope, verify_bundle

    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise PipelineError(f"{path}: {exc.strerror}") from exc
    try:
        if trust:
            return verify_bundle(data, [load_verify_key(k) for k in trust])
        import cbor2

        envelope = read_envelope(data)
        body = cbor2.loads(envelope["body"])
        return PolicyBundle(
            body["version"],
            body["gateway"],
            body["issued_at"],
            body["policy"],
            envelope["kid"],
            data,
        )
    except (BundleError, KeyFileError, KeyError, TypeError) as exc:
        raise PipelineError(f"{path}: {exc}") from exc


def run_whatif(
    spark: Any,
    inputs: list[str],
    candidate: Any,
    out: str,
    *,
    baseline: Any = None,
    separator: str = "/",
    accept_unjudged: bool = False,
) -> WhatIfResult:
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..config import ConfigError
    from .replay import policy_from_sections

    for name, bundle in (("candidate", candidate), ("baseline", baseline)):
        if bundle is not None:
            try:
                policy_from_sections(bundle.policy, separator)
            except ConfigError as exc:
                raise PipelineError(
                    f"the {name} bundle's policy is refused by the broker: {exc}"
                ) from exc
    cand_policy = json.dumps(dict(candidate.policy))
    base_policy = json.dumps(dict(baseline.policy)) if baseline is not None else None
    storage = Storage(spark)
    storage.mkdirs(out)  # fails now, naming the URI, if its file system is not available
    tune_partitions(spark, sum(storage.size(i) for i in inputs))
    read = read_records(spark, inputs, None if candidate.gateway == "*" else candidate.gateway)
    bad = read.bad.count()
    if bad:
        progress(
            f"warning: {bad} line(s) that are not v1 audit records were skipped (see the audit "
            "job's report)"
        )
    records = read.records
    requests = records.where(
        (F.col("type") == "decision") & F.col("action").isin("publish", "subscribe")
    )
    if (
        candidate.gateway != "*"
        and records.where(F.col("gw") == candidate.gateway).limit(1).count() == 0
    ):
        logged = [
            r["gw"]
            for r in read_records(spark, inputs).records.select("gw").distinct().limit(11).collect()
        ]
        raise PipelineError(
            f"the candidate bundle is for gateway {candidate.gateway!r}, but no audit record of "
            "that gateway is in "
            f"{', '.join(inputs)} (logged gateways: "
            f"{', '.join(sorted(str(g) for g in logged[:10])) or 'none'}"
            f"{', ...' if len(logged) > 10 else ''}); a gateway's records carry [audit] "
            "gateway_id, by default "
            "its [sync] gateway_id"
        )
    for name in ATTRIBUTES:
        if name not in requests.columns:
            requests = requests.withColumn(name, F.lit(None).cast("string"))
    if isinstance(requests.schema["roles"].dataType, T.ArrayType):
        # one string per role set (sorted, comma-joined) so identical requests group together
        requests = requests.withColumn(
            "roles", F.array_join(F.array_sort(F.col("roles").cast("array<string>")), ",")
        )
    requests = requests.withColumn("retain", F.col("retain").cast("boolean"))
    group_keys = [*KEYS, *ATTRIBUTES]
    weight = (
        F.coalesce(F.col("count").cast("long"), F.lit(1))
        if "count" in requests.columns
        else F.lit(1).cast("long")
    )
    grouped = requests.groupBy(*group_keys).agg(
        F.sum(weight).alias("count"),
        F.first("outcome").alias("logged_outcome"),
        F.first("gate").alias("logged_gate"),
        F.first("rule").alias("logged_rule"),
        F.first("rc").alias("logged_rc"),
    )
    schema = T.StructType(
        [
            *[
                T.StructField(
                    k,
                    T.LongType()
                    if k == "qos"
                    else (T.BooleanType() if k == "retain" else T.StringType()),
                )
                for k in group_keys
            ],
            T.StructField("count", T.LongType()),
            T.StructField("before_outcome", T.StringType()),
            T.StructField("before_gate", T.StringType()),
            T.StructField("before_rule", T.StringType()),
            T.StructField("after_outcome", T.StringType()),
            T.StructField("after_gate", T.StringType()),
            T.StructField("after_rule", T.StringType()),
            T.StructField("after_rc", T.LongType()),
            T.StructField("missing", T.StringType()),
            T.StructField("unjudged_rules", T.StringType()),
        ]
    )
    seen = merge_witnesses(witnesses(b.policy) for b in (candidate, baseline) if b is not None)

    def replay(batches: Any) -> Any:
        from .judge import judge
        from .replay import cached_policy

        after_policy = cached_policy(cand_policy, separator)  # built once per Python worker
        before_policy = cached_policy(base_policy, separator) if base_policy else None
        for frame in batches:
            out = []
            for rec in frame.to_dict("records"):
                r: dict[str, Any] = {
                    k: (None if isinstance(v, float) and v != v else v) for k, v in rec.items()
                }
                logged = {
                    **r,
                    "outcome": r["logged_outcome"],
                    "gate": r["logged_gate"],
                    "rule": r["logged_rule"],
                    "rc": r["logged_rc"],
                }
                after = judge(after_policy, logged, seen)
                missing = set(after.missing)
                rules = set(after.rules)
                b: tuple[Any, Any, Any] = (None, None, None)
                if before_policy is not None:
                    before = judge(before_policy, logged, seen)
                    missing.update(before.missing)
                    rules.update(before.rules)
                    if before.verdict is not None:
                        b = (before.verdict.outcome, before.verdict.gate, before.verdict.rule)
                else:
                    b = (r["logged_outcome"], r["logged_gate"], r["logged_rule"])
                a = after.verdict
                judged = a is not None and not missing
                out.append(
                    {
                        **{k: r[k] for k in group_keys},
                        "qos": None if r["qos"] is None else int(r["qos"]),
                        "retain": None if r["retain"] is None else bool(r["retain"]),
                        "count": int(r["count"]),
                        "before_outcome": b[0] if judged else None,
                        "before_gate": b[1] if judged else None,
                        "before_rule": b[2] if judged else None,
                        "after_outcome": a.outcome if judged and a is not None else None,
                        "after_gate": a.gate if judged and a is not None else None,
                        "after_rule": a.rule if judged and a is not None else None,
                        "after_rc": a.rc if judged and a is not None else None,
                        "missing": None if judged else ",".join(sorted(missing)),
                        "unjudged_rules": None if judged else " | ".join(sorted(rules)),
                    }
                )
            yield pd.DataFrame(out, columns=[f.name for f in schema.fields])

    progress("replaying logged requests against the candidate bundle")
    decided = grouped.mapInPandas(replay, schema).cache()
    changes = decided.where(
        F.col("missing").isNull() & (F.col("before_outcome") != F.col("after_outcome"))
    )
    changes.orderBy("tenant", "gw", "client", "action", "topic").write.mode("overwrite").parquet(
        join(out, "changes")
    )
    storage.check_landed(join(out, "changes"), "Parquet")
    by_rule = (
        changes.groupBy(
            F.coalesce("tenant", F.lit(DEFAULT_TENANT)).alias("tenant"),
            "before_outcome",
            "after_outcome",
            F.coalesce("after_gate", F.lit("")).alias("after_gate"),
            F.coalesce("after_rule", F.lit("")).alias("after_rule"),
            F.coalesce("before_rule", F.lit("")).alias("before_rule"),
        )
        .agg(F.count(F.lit(1)).alias("requests"), F.sum("count").alias("logged"))
        .orderBy(F.desc("logged"), "tenant")
    )
    by_rule.write.mode("overwrite").parquet(join(out, "changes_by_rule"))
    storage.check_landed(join(out, "changes_by_rule"), "Parquet")
    unjudged = decided.where(F.col("missing").isNotNull())
    unjudged_by_rule = (
        unjudged.groupBy(
            F.coalesce("tenant", F.lit(DEFAULT_TENANT)).alias("tenant"),
            F.col("unjudged_rules").alias("rules"),
            "missing",
        )
        .agg(F.count(F.lit(1)).alias("requests"), F.sum("count").alias("logged"))
        .orderBy(F.desc("logged"), "tenant", "rules")
    )
    unjudged_by_rule.write.mode("overwrite").parquet(join(out, "cannot_judge"))
    storage.check_landed(join(out, "cannot_judge"), "Parquet")
    totals = decided.agg(
        F.count(F.lit(1)).alias("requests"),
        F.sum("count").alias("logged"),
        F.sum(F.when(F.col("missing").isNotNull(), 1).otherwise(0)).alias("unjudged"),
        F.sum(F.when(F.col("missing").isNotNull(), F.col("count")).otherwise(0)).alias(
            "unjudged_logged"
        ),
    ).collect()[0]
    total = int(totals["requests"] or 0)
    changed = changes.count()
    changed_logged = int(changes.agg(F.sum("count")).collect()[0][0] or 0)
    rows = [r.asDict() for r in by_rule.collect()]
    unjudged_rows = [r.asDict() for r in unjudged_by_rule.collect()]
    storage.write_text(
        join(out, "summary.json"),
        json.dumps(
            {
                "requests": total,
                "logged": int(totals["logged"] or 0),
                "changed": changed,
                "changed_logged": changed_logged,
                "cannot_judge": {
                    "requests": int(totals["unjudged"] or 0),
                    "logged": int(totals["unjudged_logged"] or 0),
                    "by_rule": unjudged_rows,
                },
                "bad_lines": bad,
                "by_rule": rows,
            },
            indent=1,
        )
        + "\n",
    )
    progress(f"{changed} of {total} distinct requests would change; see {out}")
    if totals["unjudged"]:
        progress(
            f"{totals['unjudged']} distinct requests ({totals['unjudged_logged']} logged) cannot "
            "be judged: "
            + "; ".join(
                f"{r['rules']} (missing {r['missing']}): {r['logged']}" for r in unjudged_rows[:10]
            )
        )
    decided.unpersist()
    records.unpersist()
    result = WhatIfResult(
        total,
        changed,
        out,
        rows,
        int(totals["unjudged"] or 0),
        int(totals["unjudged_logged"] or 0),
        tuple(unjudged_rows),
    )
    if result.unjudged and not accept_unjudged:
        raise CannotJudge(result)
    return result
