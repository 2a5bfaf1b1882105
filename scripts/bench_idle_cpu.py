"""Broker CPU with idle clients: what the periodic checks cost when nothing happens.

Starts edge-broker from a source tree (``--root``, default this one), connects ``--clients``
idle clients (keep alive 300 s, one subscription each, as ``scripts/bench_run.py --idle``),
waits for the connections to settle, then reads the broker process's CPU time (utime + stime)
over ``--seconds`` in which no client sends anything. Prints ms of CPU per second (1000 = one
core)::

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


def measure(root: Path, clients: int, seconds: float, processes: int = 4) -> float:
    # imported here: bench_load imports edge_broker, which --tick must take from the cwd
    from bench_load import idle_worker

    broker = start_edge(Path(tempfile.mkdtemp(prefix="idle-cpu-")), root=root)
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
        cpu0, t0 = broker.cpu_seconds(), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = broker.cpu_seconds(), time.monotonic()
        done.set()
        for p in procs:
            p.join(10)
        return (cpu1 - cpu0) / (t1 - t0) * 1000
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
    ap.add_argument("--tick", action="store_true", help="µs per Broker.tick, in-process")
    args = ap.parse_args()
    if args.tick:
        us = tick_cost(args.clients)
        print(f"{os.getcwd()}: {us:.1f} µs per tick with {args.clients} idle clients")
        return 0
    ms = measure(args.root.resolve(), args.clients, args.seconds)
    print(f"{args.root}: {ms:.2f} ms CPU per second with {args.clients} idle clients")
    return 0


if __name__ == "__main__":
    sys.exit(main())
