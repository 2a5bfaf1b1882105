"""The audit report's "what changed this week": the last 7 days of the logs against the 7 before.

The week ends at the newest record's ``ts`` (not the clock: a report of old logs still compares
their own last two weeks, and the same logs always give the same report). *This week* is
``(last - 7 d, last]``, *the week before* ``(last - 14 d, last - 7 d]``; records before that are
not compared. Tables (Parquet under ``<out>/<name>/`` like the others, largest change first):

- ``week_denials_by_rule``, ``week_denials_by_client``, ``week_denials_by_gateway``: denials
  (``outcome`` deny or disconnect) this week and the week before, and the change; a row with
  ``before = 0`` is a *new* denial (a rule, client or gateway that was not refused before).
- ``week_new_clients``: clients (per gateway) whose first record in all the logs read is in
  this week, with that first time and how many records they have this week.
"""

from __future__ import annotations

from typing import Any

from .report import cut_note, table, utc_time

WEEK = 7 * 86400
TABLES = (
    "week_denials_by_rule",
    "week_denials_by_client",
    "week_denials_by_gateway",
    "week_new_clients",
)


def weekly_tables(records: Any, last_ts: float | None, denials: Any) -> dict[str, Any]:
    """The four tables as DataFrames (empty ones when there is no record with a ``ts``);
    ``denials``: the records' denials counted per key and ``week`` (1: this week, 2: the week
    before; ``audit.denial_counts``)."""
    from pyspark.sql import functions as F

    last = float(last_ts) if last_ts is not None else 0.0
    ts = F.col("ts")
    this_week = (ts > F.lit(last - WEEK)) & (ts <= F.lit(last))
    recent = denials.where(F.col("week").isin(1, 2))

    def compare(*keys: Any, order: tuple[str, ...]) -> Any:
        grouped = recent.groupBy(*keys).agg(
            F.sum(F.when(F.col("week") == 1, F.col("n")).otherwise(0)).alias("this_week"),
            F.sum(F.when(F.col("week") == 2, F.col("n")).otherwise(0)).alias("before"),
        )
        change = F.col("this_week") - F.col("before")
        return (
            grouped.withColumn("change", change)
            .withColumn("new", F.col("before") == 0)
            .orderBy(F.desc(F.abs(change)), F.desc("this_week"), *order)
        )

    rule = F.coalesce(F.col("rule"), F.lit("(no rule)")).alias("rule")
    out = {
        "week_denials_by_rule": compare("gate", rule, order=("gate", "rule")),
        "week_denials_by_client": compare("gw", "client", order=("gw", "client")),
        "week_denials_by_gateway": compare("gw", order=("gw",)),
    }
    seen = records.where(F.col("client").isNotNull() & ts.isNotNull()).groupBy("gw", "client")
    out["week_new_clients"] = (
        seen.agg(
            F.min("ts").alias("first_ts"),
            F.first("tenant", ignorenulls=True).alias("tenant"),
            F.sum(F.when(this_week, 1).otherwise(0)).alias("records_this_week"),
        )
        .where(F.lit(last_ts is not None) & (F.col("first_ts") > F.lit(last - WEEK)))
        .orderBy(F.desc("records_this_week"), "gw", "client")
    )
    return out


def weekly_section(
    tables: dict[str, list[dict[str, Any]]],
    sizes: dict[str, int],
    top: int,
    totals: dict[str, Any],
) -> str:
    """The report's HTML for the four tables (each cut to the top rows, and said so);
    ``totals``: ``first``/``last`` (the week's bounds, Unix seconds), ``this_week``, ``before``
    (denials in all gateways)."""

    def cut(name: str) -> str:
        return cut_note(name, sizes, top)

    when = utc_time

    rules = tables["week_denials_by_rule"]
    new_rules = [r for r in rules if r["new"]]
    clients = [{**r, "first_seen": when(r["first_ts"])} for r in tables["week_new_clients"]]
    parts = [
        f"<p>This week: {when(totals['first'])} to {when(totals['last'])} (the 7 days up to "
        f"the newest record), against the 7 days before. Denials: {totals['this_week']} this "
        f"week, {totals['before']} the week before.</p>",
        "<h3>New denials by rule (none the week before)</h3>",
        table(new_rules, ["gate", "rule", "this_week"]) if new_rules else "<p><em>none</em></p>",
        "<h3>Largest changes by rule</h3>",
        cut("week_denials_by_rule")
        + table(rules, ["gate", "rule", "before", "this_week", "change"]),
        "<h3>Largest changes by client</h3>",
        cut("week_denials_by_client")
        + table(
            tables["week_denials_by_client"], ["gw", "client", "before", "this_week", "change"]
        ),
        "<h3>Largest changes by gateway</h3>",
        cut("week_denials_by_gateway")
        + table(tables["week_denials_by_gateway"], ["gw", "before", "this_week", "change"]),
        "<h3>New clients (first record in these logs this week)</h3>",
        cut("week_new_clients")
        + table(clients, ["gw", "tenant", "client", "first_seen", "records_this_week"]),
    ]
    return "\n".join(parts)
