"""``compile``: fleet inventory + rule tables -> validated rules -> one signed bundle per gateway.

Input tables (README "Cloud pipeline"; each ``<input>/<table>.parquet|.csv|.json``):

- ``gateways`` (required): ``gateway``*, ``version``* (int >= 1), ``acl_default`` (allow|deny)
- ``devices`` (required): ``gateway``*, ``client_id``*, ``sets``* (whitespace-separated permission
  set names), ``username``, ``tenant``, ``smoker_id``
- ``permissions``: ``set``*, ``topic``*, ``seq`` (order within the set), ``id``, ``activity``,
  ``type``, ``qos``, ``retain``, ``shared_subscription``, ``shared_group`` (seed 003 fields)
- ``acl``: ``id``*, ``permission``*, ``messages``*, ``key_exprs``*, ``flows``, ``interfaces``,
  ``cert_common_names``, ``usernames`` (lists whitespace-separated), ``gateway`` (empty: every
  gateway)
- ``grants``: ``tenant``, ``direction``* (pub|sub), ``rule``* (token grant rules, PATTERNS.md §3)

Every rule is checked inside Spark by a pandas UDF calling the broker's parser
(``edge_broker.pipeline.rules``); each assembled gateway policy is loaded once more with
``edge_broker.sync.apply.check_policy`` (as ``bundle create`` and a gateway applying it do) before
it is signed, so a bundle is never one the gateway would refuse. Outputs:
``<out>/bundles/<gateway>.cbor`` (``create_bundle``: byte-for-byte what ``edge-broker bundle
create`` makes from the same policy and issued_at), ``<out>/policies/<gateway>.json`` with
``--emit-policies``, ``<out>/grants/<tenant>.json`` (the ``--grant`` of ``edge-broker token
create``), and ``<out>/invalid.jsonl``: every invalid row with its reason.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..matching.names import DEFAULT_TENANT
from ..sync.bundle import sign_body
from .inputs import INVALID_COLUMNS, Column, find_table, read_table
from .rules import check_acl, check_device, check_grant, check_permission, permission_rule
from .spark import PipelineError, progress, static_plans, tune_partitions
from .storage import SHARED, BulkWriter, Storage, join

GATEWAY_ID = re.compile(r"[A-Za-z0-9_.@~-]{1,128}")

TABLES: dict[str, tuple[Column, ...]] = {
    "gateways": (
        Column("gateway", required=True),
        Column("version", "long", True),
        Column("acl_default"),
    ),
    "devices": (
        Column("gateway", required=True),
        Column("client_id", required=True),
        Column("sets", required=True),
        Column("username"),
        Column("tenant"),
        Column("smoker_id"),
    ),
    "permissions": (
        Column("set", required=True),
        Column("topic", required=True),
        Column("seq", "long"),
        Column("id"),
        Column("activity"),
        Column("type"),
        Column("qos"),
        Column("retain"),
        Column("shared_subscription"),
        Column("shared_group"),
    ),
    "acl": (
        Column("id", required=True),
        Column("permission", required=True),
        Column("messages", required=True),
        Column("key_exprs", required=True),
        Column("flows"),
        Column("interfaces"),
        Column("cert_common_names"),
        Column("usernames"),
        Column("gateway"),
    ),
    "grants": (Column("tenant"), Column("direction", required=True), Column("rule", required=True)),
}
REQUIRED_TABLES = ("gateways", "devices")


@dataclass(frozen=True, slots=True)
class CompileResult:
    gateways: int
    bundles: int
    invalid: int
    out: str
    withheld: int = (
        0  # gateways not compiled because a row they depend on is invalid (--skip-invalid)
    )


def _clean(value: Any) -> Any:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return value


def _checker(check: Any, names: list[str], separator: str | None) -> Any:
    """A pandas UDF over a struct of ``names`` that returns the check's reason (or null)."""
    import pandas as pd  # type: ignore[import-untyped]
    from pyspark.sql import functions as F

    def run(frame: pd.DataFrame) -> pd.Series:
        out = []
        for record in frame.to_dict("records"):
            row = {k: _clean(v) for k, v in record.items()}
            out.append(check(row) if separator is None else check(row, separator))
        return pd.Series(out, dtype=object)

    run.__annotations__ = {"frame": pd.DataFrame, "return": pd.Series}  # resolved hints for Spark
    return F.pandas_udf(run, "string")  # type: ignore[attr-defined,call-overload,unused-ignore]


