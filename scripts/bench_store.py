#!/usr/bin/env python3
"""Benchmark of edge_broker.store: append rate per durability policy, open (recovery) time,
compaction time, TinyDB query time.

    .venv/bin/python scripts/bench_store.py [--dir DIR] [--records 10000,100000] [--appends 3000]

Run it on the gateway's real storage (``--dir /var/lib/edge-broker``): on tmpfs fsync costs
nothing and the "always" figures mean little. Records are claim-sized (about 250 bytes).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from tinydb import Query, TinyDB

from edge_broker.store import KeyedLog, LogStorage


def claim(i: int) -> dict[str, object]:
    owner = f"{i:052d}"[-52:]
    return {
        "topicName": f"restricted/{owner}/sensor/{i}",
        "owner": owner,
        "pub": ["*"],
        "sub": [f"{(i * 7) % 1000:052d}"],
        "signature": "s" * 88,
    }


def filesystem_of(directory: Path) -> str:
    result = subprocess.run(
        ["stat", "-f", "-c", "%T", str(directory)], capture_output=True, text=True, check=False
    )
    return result.stdout.strip() or "unknown"


async def async_appends(path: Path, policy: str, count: int, writers: int) -> tuple[float, int]:
    keyed = KeyedLog.open(str(path), fsync=policy, compact_min_bytes=1 << 40)
    table = keyed.table("claims")
    per_writer = count // writers

    async def writer(w: int) -> None:
        for n in range(per_writer):
            i = w * per_writer + n
            await table.put(i, claim(i))

    start = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    elapsed = time.perf_counter() - start
    fsyncs = keyed.stats().fsyncs
    await keyed.aclose()
    return per_writer * writers / elapsed, fsyncs


def sync_appends(path: Path, policy: str, count: int) -> tuple[float, int]:
    keyed = KeyedLog.open(str(path), fsync=policy, compact_min_bytes=1 << 40)
    table = keyed.table("claims")
    start = time.perf_counter()
    for i in range(count):
        table.put_sync(i, claim(i))
    elapsed = time.perf_counter() - start
    fsyncs = keyed.stats().fsyncs
    keyed.close()
    return count / elapsed, fsyncs


def build(path: Path, records: int, encoded: bool = False, offset: int = 0) -> None:
    keyed = KeyedLog.open(
        str(path), fsync="never", compact_min_bytes=1 << 40, encoded_values=encoded
    )
    table = keyed.table("claims")
    for i in range(records):
        table.put_sync(i, claim(i + offset))
    keyed.close()


def bench_appends(directory: Path, count: int) -> None:
    print(f"\nappends of claim-sized records ({count} per run; 'always' sync runs 1000)")
    print(f"{'policy':<10} {'mode':<22} {'appends/s':>10} {'fsyncs':>8}")
    for policy in ("always", "50ms", "never"):
        for writers in (1, 64):
            path = directory / f"append-{policy}-{writers}.log"
            rate, fsyncs = asyncio.run(async_appends(path, policy, count, writers))
            print(f"{policy:<10} {f'async, {writers} writers':<22} {rate:>10.0f} {fsyncs:>8}")
            path.unlink()
        path = directory / f"append-{policy}-sync.log"
        n = count if policy != "always" else min(count, 1000)
        rate, fsyncs = sync_appends(path, policy, n)
        print(f"{policy:<10} {'sync, sequential':<22} {rate:>10.0f} {fsyncs:>8}")
        path.unlink()


def bench_open_and_compact(directory: Path, sizes: list[int]) -> None:
    print(
        f"\n{'records':>8} {'values':>8} {'file MB':>8} {'open s':>7} {'open cpu s':>10} "
        f"{'index MB':>9} {'compact s':>10}"
    )
    for records in sizes:
        for encoded in (False, True):
            path = directory / f"open-{records}.log"
            build(path, records, encoded)
            start, cpu = time.perf_counter(), time.process_time()
            keyed = KeyedLog.open(str(path), fsync="always", encoded_values=encoded)
            opened, opened_cpu = time.perf_counter() - start, time.process_time() - cpu
            size = path.stat().st_size
            assert keyed.report.records == records, keyed.report
            keyed.close()
            index = index_megabytes(path, encoded)
            build(path, records, encoded, offset=1)  # overwrite every record: half is dead
            keyed = KeyedLog.open(str(path), compact_min_bytes=1 << 40, encoded_values=encoded)
            start = time.perf_counter()
            keyed.compact()
            compacted = time.perf_counter() - start
            keyed.close()
            kind = "encoded" if encoded else "decoded"
            print(
                f"{records:>8} {kind:>8} {size / 1e6:>8.1f} {opened:>7.3f} {opened_cpu:>10.3f} "
                f"{index:>9.0f} {compacted:>10.3f}"
            )
            path.unlink()


def index_megabytes(path: Path, encoded: bool) -> float:
    """Memory held by an open log's index (a separate, untimed open under tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    keyed = KeyedLog.open(str(path), fsync="never", readonly=True, encoded_values=encoded)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    keyed.close()
    return held / 1e6


