#!/usr/bin/env python3
"""Benchmark the Spark pipeline as users run it: the ``edge-broker-pipeline`` CLI in a fresh
process per job (JVM start-up included, the session defaults, no hand-set partitions), at three
sizes, with the slope per device (compile) and per record (audit) between sizes.

    .venv/bin/python scripts/bench_pipeline.py   # 20k/40k/80k devices, 200k/400k/800k records
    .venv/bin/python scripts/bench_pipeline.py --devices 1000000 --gateways 10000 \\
        --records 10000000 --fractions 0.1,0.5,1

Per size: generate the fleet (scripts/make-fleet's generator; not timed as pipeline), then
``compile`` and ``audit`` through the CLI. Spark's event log (``--conf spark.eventLog.*``, a
temporary folder) gives the task time of each run: ``busy`` = task time / (wall time x cores)
is how much of the machine's cores the job kept busy (1.0 = every core all the time; JVM start-up
and driver-only steps count as idle); ``core_s`` is the task time per core (how long at least
1, 2, ... tasks ran at once): a job that keeps one core busy has a large first entry only.
The slope between two sizes (seconds per 1,000 devices or per 100,000 records) isolates the
per-item cost from the fixed start-up cost; a linear job has equal slopes. Prints one JSON line
per size and a table; --json appends the lines to a file.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import nacl.signing  # noqa: E402

from edge_broker.keys import write_signing_key  # noqa: E402
from edge_broker.pipeline.fleet import make_fleet  # noqa: E402


def _cores(master: str) -> int:
    inner = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    return os.cpu_count() or 1 if inner == "*" else int(inner)


def _run(
    args: list[str], master: str, events: Path, code: Path = ROOT
) -> tuple[float, list[tuple[int, int]], int]:
    """(wall seconds, [(task launch ms, task finish ms)], Spark jobs) of one CLI run of the
    edge_broker package in ``code`` (this checkout by default)."""
    events.mkdir(parents=True, exist_ok=True)
    before = set(events.iterdir())
    cmd = [
        sys.executable,
        "-m",
        "edge_broker.pipeline",
        "--master",
        master,
        "--conf",
        "spark.eventLog.enabled=true",
        "--conf",
        "spark.eventLog.compress=false",
        "--conf",
        f"spark.eventLog.dir={events.as_uri()}",
        "--conf",
        "spark.ui.showConsoleProgress=false",
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(code)}
    t = time.monotonic()
    # run in ``code``: ``python -m`` puts the working directory first on sys.path, before
    # PYTHONPATH (from another checkout, that checkout's package would run)
    done = subprocess.run(cmd, env=env, cwd=code, capture_output=True, text=True)
    wall = time.monotonic() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:1])} failed ({done.returncode}): {done.stderr[-2000:]}")
    tasks: list[tuple[int, int]] = []
    jobs = 0
    for entry in set(events.iterdir()) - before:
        for log in (
            sorted(entry.iterdir()) if entry.is_dir() else [entry]
        ):  # Spark 4: a folder of event files
            found, started = _tasks(log)
            tasks += found
            jobs += started
    return wall, tasks, jobs


def _tasks(log: Path) -> tuple[list[tuple[int, int]], int]:
    """([(launch ms, finish ms)] of every task, how many Spark jobs started) in one log."""
    found: list[tuple[int, int]] = []
    jobs = 0
    if log.name.startswith(("appstatus", ".")):  # status marker, Hadoop's .crc files
        return found, jobs
    with open(log, encoding="utf-8") as fh:
        for line in fh:
            if '"SparkListenerTaskEnd"' in line:
                info = json.loads(line)["Task Info"]
                found.append((info["Launch Time"], info["Finish Time"]))
            elif '"SparkListenerJobStart"' in line:
                jobs += 1
    return found, jobs


def per_core(tasks: list[tuple[int, int]], cores: int) -> list[float]:
    """Task time per core, in seconds: entry k is how long at least k+1 tasks ran at once
    (core 1 is busy whenever any task runs, core 2 when two do, ...). Their sum is the total
    task time unless more than ``cores`` tasks overlapped (tasks of concurrent stages sharing
    the cores: that extra time is not a core's and is left out)."""
    edges = sorted([(a, 1) for a, _ in tasks] + [(b, -1) for _, b in tasks])
    busy = [0.0] * cores
    running, last = 0, None
    for at, step in edges:
        if last is not None:
            for k in range(min(running, cores)):
                busy[k] += (at - last) / 1000
        running += step
        last = at
    return [round(b, 1) for b in busy]


def _figures(
    job: str, wall: float, tasks: list[tuple[int, int]], jobs: int, cores: int, load_before: float
) -> dict[str, Any]:
    """One job's columns: wall seconds, busy, task seconds per core, and the machine's 1-minute
    load average before and after the run (other processes on a shared machine inflate the
    wall time; a figure taken under a load above the core count says so)."""
    return {
        f"{job}_s": round(wall, 1),
        f"{job}_busy": round(sum(b - a for a, b in tasks) / 1000 / (wall * cores), 2),
        f"{job}_core_s": per_core(tasks, cores),
        f"{job}_load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        f"{job}_jobs": jobs,
    }


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--devices", type=int, default=80_000)
    p.add_argument("--gateways", type=int, default=800)
    p.add_argument("--records", type=int, default=800_000)
    p.add_argument("--fractions", default="0.25,0.5,1.0")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--format", choices=("csv", "json", "parquet"), default="csv")
    p.add_argument(
        "--workdir", help="keep inputs and outputs here (default: a temporary directory, removed)"
    )
    p.add_argument("--json", help="append the result lines to this file")
    p.add_argument(
        "--code",
        default=str(ROOT),
        help="comma-separated checkouts whose edge_broker runs the jobs (default: this one); "
        "with several, each size runs each checkout in turn, so a before/after comparison "
        "sees the same inputs and, as far as possible, the same load (e.g. --code "
        "/tmp/main,. with /tmp/main from git archive)",
    )
    p.add_argument(
        "--jobs",
        default="compile,audit",
        help="which jobs to run per size (comma-separated: compile, audit)",
    )
    a = p.parse_args()
    work = Path(a.workdir or tempfile.mkdtemp(prefix="bench-pipeline-")).resolve()
    key_path = work / "cloud.key"
    work.mkdir(parents=True, exist_ok=True)
    if not key_path.exists():  # a kept --workdir is reused with its key
        write_signing_key(str(key_path), nacl.signing.SigningKey(bytes(32)))
    cores = _cores(a.master)
    jobs = {j.strip() for j in a.jobs.split(",") if j.strip()}
    if not jobs or jobs - {"compile", "audit"}:
        p.error(f"--jobs {a.jobs!r}: name compile and/or audit")
    codes = [Path(c.strip()).resolve() for c in a.code.split(",") if c.strip()]
    for code in codes:
        if not (code / "edge_broker" / "pipeline").is_dir():
            p.error(f"--code {code}: no edge_broker/pipeline package there")
    rows: list[dict[str, Any]] = []
    try:
        for fraction in (float(f) for f in a.fractions.split(",")):
            gateways = max(1, round(a.gateways * fraction))
            per_gw = max(1, a.devices // a.gateways)
            records = round(a.records * fraction)
            d = work / f"f{fraction}"
            t = time.monotonic()
            fleet = make_fleet(
                str(d / "in"),
                gateways=gateways,
                devices_per_gateway=per_gw,
                tenants=max(1, gateways // 20),
                audit_records=records,
                fmt=a.format,
                seed=1,
            )
            generate = time.monotonic() - t
            for code in codes:
                row: dict[str, Any] = {
                    "fraction": fraction,
                    "master": a.master,
                    "code": str(code),
                    "gateways": gateways,
                    "devices": fleet.devices,
                    "records": fleet.audit_records,
                    "generate_s": round(generate, 1),
                }
                if "compile" in jobs:
                    load = os.getloadavg()[0]
                    wall, tasks, started = _run(
                        [
                            "compile",
                            "--input",
                            fleet.directory,
                            "--key",
                            str(key_path),
                            "-o",
                            str(d / "out"),
                            "--issued-at",
                            "1790000000",
                        ],
                        a.master,
                        work / "events",
                        code,
                    )
                    row.update(_figures("compile", wall, tasks, started, cores, load))
                if "audit" in jobs:
                    load = os.getloadavg()[0]
                    wall, tasks, started = _run(
                        ["audit", str(Path(fleet.directory) / "audit"), "-o", str(d / "report")],
                        a.master,
                        work / "events",
                        code,
                    )
                    row.update(_figures("audit", wall, tasks, started, cores, load))
                earlier = [r for r in rows if r["code"] == str(code)]
                if earlier:
                    prev = earlier[-1]
                    if "compile" in jobs:
                        row["compile_s_per_1k_devices"] = round(
                            (row["compile_s"] - prev["compile_s"])
                            / ((row["devices"] - prev["devices"]) / 1000),
                            3,
                        )
                    if "audit" in jobs:
                        row["audit_s_per_100k_records"] = round(
                            (row["audit_s"] - prev["audit_s"])
                            / ((row["records"] - prev["records"]) / 100_000),
                            3,
                        )
                rows.append(row)
                print(json.dumps(row), flush=True)
                if a.json:
                    with open(a.json, "a") as fh:
                        fh.write(json.dumps(row) + "\n")
            if not a.workdir:
                shutil.rmtree(d, ignore_errors=True)
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    if len(codes) > 1:
        print("code: " + ", ".join(f"{i} = {c}" for i, c in enumerate(codes)))
    print(
        f"{'code':>4} {'devices':>9} {'gateways':>8} {'records':>9} {'compile s':>9} "
        f"{'busy':>5} {'s/1k dev':>8} {'task s per core':>16} {'load':>9} {'jobs':>4} "
        f"{'audit s':>8} {'busy':>5} "
        f"{'s/100k rec':>10} {'task s per core':>16} {'load':>9}"
    )

    def cell(r: dict[str, Any], key: str) -> str:
        value = r.get(key, "-")
        return "/".join(map(str, value)) if isinstance(value, list) else str(value)

    for r in rows:
        print(
            f"{[str(c) for c in codes].index(r['code']):>4} {r['devices']:>9} "
            f"{r['gateways']:>8} {r['records']:>9} {cell(r, 'compile_s'):>9} "
            f"{cell(r, 'compile_busy'):>5} {cell(r, 'compile_s_per_1k_devices'):>8} "
            f"{cell(r, 'compile_core_s'):>16} {cell(r, 'compile_load'):>9} "
            f"{cell(r, 'compile_jobs'):>4} "
            f"{cell(r, 'audit_s'):>8} {cell(r, 'audit_busy'):>5} "
            f"{cell(r, 'audit_s_per_100k_records'):>10} {cell(r, 'audit_core_s'):>16} "
            f"{cell(r, 'audit_load'):>9}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
