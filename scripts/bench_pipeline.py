#!/usr/bin/env python3
"""Benchmark the Spark pipeline: compile for N devices / G gateways and audit R records, at
several fractions of the full size, on one Spark session (JVM start-up excluded; reported once).

    .venv/bin/python scripts/bench_pipeline.py                      # 1M devices, 10k gateways, 10M records
    .venv/bin/python scripts/bench_pipeline.py --fractions 0.01,0.05,0.1 --master 'local[2]'

Per fraction: the time to generate the fleet (scripts/make-fleet's generator; not the pipeline),
the compile job (read, validate every row with the broker's parsers, assemble, check and sign one
bundle per gateway, write them), and the audit job (read, seven analyses to Parquet, HTML
report). Prints one JSON line per fraction and a table; --json appends the lines to a file.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nacl.signing  # noqa: E402

from edge_broker.pipeline.audit import run_audit  # noqa: E402
from edge_broker.pipeline.compile import run_compile  # noqa: E402
from edge_broker.pipeline.fleet import make_fleet  # noqa: E402
from edge_broker.pipeline.session import get_session  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", type=int, default=1_000_000)
    p.add_argument("--gateways", type=int, default=10_000)
    p.add_argument("--records", type=int, default=10_000_000)
    p.add_argument("--fractions", default="0.1,0.5,1.0")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--format", choices=("csv", "json", "parquet"), default="csv")
    p.add_argument("--workdir", help="keep inputs and outputs here (default: a temporary directory, removed)")
    p.add_argument("--json", help="append the result lines to this file")
    a = p.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-pipeline-"))
    started = time.monotonic()
    spark = get_session(a.master, {"spark.sql.shuffle.partitions": "8", "spark.ui.showConsoleProgress": "false",
                                   "spark.driver.memory": "2g"})
    spark.sparkContext.setLogLevel("ERROR")
    print(f"spark session ({a.master}) up in {time.monotonic() - started:.1f} s", file=sys.stderr)
    key = nacl.signing.SigningKey(bytes(32))
    rows = []
    try:
        for fraction in (float(f) for f in a.fractions.split(",")):
            gateways = max(1, round(a.gateways * fraction))
            per_gw = max(1, a.devices // a.gateways)
            records = round(a.records * fraction)
            d = work / f"f{fraction}"
            t = time.monotonic()
            fleet = make_fleet(str(d / "in"), gateways=gateways, devices_per_gateway=per_gw, tenants=max(1, gateways // 20),
                               audit_records=records, fmt=a.format, seed=1)
            generate = time.monotonic() - t
            t = time.monotonic()
            result = run_compile(spark, fleet.directory, str(d / "out"), key=key, issued_at=1_790_000_000)
            compile_s = time.monotonic() - t
            t = time.monotonic()
            audit = run_audit(spark, [str(Path(fleet.directory) / "audit")], str(d / "audit"))
            audit_s = time.monotonic() - t
            row = {"fraction": fraction, "master": a.master, "gateways": result.bundles, "devices": fleet.devices,
                   "records": audit.records, "generate_s": round(generate, 1), "compile_s": round(compile_s, 1),
                   "audit_s": round(audit_s, 1), "devices_per_s": round(fleet.devices / compile_s),
                   "records_per_s": round(audit.records / audit_s)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if a.json:
                with open(a.json, "a") as fh:
                    fh.write(json.dumps(row) + "\n")
            if not a.workdir:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        spark.stop()
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{'fraction':>8} {'gateways':>9} {'devices':>9} {'records':>10} {'compile s':>10} {'audit s':>8} "
          f"{'dev/s':>8} {'rec/s':>8}")
    for r in rows:
        print(f"{r['fraction']:>8} {r['gateways']:>9} {r['devices']:>9} {r['records']:>10} {r['compile_s']:>10} "
              f"{r['audit_s']:>8} {r['devices_per_s']:>8} {r['records_per_s']:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
