"""``compile``: fleet inventory + rule tables -> validated rules -> one signed bundle per gateway.

Input tables (README "Cloud pipeline"; each ``<input>/<table>.parquet|.csv|.json``):

- ``gateways`` (required): ``gateway``*, ``version``* (int >= 1), ``acl_default`` (allow|deny)
- ``devices`` (required): ``gateway``*, ``client_id``*, ``sets``* (whitespace-separated permission
  set names), ``username``, ``tenant``, ``smoker_id``
- ``permissions``: ``set``*, ``topic``*, ``seq`` (order within the set), ``id``, ``activity``,
  ``type``, ``qos``, ``retain``, ``shared_subscription``, ``shared_group`` (seed 003 fields)
- ``acl``: ``id``*, ``permission``*, ``messages``*, ``key_exprs``*, ``flows``, ``interfaces``,
  ``cert_common_names``, ``usernames`` (lists whitespace-separated), ``gateway`` (empty: every gateway)
- ``grants``: ``tenant``, ``direction``* (pub|sub), ``rule``* (token grant rules, PATTERNS.md §3)

Every rule is checked inside Spark by a pandas UDF calling the broker's parser
(``edge_broker.pipeline.rules``); each assembled gateway policy is loaded once more with
``edge_broker.sync.apply.check_policy`` (as ``bundle create`` and a gateway applying it do) before
it is signed, so a bundle is never one the gateway would refuse. Outputs: ``<out>/bundles/<gateway>.cbor`` (``create_bundle``: byte-for-byte what
``edge-broker bundle create`` makes from the same policy and issued_at), ``<out>/policies/
<gateway>.json`` with ``--emit-policies``, ``<out>/grants/<tenant>.json`` (the ``--grant`` of
``edge-broker token create``), and ``<out>/invalid.jsonl``: every invalid row with its reason.
"""

from __future__ import annotations

import functools
import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .inputs import INVALID_COLUMNS, Column, find_table, read_table
from .rules import check_acl, check_device, check_grant, check_permission, permission_rule
from .session import PipelineError, progress

GATEWAY_ID = re.compile(r"[A-Za-z0-9_.@~-]{1,128}")

