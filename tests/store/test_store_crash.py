"""Crash tests with real processes: SIGKILL while appending or compacting.

A killed process keeps what it wrote in the kernel's page cache, so these tests prove the
logic (acknowledge only after the write and fsync returned; compaction by rename) rather than
the disk's honesty; the power-loss tests in test_recovery.py cover torn and damaged files.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from edge_broker.store import KeyedLog

APPENDER = textwrap.dedent(
    """
    import asyncio, sys
    from edge_broker.store import KeyedLog

    async def main(path, encoded):
        keyed = KeyedLog.open(
            path, fsync="always", compact_min_bytes=8_000, compact_ratio=0.3,
            encoded_values=encoded == "encoded",
        )
        table = keyed.table("claims")

        async def writer(w):
            n = 0
            while True:
                key = f"w{w}-{n}"
                await table.put(key, {"owner": key, "pad": "x" * (n % 40)})
                sys.stdout.write(f"put {key}\\n")
                # Overwrites make dead bytes, so compactions run under load too.
                await table.put(f"hot-{w}", {"n": n, "pad": "h" * 150})
                sys.stdout.write(f"hot hot-{w} {n}\\n")
                if w == 0 and n % 5 == 0:
                    sys.stdout.write(f"compactions {keyed.stats().compactions}\\n")
                sys.stdout.flush()
                n += 1

        print("ready", flush=True)
        await asyncio.gather(*(writer(w) for w in range(16)))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def _kill_after(proc: subprocess.Popen[bytes], seconds: float) -> list[str]:
    """Read acknowledgements until ``seconds`` passed, SIGKILL, return the complete lines."""
    assert proc.stdout is not None  # unbuffered (bufsize=0): no bytes hide in a Python buffer
    assert proc.stdout.readline().strip() == b"ready"
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    buffer = bytearray()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            buffer += os.read(fd, 1 << 16)
        except BlockingIOError:
            time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    os.set_blocking(fd, True)
    while chunk := os.read(fd, 1 << 16):
        buffer += chunk
    *complete, _partial = buffer.decode().split("\n")
    return complete


@pytest.mark.parametrize("seed", range(4))
def test_every_acknowledged_append_survives_sigkill(tmp_path: Path, seed: int) -> None:
    # Each round picks encoded or decoded values at random: one file then holds both kinds.
    kill_rounds(tmp_path / "claims.log", random.Random(seed), rounds=3)


@pytest.mark.soak
def test_sigkill_soak(tmp_path: Path) -> None:
    kill_rounds(tmp_path / "claims.log", random.Random(), rounds=60)


def kill_rounds(path: Path, rng: random.Random, rounds: int) -> None:
    acknowledged: set[str] = set()
    compactions = 0
    for round_ in range(rounds):
        values = "encoded" if (round_ + rng.randrange(2)) % 2 else "decoded"
        proc = subprocess.Popen(
            [sys.executable, "-c", APPENDER, str(path), values], stdout=subprocess.PIPE, bufsize=0
        )
        hot: dict[str, int] = {}
        for line in _kill_after(proc, rng.uniform(0.15, 0.5)):
            kind, *rest = line.split()
            if kind == "put":
                acknowledged.add(rest[0])
            elif kind == "hot":
                hot[rest[0]] = int(rest[1])
            else:
                compactions = max(compactions, int(rest[0]))
        keyed = KeyedLog.open(str(path), fsync="never")
        table = keyed.table("claims")
        missing = acknowledged - set(table.keys())  # type: ignore[arg-type]
        assert not missing, f"{len(missing)} acknowledged keys lost, e.g. {sorted(missing)[:5]}"
        for key in acknowledged:
            assert table[key]["owner"] == key
        for key, n in hot.items():  # the last acknowledged value, or the one in flight after it
            assert table[key]["n"] in (n, n + 1), (key, n, table[key])
        assert all(d.tail for d in keyed.report.damaged), str(keyed.report)
        keyed.close()
    assert len(acknowledged) > 50
    assert compactions > 0, "no compaction ran under load; raise the load or lower the limit"