def _validate(
    df: Any, table: str, check: Any, names: list[str], separator: str | None, scope: Any = None
) -> tuple[Any, Any]:
    """(valid rows, invalid rows); ``scope``: the column (expression) naming what an invalid
    row taints (its permission set, its gateway)."""
    from pyspark.sql import functions as F

    udf = _checker(check, names, separator)
    checked = df.withColumn(
        "_reason", udf(F.struct(*[F.col(n) for n in names]))
    ).cache()  # each row checked once
    invalid = checked.where(F.col("_reason").isNotNull()).select(
        F.lit(table).alias("table"),
        F.col("_file").alias("file"),
        F.col("_row").alias("row"),
        F.regexp_extract(F.col("_reason"), r"^([A-Za-z_.\[\]0-9]+):", 1).alias("key"),
        F.col("_reason").alias("reason"),
        (scope if scope is not None else F.lit(None).cast("string")).alias("_scope"),
    )
    return checked.where(F.col("_reason").isNull()).drop("_reason"), invalid


def _duplicates(df: Any, table: str, keys: list[str], what: str) -> tuple[Any, Any]:
    """Rows whose ``keys`` repeat an earlier row's: every copy after the first is invalid and
    taints ``keys[0]`` (its gateway: which row was meant is unknown, so none is compiled)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*keys).orderBy("_row")
    ranked = df.withColumn("_n", F.row_number().over(window)).withColumn(
        "_first", F.first("_row").over(window)
    )
    invalid = ranked.where(F.col("_n") > 1).select(
        F.lit(table).alias("table"),
        F.col("_file").alias("file"),
        F.col("_row").alias("row"),
        F.lit(keys[-1]).alias("key"),
        F.concat(
            F.lit(f"{keys[-1]}: duplicate {what}; row "),
            F.col("_first").cast("string"),
            F.lit(" has it first"),
        ).alias("reason"),
        F.col(keys[0]).alias("_scope"),
    )
    return ranked.where(F.col("_n") == 1).drop("_n", "_first"), invalid


def _build_sets(
    rows: list[Any], separator: str, invalid: list[dict[str, Any]], file: str
) -> dict[str, list[dict[str, Any]]]:
    """Valid permission rows -> sets in order; each whole set is loaded once more (duplicate ids,
    shadowing are the loader's to judge) and a set it refuses is reported and left out."""
    from ..authz.permissions import PermissionConfigError
    from ..authz.permissions_config import parse_permissions_config

    grouped: dict[str, list[Any]] = defaultdict(list)
    for r in rows:
        grouped[r["set"]].append(r)
    sets: dict[str, list[dict[str, Any]]] = {}
    for name, members in grouped.items():
        members.sort(key=lambda r: (r["seq"] if r["seq"] is not None else 0, r["_row"]))
        rules = [permission_rule(r.asDict()) for r in members]
        try:
            parse_permissions_config({"sets": {name: {"rules": rules}}}, separator)
        except PermissionConfigError as exc:
            invalid.append(
                {
                    "table": "permissions",
                    "file": file,
                    "row": members[0]["_row"],
                    "key": "set",
                    "reason": str(exc),
                    "_scope": name,
                }
            )
            continue
        sets[name] = rules
    return sets


ALL = (
    "*"  # the _scope of an invalid row that taints every set or gateway (not a valid id of either)
)
INVALID_SAMPLE = (
    10_000  # invalid rows kept in invalid.jsonl and on the driver; the rest only counted
)


def body_builder(
    sets: dict[str, list[dict[str, Any]]], separator: str, issued_at: int, emit_policies: bool
) -> Any:
    """The function the executors run per gateway (a cogroup of its device rows and its ACL rows):
    it assembles the policy, checks it with ``sync.apply.check_policy`` (the path ``bundle create``
    and a gateway applying the bundle take) and returns the canonical
    *unsigned* bundle body. It closes over the rule sets and settings only, never the signing key
    (tests pickle it and look for the key's bytes)."""

    def build(frame: Any, acl: Any) -> Any:
        import pandas as pd

        from ..sync.apply import check_policy
        from ..sync.bundle import BundleError, bundle_body
        from .policy import gateway_policy
        from .rules import split_list

        gw = frame["gateway"].iloc[0]
        version = int(frame["version"].iloc[0])
        acl_default = _clean(frame["acl_default"].iloc[0])
        members = [
            {"client_id": c, "sets": s}
            for c, s in zip(frame["client_id"], frame["sets"], strict=True)
            if _clean(c) is not None
        ]
        acl_rows = (
            []
            if acl.empty
            else [
                {k: _clean(v) for k, v in r.items()}
                for r in acl.sort_values(["_specific", "_row"]).to_dict("records")
            ]
        )
        tainted = sorted({n for m in members for n in split_list(m["sets"])} - sets.keys())
        if tainted:  # built before the invalid rows are counted; withheld before signing
            return pd.DataFrame(
                {
                    "gateway": [gw],
                    "version": [version],
                    "devices": [len(members)],
                    "body": [None],
                    "policy": [None],
                    "problem": [f"uses permission set(s) {', '.join(tainted)} with invalid rows"],
                    "_row": [int(frame["_row"].iloc[0])],
                }
            )
        policy = gateway_policy(members, sets, acl_rows, acl_default)
        try:
            check_policy(
                policy, f"gateway {gw}", separator, version
            )  # as the gateway will apply it
            body, problem = (
                bundle_body(version=version, gateway=gw, issued_at=issued_at, policy=policy),
                None,
            )
        except BundleError as exc:
            body, problem = None, f"the assembled policy is refused by the broker: {exc}"
        return pd.DataFrame(
            {
                "gateway": [gw],
                "version": [version],
                "devices": [len(members)],
                "body": [body],
                "policy": [json.dumps(policy, sort_keys=True) if emit_policies else None],
                "problem": [problem],
                "_row": [int(frame["_row"].iloc[0])],
            }
        )

    return build


def run_compile(
    spark: Any,
    input_dir: str,
    out: str,
    *,
    key: Any,
    issued_at: int,
    separator: str = "/",
    skip_invalid: bool = False,
    emit_policies: bool = False,
    publish: str | None = None,
) -> CompileResult:
    """The compile job (fails closed).

    Raises :class:`PipelineError` for unusable input (missing table or column). Any invalid row
    fails the job *before anything is signed* (report in ``invalid.jsonl``), unless
    ``skip_invalid``: then only the gateways none of whose inputs lost a row are compiled; a
    gateway that uses a permission set with an invalid row, has an invalid device or ACL row (an
    ACL row without a gateway: every gateway), or a duplicate gateway row gets no bundle and keeps
    its previous one (listed in ``withheld.jsonl``)."""
    with static_plans(spark):
        return _compile(
            spark,
            input_dir,
            out,
            key=key,
            issued_at=issued_at,
            separator=separator,
            skip_invalid=skip_invalid,
            emit_policies=emit_policies,
            publish=publish,
        )


def _compile(
    spark: Any,
    input_dir: str,
    out: str,
    *,
    key: Any,
    issued_at: int,
    separator: str,
    skip_invalid: bool,
    emit_policies: bool,
    publish: str | None,
) -> CompileResult:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    storage = Storage(spark)
    storage.mkdirs(out)  # fails now, naming the URI, if its file system is not available
    frames: dict[str, Any] = {}
    invalid_frames: list[Any] = []
    files: dict[str, str] = {}
    read_bad: dict[str, Any] = {}
    scopes = {
        "gateways": "gateway",
        "devices": "gateway",
        "permissions": "set",
        "acl": "gateway",
        "grants": "tenant",
    }
    if not storage.is_dir(input_dir):  # a folder only the executors see is not there for us
        raise PipelineError(
            f"{input_dir}: no such folder where the driver looks; the driver lists the input "
            f"tables: put them on {SHARED}"
        )

    def read(table: str) -> None:
        path = find_table(storage, input_dir, table)
        if path is None:
            if table in REQUIRED_TABLES:
                raise PipelineError(
                    f"{input_dir}: no {table} table; add {table}.parquet, {table}.csv or "
                    f"{table}.json"
                )
            return
        progress(f"reading {table} from {path}")
        files[table] = path
        frames[table], read_bad[table] = read_table(
            spark, path, table, TABLES[table], scopes[table]
        )
        invalid_frames.append(read_bad[table])

    def read_optional() -> None:
        for table in TABLES:
            if table not in REQUIRED_TABLES:
                read(table)

    for table in REQUIRED_TABLES:
        read(table)
    gateways, bad = _validate(
        frames["gateways"],
        "gateways",
        _check_gateway_row,
        ["gateway", "version", "acl_default"],
        None,
        F.col("gateway"),
    )
    invalid_frames.append(bad)
    checked = [bad.agg(F.count(F.lit(1)).alias("_n"))]
    gateways, bad = _duplicates(gateways, "gateways", ["gateway"], "gateway id")
    invalid_frames.append(bad)

    devices, bad = _validate(
        frames["devices"],
        "devices",
        check_device,
        ["client_id", "username", "tenant", "smoker_id", "sets"],
        None,
        F.col("gateway"),
    )
    invalid_frames.append(bad)
    checked.append(bad.agg(F.count(F.lit(1)).alias("_n")))
    progress("checking the gateway and device rows with the broker's parsers")
    # the executors check every gateway and device row (one count each; the checked rows stay
    # cached for the queries below) while the driver reads the rule tables and plans: the
    # cores would otherwise wait for the driver's first action, and the executors' Python
    # workers start during this job
    _at_the_same_time(
        spark,
        read_optional,
        lambda: checked[0].unionByName(checked[1]).collect(),
        cancel_second=lambda _: False,
    )
    partitions = tune_partitions(spark, sum(storage.size(path) for path in files.values()))
    progress(f"checking the rule rows ({partitions} shuffle partitions)")

    sets: dict[str, list[dict[str, Any]]] = {}
    to_driver: dict[str, Any] = {}  # kind of row -> the DataFrame of them (see _collect_together)
    driver_invalid: list[dict[str, Any]] = []
    tainted_sets: set[str] = set()
    if "permissions" in frames:
        names = [c.name for c in TABLES["permissions"]]
        perms, bad = _validate(
            frames["permissions"],
            "permissions",
            check_permission,
            names,
            separator,
            F.coalesce(F.col("set"), F.lit(ALL)),
        )
        invalid_frames.append(bad)
        to_driver["rule"] = perms
        to_driver["set_scope"] = (
            bad.select("_scope").unionByName(read_bad["permissions"].select("_scope")).distinct()
        )

    acl = None
    if "acl" in frames:
        names = [c.name for c in TABLES["acl"]]
        acl, bad = _validate(
            frames["acl"], "acl", check_acl, names, None, F.coalesce(F.col("gateway"), F.lit(ALL))
        )
        invalid_frames.append(bad)

    grants: dict[str, dict[str, list[str]]] = {}
    tainted_tenants: set[str] = set()
    if "grants" in frames:
        g, bad = _validate(
            frames["grants"],
            "grants",
            check_grant,
            ["tenant", "direction", "rule"],
            separator,
            F.coalesce(F.col("tenant"), F.lit(DEFAULT_TENANT)),
        )
        invalid_frames.append(bad)
        to_driver["grant"] = g.select("tenant", "direction", "rule", "_row")
        to_driver["tenant_scope"] = (
            bad.select("_scope").unionByName(read_bad["grants"].select("_scope")).distinct()
        )

    # the rows the driver needs (valid permission and grant rows, what invalid rows taint),
    # checked by the executors and collected by one Spark job, not one per table and kind
    driver_rows = _collect_together(to_driver)
    if "permissions" in frames:
        sets = _build_sets(driver_rows["rule"], separator, driver_invalid, files["permissions"])
        # a set with any invalid row is never compiled: first-match order makes a dropped deny
        # row an allow (operator = [admin/# DENY, # allow] must not become [# allow])
        tainted_sets = {r["_scope"] or ALL for r in driver_rows["set_scope"]}
        tainted_sets |= {r["_scope"] for r in driver_invalid}
        if ALL in tainted_sets:
            tainted_sets |= set(sets)
        sets = {name: rules for name, rules in sets.items() if name not in tainted_sets}
    if "grants" in frames:
        tainted_tenants = {r["_scope"] or DEFAULT_TENANT for r in driver_rows["tenant_scope"]}
        for r in sorted(driver_rows["grant"], key=lambda r: r["_row"]):
            tenant = r["tenant"] or DEFAULT_TENANT
            entry = grants.setdefault(
                tenant, {"tenant_ids": [tenant], "allow_channels_pub": [], "allow_channels_sub": []}
            )
            entry["allow_channels_pub" if r["direction"] == "pub" else "allow_channels_sub"].append(
                r["rule"]
            )

    # devices: known gateway, known sets, unique client id per gateway
    known_sets = spark.createDataFrame([(s,) for s in sets] or [("\x00",)], "name string")
    withheld_sets = spark.createDataFrame(
        [(s,) for s in sorted(tainted_sets)] or [("\x00",)], "name string"
    )
    exploded = devices.select(
        "gateway", "_file", "_row", F.explode(F.split(F.trim(F.col("sets")), r"\s+")).alias("name")
    )
    uses_withheld = (
        exploded.join(withheld_sets, "name")
        .groupBy("gateway")
        .agg(
            F.concat(
                F.lit("uses permission set(s) "),
                F.concat_ws(", ", F.sort_array(F.collect_set("name"))),
                F.lit(" with invalid rows"),
            ).alias("reason")
        )
    )
    missing = (
        exploded.join(known_sets, "name", "left_anti")
        .join(withheld_sets, "name", "left_anti")
        .groupBy("gateway", "_file", "_row")
        .agg(F.concat_ws(", ", F.sort_array(F.collect_set("name"))).alias("names"))
    )
    invalid_frames.append(
        missing.select(
            F.lit("devices").alias("table"),
            F.col("_file").alias("file"),
            F.col("_row").alias("row"),
            F.lit("sets").alias("key"),
            F.concat(F.lit("sets: no permission set named "), F.col("names")).alias("reason"),
            F.col("gateway").alias("_scope"),
        )
    )
    devices = devices.join(missing.select("_row"), "_row", "left_anti")
    unknown_gw = devices.join(gateways.select("gateway"), "gateway", "left_anti")
    invalid_frames.append(
        unknown_gw.select(
            F.lit("devices").alias("table"),
            F.col("_file").alias("file"),
            F.col("_row").alias("row"),
            F.lit("gateway").alias("key"),
            F.concat(
                F.lit("gateway: no valid gateway "),
                F.col("gateway"),
                F.lit(" in the gateways table"),
            ).alias("reason"),
            F.col("gateway").alias("_scope"),
        )
    )
    devices, bad = _duplicates(
        devices, "devices", ["gateway", "client_id"], "client id on this gateway"
    )
    invalid_frames.append(bad)

    invalid = functools.reduce(lambda a, b: a.unionByName(b), invalid_frames)
    if driver_invalid:
        invalid = invalid.unionByName(
            spark.createDataFrame(
                driver_invalid,
                "table string, file string, row long, key string, reason string, _scope string",
            )
        )
    invalid = invalid.cache()
    # one job: how many invalid rows, whether one taints every gateway (an ACL row without a
    # gateway), whether any valid device row is left
    gw_tables = invalid.where(F.col("table").isin("gateways", "devices", "acl"))
    counts_query = invalid.agg(
        F.count(F.lit(1)).alias("n"),
        F.max((F.col("table").isin("gateways", "devices", "acl")) & (F.col("_scope") == ALL)).alias(
            "every"
        ),
    ).crossJoin(devices.select("_row").limit(1).agg(F.count(F.lit(1)).alias("devices")))
    progress("checking and assembling one bundle body per gateway on the executors")
    # every gateway with a valid row is built, at the same time as the invalid rows are
    # counted (one query would wait for the other; each leaves cores idle at its start and
    # end); a gateway found to have lost a row is dropped from the bodies before anything
    # is signed, as if never built
    gw_dev = gateways.select("gateway", "version", "acl_default", "_row").join(
        devices.select("gateway", "client_id", "sets"), "gateway", "left"
    )
    acl_cols = [c.name for c in TABLES["acl"] if c.name != "gateway"] + ["_row"]
    if acl is not None:
        ids = gateways.select("gateway")
        acl_per_gw = (
            acl.where(F.col("gateway").isNotNull())
            .select("gateway", *acl_cols, F.lit(1).alias("_specific"))
            .join(ids, "gateway")
            .unionByName(
                acl.where(F.col("gateway").isNull())
                .select(*acl_cols, F.lit(0).alias("_specific"))
                .crossJoin(ids)
            )
        )
    else:
        acl_per_gw = spark.createDataFrame(
            [],
            ", ".join(f"{c} {'long' if c == '_row' else 'string'}" for c in ["gateway", *acl_cols])
            + ", _specific int",
        )
    schema = T.StructType(
        [
            T.StructField("gateway", T.StringType()),
            T.StructField("version", T.LongType()),
            T.StructField("devices", T.LongType()),
            T.StructField("body", T.BinaryType()),
            T.StructField("policy", T.StringType()),
            T.StructField("problem", T.StringType()),
            T.StructField("_row", T.LongType()),
        ]
    )
    build = body_builder(sets, separator, issued_at, emit_policies)
    all_bodies = (
        gw_dev.groupBy("gateway")
        .cogroup(acl_per_gw.groupBy("gateway"))
        .applyInPandas(build, schema)
        .cache()
    )
    counts, all_stats = _at_the_same_time(
        spark,
        counts_query.first,
        lambda: all_bodies.agg(
            F.count(F.lit(1)).alias("n"), F.count("problem").alias("problems")
        ).first(),
        cancel_second=lambda first: bool(first["n"]) and not skip_invalid,
    )
    n_invalid = int(counts["n"])
    if counts["devices"] == 0:
        progress(
            f"warning: {files['devices']} has no valid device rows: every bundle would deny every "
            "client"
        )
    if n_invalid and not skip_invalid:
        all_bodies.unpersist()
        _write_invalid(storage, out, invalid, n_invalid)
        invalid.unpersist()
        raise PipelineError(
            _invalid_message(invalid, n_invalid, out) + "\nnothing was signed; fix them, or pass "
            "--skip-invalid to compile the gateways none of whose rows are invalid"
        )

    # which gateways lost a row (their bundle is withheld; the gateway keeps its previous one).
    # With no invalid row none did (a tainted set is one with an invalid row): no plan and no
    # Spark job is spent on it
    withheld: Any = None
    if n_invalid:
        every = bool(counts["every"])
        withheld = (
            gw_tables.where(F.col("_scope").isNotNull() & (F.col("_scope") != ALL))
            .groupBy(F.col("_scope").alias("gateway"))
            .agg(
                F.concat(
                    F.lit("invalid row(s) in "),
                    F.concat_ws(", ", F.sort_array(F.collect_set("table"))),
                ).alias("reason"),
            )
            .unionByName(uses_withheld)
        )
        if every:
            withheld = withheld.unionByName(
                gateways.select(
                    "gateway", F.lit("an invalid ACL row for every gateway").alias("reason")
                )
            )
        withheld = withheld.groupBy("gateway").agg(
            F.concat_ws("; ", F.sort_array(F.collect_set("reason"))).alias("reason")
        )
        bodies = all_bodies.join(withheld.select("gateway"), "gateway", "left_anti")
        stats = bodies.agg(
            F.count(F.lit(1)).alias("n"), F.count("problem").alias("problems")
        ).first()
    else:
        bodies, stats = all_bodies, all_stats

    if stats["problems"]:
        problems = [
            {
                "table": "gateways",
                "file": files["gateways"],
                "row": r["_row"],
                "key": "gateway",
                "reason": f"gateway {r['gateway']}: {r['problem']}",
                "_scope": r["gateway"],
            }
            for r in bodies.where(F.col("problem").isNotNull()).limit(INVALID_SAMPLE).collect()
        ]
        invalid = invalid.unionByName(
            spark.createDataFrame(
                problems,
                "table string, file string, row long, key string, reason string, _scope string",
            )
        )
        n_invalid += stats["problems"]
        if not skip_invalid:
            _write_invalid(storage, out, invalid, n_invalid)
            raise PipelineError(_invalid_message(invalid, n_invalid, out) + "\nnothing was signed")

    progress(f"signing {stats['n'] - stats['problems']} bundles on the driver")
    bundles_dir = join(out, "bundles")
    storage.mkdirs(bundles_dir)
    written = 0
    pending: list[tuple[str, bytes]] = []
    # the bodies stream from the executors' cache (the next partition is fetched while this one
    # is signed); signing is cheap, the Hadoop writes are overlapped by the writer threads
    with BulkWriter(storage, out) as writer:
        for row in (
            bodies.where(F.col("problem").isNull())
            .select("gateway", "body", "policy")
            .toLocalIterator(True)
        ):
            data = sign_body(key, row["body"])
            writer.write(join(bundles_dir, f"{row['gateway']}.cbor"), data)
            if emit_policies:
                writer.write(
                    join(out, "policies", f"{row['gateway']}.json"),
                    (row["policy"] + "\n").encode("utf-8"),
                )
            if publish is not None:
                pending.append((row["gateway"], data))
                if len(pending) >= 500:
                    _publish(publish, pending)
                    pending = []
            written += 1
            if written % 1000 == 0:
                progress(f"{written} bundles signed")
        for tenant, grant in grants.items():  # one file per tenant: the same writer
            if tenant not in tainted_tenants:
                writer.write(
                    join(out, "grants", f"{tenant}.json"),
                    (json.dumps(grant, sort_keys=True) + "\n").encode("utf-8"),
                )
    if pending and publish is not None:
        _publish(publish, pending)
    all_bodies.unpersist()

    withheld_rows = (
        []
        if withheld is None
        else [r.asDict() for r in withheld.orderBy("gateway").limit(INVALID_SAMPLE).collect()]
    )
    n_withheld = withheld.count() if len(withheld_rows) >= INVALID_SAMPLE else len(withheld_rows)
    storage.write_text(
        join(out, "withheld.jsonl"),
        "".join(json.dumps(r, sort_keys=True) + "\n" for r in withheld_rows),
    )
    _write_invalid(storage, out, invalid, n_invalid)
    progress(
        f"{written} bundles in {bundles_dir}; {n_withheld} gateway(s) withheld (withheld.jsonl); "
        f"{n_invalid} invalid rows (invalid.jsonl)"
    )
    invalid.unpersist()
    return CompileResult(
        gateways=written + stats["problems"] + n_withheld,
        bundles=written,
        invalid=n_invalid,
        out=out,
        withheld=n_withheld,
    )


def _at_the_same_time(spark: Any, first: Any, second: Any, cancel_second: Any) -> tuple[Any, Any]:
    """(first(), second()): two Spark actions run at the same time, ``second`` in a thread
    whose jobs carry a tag of their own. When ``cancel_second(first())`` holds, the second's
    jobs are cancelled (its result is not needed: compile fails on invalid input without
    building bundles it would not sign) and (first, None) is returned; an error of either
    action is raised."""
    import threading
    import uuid

    from pyspark import InheritableThread

    tag = f"edge-broker-compile-{uuid.uuid4().hex}"
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        spark.sparkContext.addJobTag(tag)
        try:
            outcome["value"] = second()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            spark.sparkContext.removeJobTag(tag)
            done.set()

    def cancel() -> None:
        # repeated until the thread is done: a job it submits after a cancellation (the next
        # job of the same action) must not run either
        while not done.wait(0.0):
            spark.sparkContext.cancelJobsWithTag(tag)
            done.wait(0.5)
        thread.join()

    thread = InheritableThread(target=run, daemon=True)
    thread.start()
    try:
        result = first()
    except BaseException:
        cancel()
        raise
    if cancel_second(result):
        cancel()
        return result, None
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return result, outcome["value"]


def _collect_together(frames: dict[str, Any]) -> dict[str, list[Any]]:
    """The rows of every frame, by its name, collected by one Spark job: the frames are
    unioned by column name (a column one lacks is null in its rows) with their name in
    ``_kind``. Each kind of row is bounded by the input (the rule and grant rows, the distinct
    names an invalid row taints)."""
    from pyspark.sql import functions as F

    found: dict[str, list[Any]] = {kind: [] for kind in frames}
    if not frames:
        return found
    tagged = [df.withColumn("_kind", F.lit(kind)) for kind, df in frames.items()]
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged)
    for row in union.collect():
        found[row["_kind"]].append(row)
    return found


