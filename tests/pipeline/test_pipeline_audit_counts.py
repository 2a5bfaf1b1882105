"""The ``audit`` job over the records the broker now writes: an aggregated record counts as its
``count`` requests in every table, and default-deny denials (no rule) are grouped per permission
set (``set``) instead of one "(no rule)" row; records written before these fields still count
as one request each and land in "(no rule)"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from edge_broker.pipeline.audit import run_audit


def _rec(**fields: Any) -> dict[str, Any]:
    return {"v": 1, "ts": 1_700_000_000.0, "gw": "gw-1", "tenant": "~", **fields}


def _denied(action: str, client: str, topic: str, **fields: Any) -> dict[str, Any]:
    """A denied decision: by the permissions gate (0x87) unless ``fields`` say otherwise; a
    field given as None is left out of the record (a refused CONNECT names no gate)."""
    given = {"gate": "permissions", "rc": 135, **fields}
    return _rec(
        type="decision",
        action=action,
        client=client,
        topic=topic,
        outcome="deny",
        **{k: v for k, v in given.items() if v is not None},
    )


RECORDS = [
    # default deny under two different sets, one of them aggregated
    _denied("publish", "a", "x", set="own-data"),
    _denied("publish", "a", "x", set="own-data", count=41, first_ts=1.0, last_ts=2.0),
    _denied("publish", "b", "y", set="ops,audit"),
    _denied("subscribe", "c", "#", set="unassigned", count=5),
    # an older record: no set, no count
    _denied("publish", "d", "z"),
    # a rule decided: the set does not rename it
    _denied("publish", "a", "admin/x", rule="no-admin", set="own-data", count=9),
    # refused CONNECTs of a storm, aggregated (no gate: the CONNECT is refused before any)
    _denied("connect", "s", "", gate=None, user="storm", rc=134, addr="10.0.0.9"),
    _denied("connect", "s", "", gate=None, user="storm", rc=134, addr="10.0.0.9", count=1999),
    # egress filtering and a claim flood, aggregated
    _denied("deliver", "p", "t", to="r", gate="acl", rule="no-t", count=7),
    _rec(
        type="event",
        event="claim",
        client="f",
        topic="access/claim",
        outcome="deny",
        rc=0x97,
        count=30,
    ),
    _rec(
        type="decision",
        action="publish",
        client="a",
        topic="ok",
        outcome="allow",
        gate="permissions",
        rule="own",
        rc=0,
        qos=1,
        retain=True,
        roles=["field", "sensor"],
        count=3,
    ),
]


def test_counts_and_default_deny_per_set(spark: Any, tmp_path: Path) -> None:
    audit = tmp_path / "audit"
    audit.mkdir()
    (audit / "audit-00000001.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    result = run_audit(spark, [str(audit)], str(tmp_path / "out"), top=100)
    assert result.bad_lines == 0 and result.records == len(RECORDS)
    denials = sum(
        r.get("count", 1) for r in RECORDS if r["type"] == "decision" and r["outcome"] == "deny"
    )
    assert result.denials == denials == 1 + 41 + 1 + 5 + 1 + 9 + 1 + 1999 + 7
    by_rule = {(r["gate"], r["rule"]): r["denials"] for r in result.tables["denials_by_rule"]}
    assert by_rule == {
        ("permissions", "(no rule: set own-data)"): 42,
        ("permissions", "(no rule: set ops,audit)"): 1,
        ("permissions", "(no rule: unassigned)"): 5,
        ("permissions", "(no rule)"): 1,
        ("permissions", "no-admin"): 9,
        (None, "(no rule)"): 2000,
        ("acl", "no-t"): 7,
    }
    by_client = {r["client"]: r["denials"] for r in result.tables["denials_by_client"]}
    assert by_client["s"] == 2000 and by_client["a"] == 51
    egress = result.tables["egress_filtered"]
    assert [(r["to"], r["filtered"]) for r in egress] == [("r", 7)]
    assert [(r["client"], r["refused_claims"]) for r in result.tables["claim_flood"]] == [("f", 30)]
    week = {(r["gate"], r["rule"]): r["this_week"] for r in result.tables["week_denials_by_rule"]}
    assert week[("permissions", "(no rule: set own-data)")] == 42
