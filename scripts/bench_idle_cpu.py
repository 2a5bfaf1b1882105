"""Broker CPU with idle clients: what the periodic checks cost when nothing happens.

Starts edge-broker from a source tree (``--root``, default this one), connects ``--clients``
idle clients (keep alive 300 s, one subscription each, as ``scripts/bench_run.py --idle``),
waits for the connections to settle, then reads the broker process's CPU time (utime + stime)
and its wake-ups over ``--seconds`` in which no client sends anything. Prints ms of CPU per
second (1000 = one core) and wake-ups per minute: the voluntary context switches of all the
process's threads (``/proc/<pid>/task/*/status``), each one a return from a sleep such as the
event loop's ``epoll_wait``. ``--extra`` appends TOML to the broker's config (``"[sys]
interval = 0"``: no ``$SYS``, the one periodic duty configured by default)::

    python scripts/bench_idle_cpu.py --root /path/to/tree --clients 1000 --seconds 20

``--tick`` measures instead, in this process, what one ``Broker.tick`` costs with that many
idle clients connected (the in-memory broker of ``tests/broker/engine_harness.py`` from the
working directory's tree; ``process_time``, best of ``--repeat``): the process figure above
moves in 10 ms steps of the kernel's CPU accounting, this one does not::

    cd /path/to/tree && python /this/tree/scripts/bench_idle_cpu.py --tick
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_brokers import start_edge  # noqa: E402

CTX = multiprocessing.get_context("fork")


def wakeups(pid: int) -> int:
    """Voluntary context switches of every thread of ``pid`` so far."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:  # the thread ended
            continue
        for line in status.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                total += int(line.split()[1])
    return total


def measure(
    root: Path, clients: int, seconds: float, extra: str = "", processes: int = 4
) -> tuple[float, float]:
    """(ms of CPU per second, wake-ups per minute) of the idle broker."""
    # imported here: bench_load imports edge_broker, which --tick must take from the cwd
    from bench_load import idle_worker

    broker = start_edge(Path(tempfile.mkdtemp(prefix="idle-cpu-")), extra=extra, root=root)
    try:
        ready = CTX.Barrier(processes + 1)
        done = CTX.Event()
        per = clients // processes
        procs = [
            CTX.Process(target=idle_worker, args=(broker.port, k * per, per, ready, done))
            for k in range(processes)
        ]
        for p in procs:
            p.start()
        ready.wait()
        time.sleep(2.0)  # the CONNECT/SUBSCRIBE work is done
        pid = broker.process.pid
        cpu0, woke0, t0 = broker.cpu_seconds(), wakeups(pid), time.monotonic()
        time.sleep(seconds)
        cpu1, woke1, t1 = broker.cpu_seconds(), wakeups(pid), time.monotonic()
        done.set()
        for p in procs:
            p.join(10)
        return (cpu1 - cpu0) / (t1 - t0) * 1000, (woke1 - woke0) / (t1 - t0) * 60
    finally:
        broker.stop()


def tick_cost(clients: int, ticks: int = 200, repeat: int = 5) -> float:
    """µs per ``Broker.tick`` with ``clients`` idle clients on the in-memory broker."""
    sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "tests", "broker")]
    from engine_harness import memory_broker

    best = float("inf")
    limits = {"connect_rate": 100_000, "connect_burst": 100_000, "max_connections": 100_000}
    for mb in memory_broker({"limits": limits}):
        for i in range(clients):
            mb.client(4).connect(f"idle-{i}", keep_alive=300)
        broker, now = mb.broker, mb.clock.now
        assert len(broker.connections) == clients
        for _ in range(repeat):
            t0 = time.process_time()
            for k in range(ticks):
                broker.tick(now + 0.001 * k)
            best = min(best, (time.process_time() - t0) / ticks * 1e6)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--clients", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--extra", default="", help="TOML appended to the broker's config")
    ap.add_argument("--tick", action="store_true", help="µs per Broker.tick, in-process")
    args = ap.parse_args()
    if args.tick:
        us = tick_cost(args.clients)
        print(f"{os.getcwd()}: {us:.1f} µs per tick with {args.clients} idle clients")
        return 0
    ms, woke = measure(args.root.resolve(), args.clients, args.seconds, args.extra)
    print(
        f"{args.root}: {ms:.2f} ms CPU per second, {woke:.0f} wake-ups per minute with "
        f"{args.clients} idle clients{f' ({args.extra!r})' if args.extra else ''}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