def _write_invalid(storage: Storage, out: str, invalid: Any, count: int) -> None:
    """``invalid.jsonl``: the first INVALID_SAMPLE invalid rows (by table, file, row); with more,
    every one of them in the ``invalid/`` JSON folder written by the executors."""
    rows = (
        [
            r.asDict()
            for r in invalid.orderBy("table", "file", "row").limit(INVALID_SAMPLE).collect()
        ]
        if count
        else []
    )
    storage.write_text(
        join(out, "invalid.jsonl"),
        "".join(
            json.dumps({k: r.get(k) for k in INVALID_COLUMNS}, sort_keys=True) + "\n" for r in rows
        ),
    )
    if count > INVALID_SAMPLE:
        invalid.drop("_scope").write.mode("overwrite").json(join(out, "invalid"))
        storage.check_landed(join(out, "invalid"), "invalid-row")


def _invalid_message(invalid: Any, count: int, out: str) -> str:
    rows = invalid.orderBy("table", "file", "row").limit(20).collect()
    shown = "\n".join(f"  {r['file']} row {r['row']}: {r['reason']}" for r in rows)
    more = f"\n  ... and {count - len(rows)} more" if count > len(rows) else ""
    return f"{count} invalid row(s) (in {join(out, 'invalid.jsonl')}):\n{shown}{more}"


