"""Compile job on a local Spark session: every invalid row reported (none silently dropped), the
valid fleet compiled into bundles that are byte-for-byte what ``edge-broker bundle create`` makes
from the same policy and issued_at, that verify with the cloud key, and whose policy is the one
built independently from the fleet tables."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import cbor2
import pytest

from edge_broker.pipeline.compile import run_compile
from edge_broker.pipeline.fleet import INVALID_KINDS, SETS
from edge_broker.pipeline.policy import gateway_policy
from edge_broker.sync.bundle import create_bundle, verify_bundle
from tests.pipeline.conftest import ISSUED_AT, Compiled, Keys


def _report(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "invalid.jsonl").read_text().splitlines()]


def test_every_invalid_row_is_reported_with_its_reason(compiled: Compiled) -> None:
    # fail closed: a run that reports invalid input signs nothing
    assert (
        not list((compiled.out / "bundles").glob("*.cbor"))
        and "nothing was signed" in compiled.error
    )
    report = _report(compiled.out)
    found = {(r["table"], r["row"]) for r in report}
    assert found == set(compiled.fleet.invalid), (found, compiled.fleet.invalid)
    assert len(report) == len(INVALID_KINDS)
    for r in report:
        assert r["reason"] and str(r["file"]).endswith(f"{r['table']}.csv")
    assert (
        f"{len(INVALID_KINDS)} invalid row(s)" in compiled.error
        and "--skip-invalid" in compiled.error
    )


def _valid_devices(fleet_dir: str) -> list[dict[str, str]]:
    with open(Path(fleet_dir) / "devices.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    bad = {"dev*glob", "bad-smoker", "unknown-set"}
    return [
        r
        for r in rows
        if not any(
            r["client_id"].startswith(b.replace("*", "")) or r["client_id"].startswith(b)
            for b in bad
        )
    ]


def test_bundles_equal_the_cli_and_the_independent_policy(
    compiled_valid: Compiled, keys: Keys
) -> None:
    compiled = compiled_valid
    bundles = sorted((compiled.out / "bundles").glob("*.cbor"))
    assert [b.stem for b in bundles] == [f"gw-{i:05d}" for i in range(compiled.fleet.gateways)]
    devices = _valid_devices(compiled.fleet.directory)
    with open(Path(compiled.fleet.directory) / "acl.csv", newline="") as fh:
        acl = list(csv.DictReader(fh))
    for path in bundles:
        gw = path.stem
        data = path.read_bytes()
        # 1. the single-machine CLI on the emitted policy file makes the same bytes
        cli_out = path.with_suffix(".cli")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "edge_broker",
                "bundle",
                "create",
                "--key",
                str(keys.key_path),
                "--version",
                "1",
                "--gateway",
                gw,
                "--policy",
                str(compiled.out / "policies" / f"{gw}.json"),
                "--issued-at",
                str(ISSUED_AT),
                "-o",
                str(cli_out),
            ],
            check=True,
            capture_output=True,
        )
        assert cli_out.read_bytes() == data
        # 2. it verifies with the cloud's public key, for this gateway
        bundle = verify_bundle(data, [keys.key.verify_key])
        assert bundle.gateway == gw and bundle.version == 1 and bundle.issued_at == ISSUED_AT
        # 3. its policy is the one built from the fleet tables without Spark
        mine = [d for d in devices if d["gateway"] == gw]
        assert mine
        rows = {name: [{k: v for k, v in r.items()} for r in rules] for name, rules in SETS.items()}
        acl_rows = [{k: (v or None) for k, v in r.items()} for r in acl]
        expected = gateway_policy(mine, rows, acl_rows, "allow")
        assert (
            create_bundle(keys.key, version=1, gateway=gw, issued_at=ISSUED_AT, policy=expected)
            == data
        )
        assert cbor2.loads(cbor2.loads(data)["body"])["policy"] == expected


def test_bad_input_files_name_file_and_column(spark: object, keys: Keys, tmp_path: Path) -> None:
    from edge_broker.pipeline.spark import PipelineError

    (tmp_path / "gateways.csv").write_text("gateway,version\ngw-1,1\ngw-2,two\n")
    (tmp_path / "devices.csv").write_text("gateway,client\ngw-1,c1\n")
    try:
        run_compile(spark, str(tmp_path), str(tmp_path / "out"), key=keys.key, issued_at=ISSUED_AT)
    except PipelineError as exc:
        text = str(exc)
    else:
        raise AssertionError("a devices table without client_id/sets was accepted")
    assert "devices.csv" in text and "client_id" in text and "sets" in text


def _operator_fleet(directory: Path) -> None:
    """gw-a's operator set has a typo'd deny row before its allow-all; gw-b uses a valid set."""
    directory.mkdir()
    (directory / "gateways.csv").write_text("gateway,version\ngw-a,3\ngw-b,3\n")
    (directory / "devices.csv").write_text(
        "gateway,client_id,sets\ngw-a,ops-1,operator\ngw-b,sensor-1,sensor\n"
    )
    (directory / "permissions.csv").write_text(
        "set,seq,id,topic,type\noperator,0,no-admin,admin/#,DENNY\noperator,1,all,#,\nsensor,0,own,sensors/#,\n"
    )


def test_a_set_that_lost_a_row_is_never_compiled(spark: object, keys: Keys, tmp_path: Path) -> None:
    from edge_broker.pipeline.spark import PipelineError

    _operator_fleet(tmp_path / "in")
    try:
        run_compile(
            spark, str(tmp_path / "in"), str(tmp_path / "strict"), key=keys.key, issued_at=ISSUED_AT
        )
    except PipelineError as exc:
        assert (
            "1 invalid row(s)" in str(exc)
            and "DENNY" in str(exc)
            and "nothing was signed" in str(exc)
        )
    else:
        raise AssertionError("an invalid rule row was accepted")
    assert not list((tmp_path / "strict" / "bundles").glob("*"))  # nothing signed at all
    # asking for the valid sets only: gw-a (whose operator set lost its deny row) gets no bundle
    result = run_compile(
        spark,
        str(tmp_path / "in"),
        str(tmp_path / "skip"),
        key=keys.key,
        issued_at=ISSUED_AT,
        skip_invalid=True,
    )
    assert (result.bundles, result.withheld, result.invalid) == (1, 1, 1)
    assert sorted(p.name for p in (tmp_path / "skip" / "bundles").iterdir()) == ["gw-b.cbor"]
    withheld = [
        json.loads(line) for line in (tmp_path / "skip" / "withheld.jsonl").read_text().splitlines()
    ]
    assert withheld == [
        {"gateway": "gw-a", "reason": "uses permission set(s) operator with invalid rows"}
    ]
    policy = verify_bundle(
        (tmp_path / "skip" / "bundles" / "gw-b.cbor").read_bytes(), [keys.key.verify_key]
    ).policy
    assert set(policy["permissions"]["sets"]) == {"sensor"}


def test_the_signing_key_is_never_shipped_to_the_executors(
    spark: object, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every function the compile job hands to Spark (pandas UDFs, grouped/cogrouped map
    functions) is pickled as Spark pickles it: the key's secret bytes must not be in there."""
    from pyspark import cloudpickle
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.group_ops import PandasCogroupedOps, PandasGroupedOpsMixin

    shipped: list[object] = []

    def spy(owner: object, name: str, index: int) -> None:
        original = getattr(owner, name)

        def wrapper(*args: object, **kwargs: object) -> object:
            shipped.append(args[index])
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    spy(F, "pandas_udf", 0)
    spy(PandasGroupedOpsMixin, "applyInPandas", 1)
    spy(PandasCogroupedOps, "applyInPandas", 1)
    spy(DataFrame, "mapInPandas", 1)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "gateways.csv").write_text("gateway,version\ngw-a,1\n")
    (tmp_path / "in" / "devices.csv").write_text("gateway,client_id,sets\ngw-a,c1,s\n")
    (tmp_path / "in" / "permissions.csv").write_text("set,topic\ns,a/#\n")
    (tmp_path / "in" / "acl.csv").write_text(
        "id,permission,messages,key_exprs,interfaces\nr1,deny,put,x/**,wlan0\n"
    )
    out = tmp_path / "out"
    result = run_compile(
        spark, str(tmp_path / "in"), str(out), key=keys.key, issued_at=ISSUED_AT, emit_policies=True
    )
    assert result.bundles == 1
    assert any(getattr(f, "__name__", "") == "build" for f in shipped), (
        shipped
    )  # the bundle assembly was seen
    secret = bytes(keys.key)
    for func in shipped:
        blob = cloudpickle.dumps(func)
        assert secret not in blob and secret.hex().encode() not in blob, func
    # the driver-signed bundle is still exactly what `edge-broker bundle create` makes
    policy = json.loads((out / "policies" / "gw-a.json").read_text())
    assert (out / "bundles" / "gw-a.cbor").read_bytes() == create_bundle(
        keys.key, version=1, gateway="gw-a", issued_at=ISSUED_AT, policy=policy
    )


