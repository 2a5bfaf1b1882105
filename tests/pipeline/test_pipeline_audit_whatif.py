"""Audit and what-if jobs on a local Spark session, checked against plain Python over the same
JSON lines: denials by tenant/client/rule, claim floods, egress filtering, top talkers, bad lines
counted; the what-if diff equals evaluating both policies directly with the broker's gate code."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from edge_broker.pipeline.audit import run_audit
from edge_broker.pipeline.fleet import SETS, make_fleet
from edge_broker.pipeline.policy import gateway_policy
from edge_broker.pipeline.replay import decide, policy_from_sections
from edge_broker.pipeline.whatif import KEYS, run_whatif
from edge_broker.sync.bundle import PolicyBundle
from tests.pipeline.conftest import Keys

GATEWAYS = ("gw-00000", "gw-00001", "gw-00002")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    base = tmp_path_factory.mktemp("auditfleet")
    fleet = make_fleet(
        str(base), gateways=3, devices_per_gateway=8, tenants=2, audit_records=1500, seed=11
    )
    audit = Path(fleet.directory) / "audit"
    records = [
        json.loads(line)
        for f in sorted(audit.rglob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    with open(audit / "gw-00000" / "audit-00000001.jsonl", "a") as fh:
        fh.write(
            '{"v":1,"type":"decision"\n{"v":2,"type":"event"}\n'
        )  # a torn line, a future version
    return audit, records


def test_audit_tables_match_plain_python(
    spark: Any, logs: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    audit, records = logs
    result = run_audit(spark, [str(audit)], str(tmp_path / "out"), top=1000)
    assert result.records == len(records) and result.bad_lines == 2
    denials = [
        r for r in records if r["type"] == "decision" and r["outcome"] in ("deny", "disconnect")
    ]
    assert result.denials == len(denials)
    assert {r["tenant"]: r["denials"] for r in result.tables["denials_by_tenant"]} == dict(
        Counter(r["tenant"] for r in denials)
    )
    assert {
        (r["gw"], r["client"]): r["denials"] for r in result.tables["denials_by_client"]
    } == dict(Counter((r["gw"], r["client"]) for r in denials))
    assert {(r["gate"], r["rule"]): r["denials"] for r in result.tables["denials_by_rule"]} == dict(
        Counter((r["gate"], r.get("rule", "(no rule)")) for r in denials)
    )
    floods = Counter(
        (r["gw"], r["client"])
        for r in records
        if r.get("rc") == 0x97 and r.get("topic") == "access/claim"
    )
    assert floods and {
        (r["gw"], r["client"]): r["refused_claims"] for r in result.tables["claim_flood"]
    } == dict(floods)
    egress = [r for r in records if r.get("action") == "deliver" and r["outcome"] == "deny"]
    assert egress and sum(r["filtered"] for r in result.tables["egress_filtered"]) == len(egress)
    talkers = Counter()
    for r in records:
        if r.get("event") == "client_stats":
            talkers[(r["gw"], r["client"])] += r["msgs_in"] + r["msgs_out"]
    top = result.tables["top_talkers"]
    assert top[0]["msgs"] == max(talkers.values())
    assert {(r["gw"], r["client"]): r["msgs"] for r in top} == {
        k: v for k, v in talkers.items() if k in {(r["gw"], r["client"]) for r in top}
    }
    html = (tmp_path / "out" / "report.html").read_text()
    assert (
        "<svg" in html
        and "Claim-flood offenders" in html
        and "http" not in html.split("<body>")[1].replace("http://www.w3.org/2000/svg", "")
    )
    for name in ("denials_by_tenant", "claim_flood", "egress_filtered", "top_talkers"):
        assert list((tmp_path / "out" / name).glob("*.parquet"))


def _policy(devices: list[dict[str, Any]], sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return gateway_policy(devices, sets)


def _bundles(records: list[dict[str, Any]], gw: str) -> tuple[PolicyBundle, PolicyBundle]:
    """(baseline, candidate) for ``gw``: the fleet's sets, and sets that let sensors publish to
    admin/reboot but no longer to sensors/<id>/temp on QoS 1."""
    mine = {(r["client"], r["tenant"]) for r in records if r["gw"] == gw}
    devices = [{"client_id": c, "sets": "sensor"} for c, _ in sorted(mine)]
    base_sets = {k: [dict(r) for r in v] for k, v in SETS.items()}
    cand_sets = {
        **base_sets,
        "sensor": [
            {"id": "admin-reboot", "topic": "admin/reboot", "activity": "PUBLISH"},
            {"id": "no-admin", "topic": "admin/#", "type": "DENY"},
            {
                "id": "own-data-q0",
                "topic": "sensors/${clientid}/#",
                "activity": "PUBLISH",
                "qos": "ZERO",
            },
            {"id": "commands", "topic": "commands/${clientid}", "activity": "SUBSCRIBE"},
        ],
    }
    baseline = PolicyBundle(1, gw, 0, _policy(devices, base_sets), "k", b"")
    candidate = PolicyBundle(2, gw, 0, _policy(devices, cand_sets), "k", b"")
    return baseline, candidate


def test_whatif_diff_equals_direct_evaluation(
    spark: Any, keys: Keys, logs: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    audit, records = logs
    gw = "gw-00001"
    baseline, candidate = _bundles(records, gw)
    result = run_whatif(spark, [str(audit)], candidate, str(tmp_path / "wi"), baseline=baseline)

    import pandas as pd

    got = pd.read_parquet(tmp_path / "wi" / "changes")
    got = got.astype(object).where(got.notna(), None)
    got_keys = {
        (r["client"], r["action"], r["topic"], int(r["qos"])): (
            r["before_outcome"],
            r["after_outcome"],
            r["after_rule"],
        )
        for r in got.to_dict("records")
    }
    before, after = policy_from_sections(baseline.policy), policy_from_sections(candidate.policy)
    expected = {}
    requests = {
        tuple(r.get(k) for k in KEYS)
        for r in records
        if r["gw"] == gw and r["type"] == "decision" and r["action"] in ("publish", "subscribe")
    }
    for req in requests:
        rec = dict(zip(KEYS, req, strict=True))
        b, a = decide(before, rec), decide(after, rec)
        if b.outcome != a.outcome:
            expected[(rec["client"], rec["action"], rec["topic"], int(rec["qos"] or 0))] = (
                b.outcome,
                a.outcome,
                a.rule,
            )
    assert expected, "the candidate changes nothing: the test would prove nothing"
    assert got_keys == expected
    assert result.requests == len(requests) and result.changed == len(expected)
    outcomes = {(v[0], v[1]) for v in expected.values()}
    assert ("deny", "allow") in outcomes and ("allow", "deny") in outcomes
    assert sum(r["requests"] for r in result.by_rule) == len(expected)


def test_whatif_for_one_gateway_reads_only_its_partitions(
    spark: Any, logs: tuple[Path, list[dict[str, Any]]], tmp_path: Path
) -> None:
    """The audit job writes its cleaned records partitioned by gateway and date; whatif for one
    gateway on that folder opens only that gateway's files: every other gateway's Parquet file
    is made garbage and the answer is still the one from the raw logs."""

    audit, records = logs
    gw = "gw-00001"
    run_audit(spark, [str(audit)], str(tmp_path / "report"))
    folder = tmp_path / "report" / "records"
    days = {time.strftime("%Y-%m-%d", time.gmtime(r["ts"])) for r in records if r["gw"] == gw}
    assert {p.name for p in (folder / f"gateway={gw}").iterdir()} == {f"date={d}" for d in days}
    assert {p.name for p in folder.glob("gateway=*")} == {f"gateway={g}" for g in GATEWAYS}
    baseline, candidate = _bundles(records, gw)
    raw = run_whatif(spark, [str(audit)], candidate, str(tmp_path / "raw"), baseline=baseline)
    others = [p for p in folder.rglob("*.parquet") if f"gateway={gw}" not in str(p)]
    assert others
    for p in others:
        p.write_bytes(b"not parquet at all")
    spark.catalog.clearCache()
    pruned = run_whatif(spark, [str(folder)], candidate, str(tmp_path / "wi"), baseline=baseline)
    assert (pruned.requests, pruned.changed) == (raw.requests, raw.changed)
    assert pruned.changed > 0 and sorted(map(str, pruned.by_rule)) == sorted(map(str, raw.by_rule))
    # the report folder itself names its records; a whole-fleet read does open the garbage
    everyone = PolicyBundle(2, "*", 0, candidate.policy, "k", b"")
    with pytest.raises(Exception, match="(?i)parquet"):
        run_whatif(spark, [str(tmp_path / "report")], everyone, str(tmp_path / "all"))


def test_uploaded_batches_are_input_once(spark: Any, tmp_path: Path, broker_factory: Any) -> None:
    """Real upload batches (the gateway uploader's own next_batch) published twice to a real
    broker, stored by ``edge-broker-pipeline collect``: headers are not bad lines, and a batch
    stored twice (here also copied by hand under another name) counts once."""
    import shutil
    import threading
    import time

    import paho.mqtt.publish as publish

    from edge_broker.audit.log import AuditLog
    from edge_broker.pipeline.cli import main
    from edge_broker.sync.upload import next_batch

    log = AuditLog(tmp_path / "gwlog", "gw-up")
    for i in range(7):
        log.decision(
            action="publish",
            client="c1",
            tenant="~",
            topic=f"admin/{i}",
            outcome="deny",
            gate="permissions",
            rule="no-admin",
            rc=0x87,
        )
    log.close()
    first = next_batch(tmp_path / "gwlog", "gw-up", None, 4)
    assert first is not None
    second = next_batch(tmp_path / "gwlog", "gw-up", (first.segment, first.last), 4)
    assert second is not None and second.count == 3
    cloud = broker_factory()
    msgs: list[Any] = [
        {"topic": "edge/gw-up/audit", "payload": b.payload, "qos": 1}
        for b in (first, first, second)
    ]
    store = tmp_path / "store"
    codes: list[int] = []
    collector = threading.Thread(
        target=lambda: codes.append(
            main(
                [
                    "collect",
                    "--broker",
                    f"127.0.0.1:{cloud.port}",
                    "-o",
                    str(store),
                    "--count",
                    "2",  # new batches: the repeat of the first is stored once
                    "--idle",
                    "20",
                ]
            )
        )
    )
    collector.start()
    time.sleep(1.0)  # subscribed
    publish.multiple(
        msgs, hostname="127.0.0.1", port=cloud.port
    )  # the first batch sent twice (at least once)
    collector.join(30)
    assert codes == [0]
    stored = sorted(p.name for p in (store / "gw-up").iterdir())
    assert stored == [f"{first.segment:08d}-1-4.jsonl", f"{first.segment:08d}-5-7.jsonl"]
    shutil.copy(store / "gw-up" / stored[0], store / "gw-up" / "copy-of-first.jsonl")
    result = run_audit(spark, [str(store)], str(tmp_path / "out"))
    assert (result.records, result.bad_lines, result.denials) == (7, 0, 7)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["duplicate_batches"] == 1 and summary["files"] == 3


def test_bad_lines_have_line_numbers_and_their_text(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    good = (
        '{"v":1,"ts":1.0,"gw":"g","type":"decision","action":"publish","outcome":"deny",'
        '"client":"c"}'
    )
    (tmp_path / "logs" / "a.jsonl").write_text(
        f'{good}\n{good}\n{{"v":2, "type":"event"}}\n{good}\nnot json\n'
    )
    result = run_audit(spark, [str(tmp_path / "logs")], str(tmp_path / "out"), records_out=False)
    assert (result.records, result.bad_lines) == (3, 2)
    assert not (tmp_path / "out" / "records").exists()  # --no-records
    html = (tmp_path / "out" / "report.html").read_text()
    assert (
        "<td>3</td><td>unsupported format version 2; expected 1</td><td>{&quot;v&quot;:2, "
        "&quot;type&quot;:&quot;event&quot;}</td>" in html
    )
    assert "<td>5</td><td>not JSON" in html


def test_uris_go_through_hadoop_not_the_local_disk(
    spark: Any,
    logs: tuple[Path, list[dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from edge_broker.pipeline.spark import PipelineError

    audit, records = logs
    monkeypatch.chdir(tmp_path)
    with pytest.raises(
        PipelineError, match=r"s3a://bucket/report: cannot open this file system.*s3a"
    ):
        run_audit(spark, [audit.as_uri()], "s3a://bucket/report")
    assert not (tmp_path / "s3a:").exists()  # no local folder named after the scheme
    result = run_audit(spark, [audit.as_uri()], (tmp_path / "r").as_uri())  # file:// in and out
    assert result.records == len(records) and (tmp_path / "r" / "report.html").exists()


def test_output_the_driver_cannot_see_fails_loudly(spark: Any, tmp_path: Path) -> None:
    """What a driver sees when a worker committed to its own, unshared disk: only _SUCCESS."""
    from edge_broker.pipeline.spark import PipelineError
    from edge_broker.pipeline.storage import Storage

    (tmp_path / "denials_by_tenant").mkdir()
    (tmp_path / "denials_by_tenant" / "_SUCCESS").write_text("")
    with pytest.raises(PipelineError, match=r"not there \(only _SUCCESS\).*share"):
        Storage(spark).check_landed((tmp_path / "denials_by_tenant").as_uri(), "Parquet")
    (tmp_path / "denials_by_tenant" / "part-00000-x.snappy.parquet").write_bytes(b"PAR1")
    Storage(spark).check_landed((tmp_path / "denials_by_tenant").as_uri(), "Parquet")


def test_what_changed_this_week(spark: Any, tmp_path: Path) -> None:
    """Crafted records over three weeks whose answer is known: the last 7 days (up to the newest
    record) against the 7 before; a denial 20 days old is in neither week."""
    day, end = 86400, 1_790_000_000.0

    def rec(ago_days: float, gw: str, client: str, outcome: str, **extra: Any) -> str:
        base = {"v": 1, "ts": end - ago_days * day, "gw": gw, "client": client, "tenant": "t1"}
        base.update(type="decision", action="publish", topic="x/y", outcome=outcome, **extra)
        return json.dumps(base)

    admin = {"gate": "permissions", "rule": "no-admin", "rc": 0x87}
    fw = {"gate": "acl", "rule": "no-fw", "rc": 0x87}
    claims = {"gate": "claims", "rc": 0x97}
    lines = [rec(20, "gw-a", "c5", "deny", **admin)]  # before both weeks
    lines += [rec(10 + i * 0.1, "gw-a", "c1", "deny", **admin) for i in range(3)]
    lines += [rec(9 + i * 0.1, "gw-a", "c2", "deny", **fw) for i in range(2)]
    lines += [rec(8, "gw-a", "c1", "allow")]
    lines += [rec(7.0, "gw-a", "c6", "deny", **admin)]  # exactly 7 days: the week before
    lines += [rec(3, "gw-a", "c1", "deny", **admin)]
    lines += [rec(2 + i * 0.1, "gw-b", "c3", "disconnect", **claims) for i in range(4)]
    lines += [rec(1 + i * 0.1, "gw-a", "c2", "deny", **fw) for i in range(5)]
    lines += [rec(0.5, "gw-a", "c4", "allow"), rec(0, "gw-a", "c1", "allow")]
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text("\n".join(lines) + "\n")
    result = run_audit(spark, [str(tmp_path / "logs")], str(tmp_path / "out"), top=1000)

    def rows(name: str, *keys: str) -> list[tuple[Any, ...]]:
        return [tuple(r[k] for k in keys) for r in result.tables[name]]

    cols = ("before", "this_week", "change", "new")
    assert rows("week_denials_by_rule", "gate", "rule", *cols) == [
        ("claims", "(no rule)", 0, 4, 4, True),
        ("acl", "no-fw", 2, 5, 3, False),  # ties on |change|: more denials this week first
        ("permissions", "no-admin", 4, 1, -3, False),
    ]
    assert rows("week_denials_by_client", "gw", "client", *cols) == [
        ("gw-b", "c3", 0, 4, 4, True),
        ("gw-a", "c2", 2, 5, 3, False),
        ("gw-a", "c1", 3, 1, -2, False),
        ("gw-a", "c6", 1, 0, -1, False),
    ]
    assert rows("week_denials_by_gateway", "gw", *cols) == [
        ("gw-b", 0, 4, 4, True),
        ("gw-a", 6, 6, 0, False),
    ]
    assert rows("week_new_clients", "gw", "client", "records_this_week") == [
        ("gw-b", "c3", 4),
        ("gw-a", "c4", 1),
    ]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["week"] == {"first": end - 7 * day, "last": end, "this_week": 10, "before": 6}
    html = (tmp_path / "out" / "report.html").read_text()
    section = html.split("<h2>What changed this week</h2>")[1].split("<h2>")[0]
    assert "Denials: 10 this week, 6 the week before." in section
    assert "<td>claims</td><td>(no rule)</td><td>4</td>" in section  # a new denial
    assert list((tmp_path / "out" / "week_new_clients").glob("*.parquet"))


def test_whatif_counts_cannot_judge_per_rule_and_weights_by_count(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 30: an older record (no qos) judged against a rule with a QoS condition is not
    replayed as QoS 0 but counted as "cannot judge" under that rule, and the job fails unless
    told to accept it; a record's ``count`` weighs its request."""
    from edge_broker.pipeline.whatif import CannotJudge

    base = {"v": 1, "ts": 1.0, "gw": "g", "type": "decision", "action": "publish"}
    lines = [
        # current format: judged; aggregated (count 5) and QoS 1: newly refused
        {**base, "client": "c1", "topic": "sensors/c1/t", "qos": 1, "retain": False,
         "outcome": "allow", "count": 5},
        # older format (no qos, no retain): depends on the QoS condition
        {**base, "client": "c1", "topic": "sensors/c1/h", "outcome": "allow"},
        {**base, "client": "c1", "topic": "sensors/c1/h", "outcome": "allow"},
    ]  # fmt: skip
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    policy = {
        "permissions": {
            "unassigned": "deny",
            "sets": {
                "s": {
                    "rules": [
                        {
                            "id": "own-data",
                            "topic": "sensors/${clientid}/#",
                            "activity": "PUBLISH",
                            "qos": "ZERO",
                        }
                    ]
                }
            },
            "assign": [{"client_id": "c*", "sets": ["s"]}],
        }
    }
    candidate = PolicyBundle(2, "g", 0, policy, "k", b"")
    with pytest.raises(
        CannotJudge, match="1 of 2 distinct requests \\(2 logged\\) cannot be"
    ) as caught:
        run_whatif(spark, [str(tmp_path / "logs")], candidate, str(tmp_path / "wi"))
    result = caught.value.result  # all the job found (what accept_unjudged returns)
    summary = json.loads((tmp_path / "wi" / "summary.json").read_text())
    assert summary["cannot_judge"]["requests"] == 1 and summary["cannot_judge"]["logged"] == 2
    assert summary["cannot_judge"]["by_rule"] == [
        {
            "tenant": "~",
            "rules": "(no rule) | own-data",
            "missing": "qos",
            "requests": 1,
            "logged": 2,
        }
    ]
    assert summary["logged"] == 7 and summary["changed"] == 1 and summary["changed_logged"] == 5
    assert (result.requests, result.changed, result.unjudged, result.unjudged_logged) == (
        2,
        1,
        1,
        2,
    )
    # the command line: exit 4 with the count on stderr, 0 with --accept-unjudged
    import nacl.signing

    from edge_broker.pipeline.cli import main
    from edge_broker.sync.bundle import create_bundle

    signer = nacl.signing.SigningKey(bytes(32))
    (tmp_path / "c.cbor").write_bytes(
        create_bundle(signer, version=2, gateway="g", issued_at=1, policy=policy)
    )
    args = ["--master", "local[2]", "whatif", str(tmp_path / "logs")]
    args += ["--candidate", str(tmp_path / "c.cbor"), "-o", str(tmp_path / "cli")]
    assert main(args) == 4
    assert "cannot be judged" in capsys.readouterr().err
    assert main([*args, "--accept-unjudged"]) == 0
    assert "1 of 2 distinct requests would change, 1 cannot be judged (2 logged)" in (
        capsys.readouterr().out
    )