def _check_gateway_row(row: dict[str, Any]) -> str | None:
    gw = row.get("gateway") or ""
    if not GATEWAY_ID.fullmatch(gw):
        return f"gateway: {gw!r} is not a gateway id (1-128 of A-Z a-z 0-9 _ . @ ~ -)"
    version = row.get("version")
    if version is None or int(version) < 1:
        return f"version: must be an integer >= 1, not {version!r}"
    if row.get("acl_default") not in (None, "allow", "deny"):
        return f"acl_default: write allow or deny, not {row.get('acl_default')!r}"
    return None


def _publish(target: str, bundles: list[tuple[str, bytes]]) -> None:
    """Publish each bundle retained to ``edge/<gateway>/policy`` on the cloud broker HOST:PORT."""
    import paho.mqtt.publish as publish

    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise PipelineError(f"--publish {target!r}: write HOST:PORT")
    progress(f"publishing {len(bundles)} bundles to {target}")
    msgs: list[Any] = [
        {"topic": f"edge/{gw}/policy", "payload": data, "qos": 1, "retain": True}
        for gw, data in bundles
    ]
    for i in range(0, len(msgs), 500):
        publish.multiple(
            msgs[i : i + 500], hostname=host, port=int(port), client_id="edge-broker-pipeline"
        )