COMPACTOR = textwrap.dedent(
    """
    import os, sys
    from edge_broker.store import KeyedLog

    path, stage = sys.argv[1], sys.argv[2]
    keyed = KeyedLog.open(path, fsync="never", compact_min_bytes=1 << 30)
    real_fdatasync, real_replace, real_fsync = os.fdatasync, os.replace, os.fsync

    def target(fd):
        return os.readlink(f"/proc/self/fd/{fd}")

    def fdatasync(fd):
        if stage == "before-temp-fsync" and target(fd).endswith(".compact"):
            os._exit(9)
        real_fdatasync(fd)

    def replace(src, dst):
        if stage == "before-rename":
            os._exit(9)
        real_replace(src, dst)
        if stage == "after-rename":
            os._exit(9)

    def fsync(fd):
        if stage == "before-dir-fsync" and os.path.isdir(target(fd)):
            os._exit(9)
        real_fsync(fd)

    os.fdatasync, os.replace, os.fsync = fdatasync, replace, fsync
    keyed.compact()
    os._exit(0)
    """
)


@pytest.mark.parametrize(
    "stage", ["before-temp-fsync", "before-rename", "after-rename", "before-dir-fsync"]
)
def test_crash_at_any_stage_of_compaction_leaves_a_valid_log(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "a.log"
    keyed = KeyedLog.open(str(path), fsync="never", compact_min_bytes=1 << 30)
    for i in range(3000):
        keyed.table("t").put_sync(i % 100, {"v": i})
    keyed.table("t").delete_sync(5)
    keyed.close()
    expected = {i: {"v": 2900 + i} for i in range(100) if i != 5}
    old_size = path.stat().st_size
    result = subprocess.run([sys.executable, "-c", COMPACTOR, str(path), stage], check=False)
    assert result.returncode == 9
    renamed = stage in ("after-rename", "before-dir-fsync")
    assert (path.stat().st_size < old_size / 5) == renamed
    keyed = KeyedLog.open(str(path), fsync="never")
    assert keyed.report.clean
    assert dict(keyed.table("t").items()) == expected
    assert not os.path.exists(str(path) + ".compact")
    assert keyed.report.stale_files_removed == (() if renamed else (str(path) + ".compact",))
    keyed.close()


BESIDE_APPENDS = textwrap.dedent(
    """
    import asyncio, os, sys
    from edge_broker.store import KeyedLog

    path, stage = sys.argv[1], sys.argv[2]
    real_fdatasync, real_replace = os.fdatasync, os.replace
    seen = set()

    def fdatasync(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".compact"):
            inode = os.fstat(fd).st_ino
            if stage == "temp-fsync" or (stage == "tail-fsync" and inode in seen):
                os._exit(9)
            seen.add(inode)
        real_fdatasync(fd)

    def replace(src, dst):
        if stage == "before-rename":
            os._exit(9)
        real_replace(src, dst)
        if stage == "after-rename":
            os._exit(9)

    os.fdatasync, os.replace = fdatasync, replace

    async def main():
        keyed = KeyedLog.open(path, compact_min_bytes=4096, compact_ratio=0.5)
        table = keyed.table("t")

        async def writer(w):
            n = 0
            while True:
                await table.put(f"{w}-{n % 5}", {"n": n, "pad": "x" * 80})
                sys.stdout.write(f"{w}-{n % 5} {n}\\n")
                sys.stdout.flush()
                n += 1

        await asyncio.gather(*(writer(w) for w in range(8)))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("stage", ["temp-fsync", "tail-fsync", "before-rename", "after-rename"])
def test_crash_during_a_compaction_beside_appends(tmp_path: Path, stage: str) -> None:
    path = tmp_path / "a.log"
    result = subprocess.run(
        [sys.executable, "-c", BESIDE_APPENDS, str(path), stage],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 9, result.stderr[-2000:]
    last: dict[str, int] = {}
    for line in result.stdout.splitlines():
        key, count = line.split()
        last[key] = int(count)
    assert last, "nothing was acknowledged before the crash"
    keyed = KeyedLog.open(str(path))
    table = keyed.table("t")
    for key, n in last.items():
        # The last acknowledged value, or the writer's next put of that key, if it was in flight
        # (each writer cycles through its 5 keys, so that put carries n + 5).
        assert table[key]["n"] in (n, n + 5), (key, n, table.get(key))
    assert all(d.tail for d in keyed.report.damaged), str(keyed.report)
    keyed.close()