def test_header_only_devices_table_warns(
    spark: object, keys: Keys, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gateways.csv").write_text("gateway,version\ngw-a,1\n")
    (tmp_path / "devices.csv").write_text("gateway,client_id,sets\n")
    result = run_compile(
        spark, str(tmp_path), str(tmp_path / "out"), key=keys.key, issued_at=ISSUED_AT
    )
    assert result.bundles == 1
    assert (
        "devices.csv has no valid device rows: every bundle would deny every client"
        in capsys.readouterr().err
    )


def test_grants_per_tenant_in_row_order_and_none_for_a_tenant_with_an_invalid_row(
    spark: object, keys: Keys, tmp_path: Path
) -> None:
    """``grants/<tenant>.json`` lists each tenant's valid grant rows in table order (not sorted);
    a tenant with an invalid grant row gets no grants file, the others still do."""
    directory = tmp_path / "in"
    directory.mkdir()
    (directory / "gateways.csv").write_text("gateway,version\ngw-a,3\n")
    (directory / "devices.csv").write_text("gateway,client_id,sets\ngw-a,s-1,sensor\n")
    (directory / "permissions.csv").write_text("set,seq,id,topic\nsensor,0,own,sensors/#\n")
    (directory / "grants.csv").write_text(
        "tenant,direction,rule\nt1,pub,z/1\nt2,pub,x/y\nt1,sub,b/#\nt1,pub,a/1\nt2,both,x/z\n"
    )
    result = run_compile(
        spark,
        str(directory),
        str(tmp_path / "out"),
        key=keys.key,
        issued_at=ISSUED_AT,
        skip_invalid=True,
    )
    assert (result.bundles, result.invalid) == (1, 1)
    assert sorted(p.name for p in (tmp_path / "out" / "grants").iterdir()) == ["t1.json"]
    assert json.loads((tmp_path / "out" / "grants" / "t1.json").read_text()) == {
        "tenant_ids": ["t1"],
        "allow_channels_pub": ["z/1", "a/1"],
        "allow_channels_sub": ["b/#"],
    }
    assert [(r["row"], r["key"]) for r in _report(tmp_path / "out")] == [(5, "direction")]


def test_compile_plans_each_action_once_and_restores_adaptive_execution(
    spark: Any, keys: Keys, tmp_path: Path
) -> None:
    """compile runs its few actions as planned queries: with adaptive execution on, every
    shuffle of its union of checks was a Spark job of its own, re-planned on the driver after
    each (about 60 jobs for this small fleet, the cores idle between them; 76 for a
    1,000-gateway one). The session's setting is the caller's again afterwards."""
    from edge_broker.pipeline.fleet import make_fleet

    fleet = make_fleet(
        str(tmp_path / "in"), gateways=4, devices_per_gateway=6, tenants=2, audit_records=0, seed=7
    )
    before = spark.conf.get("spark.sql.adaptive.enabled")
    group = f"compile-{tmp_path.name}"
    spark.sparkContext.setJobGroup(group, "compile")
    try:
        result = run_compile(
            spark, fleet.directory, str(tmp_path / "out"), key=keys.key, issued_at=ISSUED_AT
        )
        jobs = len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert result.bundles == 4
    assert jobs <= 16, jobs
    assert spark.conf.get("spark.sql.adaptive.enabled") == before == "true"


def test_the_invalid_count_and_the_bundle_build_run_at_the_same_time(spark: Any) -> None:
    """compile counts the invalid rows and builds the bundle bodies at the same time: the
    second action runs while the first does (the first here only returns once the second has
    started); the build is cancelled, not awaited, when the count fails the job, and an error
    of the build is raised in the caller's thread."""
    import threading
    import time

    from edge_broker.pipeline.compile import _at_the_same_time

    started = threading.Event()

    def second() -> int:
        started.set()
        return 2

    assert _at_the_same_time(
        spark, lambda: started.wait(20), second, cancel_second=lambda first: False
    ) == (True, 2)

    def slow(_: Any) -> Any:
        import time as t

        t.sleep(60)
        return _

    began = time.monotonic()
    got = _at_the_same_time(
        spark,
        lambda: 1,
        lambda: spark.sparkContext.parallelize(range(2), 2).map(slow).collect(),
        cancel_second=lambda first: first == 1,
    )
    assert got == (1, None) and time.monotonic() - began < 45

    def broken() -> None:
        raise ValueError("the build failed")

    with pytest.raises(ValueError, match="the build failed"):
        _at_the_same_time(spark, lambda: 1, broken, cancel_second=lambda first: False)
