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

import cbor2

from edge_broker.pipeline.compile import run_compile
from edge_broker.pipeline.fleet import INVALID_KINDS, SETS
from edge_broker.pipeline.policy import gateway_policy
from edge_broker.sync.bundle import create_bundle, verify_bundle
from tests.pipeline.conftest import ISSUED_AT, Compiled, Keys


def _report(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "invalid.jsonl").read_text().splitlines()]


def test_every_invalid_row_is_reported_with_its_reason(compiled: Compiled) -> None:
    report = _report(compiled.out)
    found = {(r["table"], r["row"]) for r in report}
    assert found == set(compiled.fleet.invalid), (found, compiled.fleet.invalid)
    assert len(report) == len(INVALID_KINDS)
    for r in report:
        assert r["reason"] and str(r["file"]).endswith(f"{r['table']}.csv")
    assert f"{len(INVALID_KINDS)} invalid row(s)" in compiled.error and "--skip-invalid" in compiled.error


def _valid_devices(fleet_dir: str) -> list[dict[str, str]]:
    with open(Path(fleet_dir) / "devices.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    bad = {"dev*glob", "bad-smoker", "unknown-set"}
    return [r for r in rows if not any(r["client_id"].startswith(b.replace("*", "")) or r["client_id"].startswith(b)
                                       for b in bad)]


def test_bundles_equal_the_cli_and_the_independent_policy(compiled: Compiled, keys: Keys) -> None:
    bundles = sorted((compiled.out / "bundles").glob("*.cbor"))
    assert [b.stem for b in bundles] == [f"gw-{i:05d}" for i in range(compiled.fleet.gateways)]
    devices = _valid_devices(compiled.fleet.directory)
    acl = [json.loads(json.dumps(r)) for r in csv.DictReader(open(Path(compiled.fleet.directory) / "acl.csv"))][:2]
    for path in bundles:
        gw = path.stem
        data = path.read_bytes()
        # 1. the single-machine CLI on the emitted policy file makes the same bytes
        cli_out = path.with_suffix(".cli")
        subprocess.run(
            [sys.executable, "-m", "edge_broker", "bundle", "create", "--key", str(keys.key_path), "--version", "1",
             "--gateway", gw, "--policy", str(compiled.out / "policies" / f"{gw}.json"),
             "--issued-at", str(ISSUED_AT), "-o", str(cli_out)], check=True, capture_output=True)
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
        assert create_bundle(keys.key, version=1, gateway=gw, issued_at=ISSUED_AT, policy=expected) == data
        assert cbor2.loads(cbor2.loads(data)["body"])["policy"] == expected


def test_bad_input_files_name_file_and_column(spark: object, keys: Keys, tmp_path: Path) -> None:
    from edge_broker.pipeline.session import PipelineError

    (tmp_path / "gateways.csv").write_text("gateway,version\ngw-1,1\ngw-2,two\n")
    (tmp_path / "devices.csv").write_text("gateway,client\ngw-1,c1\n")
    try:
        run_compile(spark, str(tmp_path), str(tmp_path / "out"), key=keys.key, issued_at=ISSUED_AT)
    except PipelineError as exc:
        text = str(exc)
    else:
        raise AssertionError("a devices table without client_id/sets was accepted")
    assert "devices.csv" in text and "client_id" in text and "sets" in text
