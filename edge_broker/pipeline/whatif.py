"""``whatif``: replay logged requests against a candidate bundle -> every decision that changes.

The requests are the audit log's ``publish`` and ``subscribe`` decisions (denials are always
logged; allowed ones only with ``[audit] log_allowed = true`` on the gateway: without them the
job cannot see what a stricter candidate would newly refuse). Identical requests are replayed
once (grouped with their count). The *before* verdict is the logged outcome, or, with
``--baseline BUNDLE``, the baseline bundle's own verdict (both decided by
``edge_broker.pipeline.replay.decide``: the broker's gate code). A bundle for one gateway is
replayed against that gateway's records only; a ``*`` bundle against all.

Outputs: ``<out>/changes`` (Parquet: one row per changed request with before/after outcome, gate
and rule, and how often it was logged) and ``<out>/changes_by_rule`` (grouped by tenant and the
rule that decides after, and before), and ``<out>/summary.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .audit import read_records
from .spark import PipelineError, progress, tune_partitions
from .storage import Storage, join

KEYS = ["gw", "client", "user", "tenant", "method", "action", "topic", "qos"]


@dataclass(frozen=True, slots=True)
class WhatIfResult:
    requests: int
    changed: int
    out: str
    by_rule: list[dict[str, Any]]


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
    grouped = requests.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("count"),
        F.first("outcome").alias("logged_outcome"),
        F.first("gate").alias("logged_gate"),
        F.first("rule").alias("logged_rule"),
    )
    schema = T.StructType(
        [
            *[T.StructField(k, T.LongType() if k == "qos" else T.StringType()) for k in KEYS],
            T.StructField("count", T.LongType()),
            T.StructField("before_outcome", T.StringType()),
            T.StructField("before_gate", T.StringType()),
            T.StructField("before_rule", T.StringType()),
            T.StructField("after_outcome", T.StringType()),
            T.StructField("after_gate", T.StringType()),
            T.StructField("after_rule", T.StringType()),
            T.StructField("after_rc", T.LongType()),
        ]
    )

    def replay(batches: Any) -> Any:
        from .replay import cached_policy, decide

        after_policy = cached_policy(cand_policy, separator)  # built once per Python worker
        before_policy = cached_policy(base_policy, separator) if base_policy else None
        for frame in batches:
            out = []
            for rec in frame.to_dict("records"):
                r: dict[str, Any] = {
                    k: (None if isinstance(v, float) and v != v else v) for k, v in rec.items()
                }
                after = decide(after_policy, r)
                b: tuple[Any, Any, Any]
                if before_policy is not None:
                    before = decide(before_policy, r)
                    b = (before.outcome, before.gate, before.rule)
                else:
                    b = (r["logged_outcome"], r["logged_gate"], r["logged_rule"])
                out.append(
                    {
                        **{k: r[k] for k in KEYS},
                        "qos": int(r["qos"] or 0),
                        "count": int(r["count"]),
                        "before_outcome": b[0],
                        "before_gate": b[1],
                        "before_rule": b[2],
                        "after_outcome": after.outcome,
                        "after_gate": after.gate,
                        "after_rule": after.rule,
                        "after_rc": after.rc,
                    }
                )
            yield pd.DataFrame(out, columns=[f.name for f in schema.fields])

    progress("replaying logged requests against the candidate bundle")
    decided = grouped.mapInPandas(replay, schema).cache()
    changes = decided.where(F.col("before_outcome") != F.col("after_outcome"))
    changes.orderBy("tenant", "gw", "client", "action", "topic").write.mode("overwrite").parquet(
        join(out, "changes")
    )
    storage.check_landed(join(out, "changes"), "Parquet")
    by_rule = (
        changes.groupBy(
            F.coalesce("tenant", F.lit("~")).alias("tenant"),
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
    total = decided.count()
    changed = changes.count()
    rows = [r.asDict() for r in by_rule.collect()]
    storage.write_text(
        join(out, "summary.json"),
        json.dumps(
            {"requests": total, "changed": changed, "bad_lines": bad, "by_rule": rows}, indent=1
        )
        + "\n",
    )
    progress(f"{changed} of {total} distinct requests would change; see {out}")
    decided.unpersist()
    records.unpersist()
    return WhatIfResult(total, changed, out, rows)