TABLES: dict[str, tuple[Column, ...]] = {
    "gateways": (Column("gateway", required=True), Column("version", "long", True), Column("acl_default")),
    "devices": (
        Column("gateway", required=True), Column("client_id", required=True), Column("sets", required=True),
        Column("username"), Column("tenant"), Column("smoker_id"),
    ),
    "permissions": (
        Column("set", required=True), Column("topic", required=True), Column("seq", "long"), Column("id"),
        Column("activity"), Column("type"), Column("qos"), Column("retain"),
        Column("shared_subscription"), Column("shared_group"),
    ),
    "acl": (
        Column("id", required=True), Column("permission", required=True), Column("messages", required=True),
        Column("key_exprs", required=True), Column("flows"), Column("interfaces"),
        Column("cert_common_names"), Column("usernames"), Column("gateway"),
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
    return F.pandas_udf(run, "string")  # type: ignore[attr-defined]


def _validate(df: Any, table: str, check: Any, names: list[str], separator: str | None) -> tuple[Any, Any]:
    from pyspark.sql import functions as F

    udf = _checker(check, names, separator)
    checked = df.withColumn("_reason", udf(F.struct(*[F.col(n) for n in names]))).cache()  # each row checked once
    invalid = checked.where(F.col("_reason").isNotNull()).select(
        F.lit(table).alias("table"), F.col("_file").alias("file"), F.col("_row").alias("row"),
        F.regexp_extract(F.col("_reason"), r"^([A-Za-z_.\[\]0-9]+):", 1).alias("key"), F.col("_reason").alias("reason"),
    )
    return checked.where(F.col("_reason").isNull()).drop("_reason"), invalid


def _duplicates(df: Any, table: str, keys: list[str], what: str) -> tuple[Any, Any]:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(*keys).orderBy("_row")
    ranked = df.withColumn("_n", F.row_number().over(window)).withColumn("_first", F.first("_row").over(window))
    invalid = ranked.where(F.col("_n") > 1).select(
        F.lit(table).alias("table"), F.col("_file").alias("file"), F.col("_row").alias("row"), F.lit(keys[-1]).alias("key"),
        F.concat(F.lit(f"{keys[-1]}: duplicate {what}; row "), F.col("_first").cast("string"), F.lit(" has it first")).alias("reason"),
    )
    return ranked.where(F.col("_n") == 1).drop("_n", "_first"), invalid


def _build_sets(rows: list[Any], separator: str, invalid: list[dict[str, Any]], file: str) -> dict[str, list[dict[str, Any]]]:
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
            invalid.append({"table": "permissions", "file": file, "row": members[0]["_row"], "key": "set", "reason": str(exc)})
            continue
        sets[name] = rules
    return sets


def run_compile(
    spark: Any, input_dir: str, out: str, *, key: Any, issued_at: int, separator: str = "/",
    skip_invalid: bool = False, emit_policies: bool = False, publish: str | None = None,
) -> CompileResult:
    """The compile job. Raises :class:`PipelineError` for unusable input (missing table or column)
    and, unless ``skip_invalid``, when any row is invalid (after writing the report)."""
    import pandas as pd
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from ..sync.bundle import create_bundle

    frames: dict[str, Any] = {}
    invalid_frames: list[Any] = []
    files: dict[str, str] = {}
    for table, columns in TABLES.items():
        path = find_table(input_dir, table)
        if path is None:
            if table in REQUIRED_TABLES:
                raise PipelineError(f"{input_dir}: no {table} table; add {table}.parquet, {table}.csv or {table}.json")
            continue
        progress(f"reading {table} from {path}")
        files[table] = path
        frames[table], bad = read_table(spark, path, table, columns)
        invalid_frames.append(bad)

    progress("validating rules with the broker's parsers")
    gateways = frames["gateways"]
    gateways, bad = _validate(gateways, "gateways", _check_gateway_row, ["gateway", "version", "acl_default"], None)
    invalid_frames.append(bad)
    gateways, bad = _duplicates(gateways, "gateways", ["gateway"], "gateway id")
    invalid_frames.append(bad)

    devices, bad = _validate(frames["devices"], "devices", check_device,
                             ["client_id", "username", "tenant", "smoker_id", "sets"], None)
    invalid_frames.append(bad)

    sets: dict[str, list[dict[str, Any]]] = {}
    driver_invalid: list[dict[str, Any]] = []
    if "permissions" in frames:
        names = [c.name for c in TABLES["permissions"]]
        perms, bad = _validate(frames["permissions"], "permissions", check_permission, names, separator)
        invalid_frames.append(bad)
        sets = _build_sets(perms.collect(), separator, driver_invalid, files["permissions"])

    acl_rows: list[dict[str, Any]] = []
    if "acl" in frames:
        names = [c.name for c in TABLES["acl"]]
        acl, bad = _validate(frames["acl"], "acl", check_acl, names, None)
        invalid_frames.append(bad)
        acl_rows = [r.asDict() for r in acl.orderBy("_row").collect()]

    grants: dict[str, dict[str, list[str]]] = {}
    if "grants" in frames:
        g, bad = _validate(frames["grants"], "grants", check_grant, ["tenant", "direction", "rule"], separator)
        invalid_frames.append(bad)
        for r in g.orderBy("_row").collect():
            tenant = r["tenant"] or "~"
            entry = grants.setdefault(tenant, {"tenant_ids": [tenant], "allow_channels_pub": [], "allow_channels_sub": []})
            entry["allow_channels_pub" if r["direction"] == "pub" else "allow_channels_sub"].append(r["rule"])

    # devices: known gateway, known sets, unique client id per gateway
    known_sets = spark.createDataFrame([(s,) for s in sets] or [("\x00",)], "name string")
    exploded = devices.select("_file", "_row", F.explode(F.split(F.trim(F.col("sets")), r"\s+")).alias("name"))
    missing = exploded.join(known_sets, "name", "left_anti").groupBy("_file", "_row").agg(
        F.concat_ws(", ", F.sort_array(F.collect_set("name"))).alias("names"))
    invalid_frames.append(missing.select(
        F.lit("devices").alias("table"), F.col("_file").alias("file"), F.col("_row").alias("row"), F.lit("sets").alias("key"),
        F.concat(F.lit("sets: no valid permission set named "), F.col("names")).alias("reason")))
    devices = devices.join(missing.select("_row"), "_row", "left_anti")
    unknown_gw = devices.join(gateways.select("gateway"), "gateway", "left_anti")
    invalid_frames.append(unknown_gw.select(
        F.lit("devices").alias("table"), F.col("_file").alias("file"), F.col("_row").alias("row"), F.lit("gateway").alias("key"),
        F.concat(F.lit("gateway: no valid gateway "), F.col("gateway"), F.lit(" in the gateways table")).alias("reason")))
    devices, bad = _duplicates(devices, "devices", ["gateway", "client_id"], "client id on this gateway")
    invalid_frames.append(bad)

    acl_by_gateway: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for r in acl_rows:
        acl_by_gateway[r["gateway"]].append(r)
    sign_key = bytes(key)

    def build(frame: pd.DataFrame) -> pd.DataFrame:
        import nacl.signing

        from ..sync.apply import check_policy
        from ..sync.bundle import BundleError
        from .policy import gateway_policy

        gw = frame["gateway"].iloc[0]
        version = int(frame["version"].iloc[0])
        acl_default = _clean(frame["acl_default"].iloc[0])
        members = [{"client_id": c, "sets": s} for c, s in zip(frame["client_id"], frame["sets"], strict=True)
                   if _clean(c) is not None]
        gw_acl = acl_by_gateway.get(None, []) + acl_by_gateway.get(gw, [])
        policy = gateway_policy(members, sets, gw_acl, acl_default)
        try:
            check_policy(policy, f"gateway {gw}", separator, version)  # as the gateway will apply it
            data = create_bundle(nacl.signing.SigningKey(sign_key), version=version, gateway=gw,
                                 issued_at=issued_at, policy=policy)
            problem = None
        except BundleError as exc:
            data, problem = None, f"the assembled policy is refused by the broker: {exc}"
        return pd.DataFrame({"gateway": [gw], "version": [version], "devices": [len(members)], "bundle": [data],
                             "policy": [json.dumps(policy, sort_keys=True)], "problem": [problem],
                             "_row": [int(frame["_row"].iloc[0])]})

    progress("assembling and signing one bundle per gateway")
    joined = gateways.select("gateway", "version", "acl_default", "_row").join(
        devices.select("gateway", "client_id", "sets"), "gateway", "left")
    schema = T.StructType([
        T.StructField("gateway", T.StringType()), T.StructField("version", T.LongType()),
        T.StructField("devices", T.LongType()), T.StructField("bundle", T.BinaryType()),
        T.StructField("policy", T.StringType()), T.StructField("problem", T.StringType()),
        T.StructField("_row", T.LongType()),
    ])
    bundles = joined.groupBy("gateway").applyInPandas(build, schema)
    outdir = Path(out)
    (outdir / "bundles").mkdir(parents=True, exist_ok=True)
    if emit_policies:
        (outdir / "policies").mkdir(parents=True, exist_ok=True)
    written = 0
    published: list[tuple[str, bytes]] = []
    gw_file = files["gateways"]
    for row in bundles.toLocalIterator():
        if row["problem"] is not None:
            driver_invalid.append({"table": "gateways", "file": gw_file, "row": row["_row"], "key": "gateway",
                                   "reason": f"gateway {row['gateway']}: {row['problem']}"})
            continue
        (outdir / "bundles" / f"{row['gateway']}.cbor").write_bytes(row["bundle"])
        if emit_policies:
            (outdir / "policies" / f"{row['gateway']}.json").write_text(row["policy"] + "\n", encoding="utf-8")
        if publish is not None:
            published.append((row["gateway"], bytes(row["bundle"])))
        written += 1
        if written % 1000 == 0:
            progress(f"{written} bundles written")
    if grants:
        (outdir / "grants").mkdir(exist_ok=True)
        for tenant, grant in grants.items():
            (outdir / "grants" / f"{tenant}.json").write_text(json.dumps(grant, sort_keys=True) + "\n", encoding="utf-8")

    union = functools.reduce(lambda a, b: a.unionByName(b), invalid_frames)
    report = [r.asDict() for r in union.collect()] + driver_invalid
    report.sort(key=lambda r: (r["table"], r["file"], r["row"] or 0))
    with open(outdir / "invalid.jsonl", "w", encoding="utf-8") as fh:
        for r in report:
            fh.write(json.dumps({k: r.get(k) for k in INVALID_COLUMNS}, sort_keys=True) + "\n")
    progress(f"{written} bundles in {outdir / 'bundles'}; {len(report)} invalid rows in {outdir / 'invalid.jsonl'}")
    if report and not skip_invalid:
        shown = "\n".join(f"  {r['file']} row {r['row']}: {r['reason']}" for r in report[:20])
        more = f"\n  ... and {len(report) - 20} more" if len(report) > 20 else ""
        raise PipelineError(f"{len(report)} invalid row(s) (all in {outdir / 'invalid.jsonl'}):\n{shown}{more}\n"
                            "fix them, or pass --skip-invalid to compile the rest")
    if published:
        _publish(publish or "", published)
    return CompileResult(gateways=written + sum(1 for r in driver_invalid if r["table"] == "gateways"),
                         bundles=written, invalid=len(report), out=str(outdir))


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
    msgs: list[Any] = [{"topic": f"edge/{gw}/policy", "payload": data, "qos": 1, "retain": True} for gw, data in bundles]
    for i in range(0, len(msgs), 500):
        publish.multiple(msgs[i:i + 500], hostname=host, port=int(port), client_id="edge-broker-pipeline")