async def latency_during_compaction(path: Path, freeze: bool) -> tuple[float, float, float, int]:
    keyed = KeyedLog.open(str(path), fsync="always", compact_min_bytes=1 << 20)
    if freeze:
        gc.freeze()  # what a broker should do once its stores are loaded (see the report)
    table = keyed.table("claims")
    latencies: list[float] = []
    start = time.perf_counter()

    async def writer(w: int) -> None:
        n = 0
        while (keyed.stats().compactions == 0 and n < 100_000) or n < 20:
            began = time.perf_counter()
            await table.put(f"w{w}-{n}", claim(n))
            latencies.append(time.perf_counter() - began)
            n += 1

    await asyncio.gather(*(writer(w) for w in range(16)))
    elapsed = time.perf_counter() - start
    await keyed.aclose()
    gc.unfreeze()
    latencies.sort()
    p99 = latencies[int(len(latencies) * 0.99)]
    return elapsed, p99, latencies[-1], len(latencies)


def bench_latency_during_compaction(directory: Path, records: int) -> None:
    print(f"\nappends (fsync always, 16 writers) while {records} live records compact:")
    for freeze in (False, True):
        path = directory / "latency.log"
        build(path, records)
        build(path, records, offset=1)  # two thirds of the file are dead: the first append
        build(path, records, offset=2)  # after the open starts a compaction
        elapsed, p99, worst, count = asyncio.run(latency_during_compaction(path, freeze))
        how = "gc.freeze() after open" if freeze else "default gc"
        print(
            f"  {how:<24} {count} appends in {elapsed:.2f} s, p99 {p99 * 1000:.1f} ms, "
            f"max {worst * 1000:.1f} ms"
        )
        path.unlink()


def bench_tinydb(directory: Path, records: int) -> None:
    path = directory / "tinydb.log"
    db = TinyDB(str(path), storage=LogStorage, fsync="never")
    start = time.perf_counter()
    db.insert_multiple(claim(i) for i in range(records))
    inserted = time.perf_counter() - start
    start = time.perf_counter()
    hits = db.search(Query().owner == claim(records // 2)["owner"])
    searched = time.perf_counter() - start
    start = time.perf_counter()
    db.update({"pub": []}, Query().owner == claim(7)["owner"])
    updated = time.perf_counter() - start
    db.close()
    assert len(hits) == 1
    print(
        f"\nTinyDB on the log, {records} claims: insert_multiple {inserted:.3f} s, "
        f"one query {searched * 1000:.1f} ms, one update {updated * 1000:.1f} ms"
    )
    path.unlink()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=None, help="directory on the storage to test")
    parser.add_argument("--records", default="10000,100000", help="sizes for open/compaction")
    parser.add_argument("--appends", type=int, default=3000, help="appends per append run")
    args = parser.parse_args()
    base = args.dir or Path.cwd()
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=base) as name:
        directory = Path(name)
        print(
            f"python {sys.version.split()[0]}, {os.uname().machine}, directory {directory} "
            f"({filesystem_of(directory)})"
        )
        bench_appends(directory, args.appends)
        bench_open_and_compact(directory, [int(n) for n in args.records.split(",")])
        bench_latency_during_compaction(directory, max(int(n) for n in args.records.split(",")))
        bench_tinydb(directory, 10_000)


if __name__ == "__main__":
    main()
