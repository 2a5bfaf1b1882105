"""Audit uplink throughput: batches per second stored by 1 and by N ``collect`` processes.

A Debian Mosquitto on loopback is the cloud broker. ``--gateways`` simulated gateways (in
``--senders`` processes) upload real batches (``sync.upload.next_batch`` over a generated audit
log, ``--records`` records each) by the gateway's protocol: publish QoS 1 on
``edge/<gw>/audit``, wait for a collector's confirmation on ``edge/<gw>/audit/stored``, then
the next batch (one in flight per gateway, as ``sync/service.py``). The collectors are real
``edge-broker-pipeline collect`` processes in one shared subscription group, each storing with
fsync. The time runs from the first publish to the last confirmation; every batch file is
counted afterwards (each stored once, none missing).

    .venv/bin/python scripts/bench_collect.py --collectors 1,3 --gateways 30 --batches 40

On a host with fewer cores than collectors plus senders the figure measures sharing, not
scaling: say the load with the figure (the script prints the 1-minute load average).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts import procs  # noqa: E402


def make_batches(workdir: Path, records: int, batches: int) -> list[bytes]:
    """``batches`` real upload payloads of ``records`` records each (gateway id rewritten per
    sender)."""
    from edge_broker.audit.log import AuditLog
    from edge_broker.sync.upload import next_batch

    log = AuditLog(workdir / "gwlog", "GWID")
    for i in range(records * batches):
        log.decision(
            action="publish",
            client=f"dev-{i % 50}",
            user="sensor",
            tenant="~",
            topic=f"sensors/dev-{i % 50}/t{i % 7}",
            qos=i % 2,
            outcome="deny" if i % 5 == 0 else "allow",
            gate="permissions",
            rule="own-data",
            rc=0x87 if i % 5 == 0 else 0,
        )
    log.close()
    out = []
    cursor = None
    while True:
        batch = next_batch(workdir / "gwlog", "GWID", cursor, records)
        if batch is None:
            break
        out.append(batch.payload)
        cursor = (batch.segment, batch.last)
    return out[:batches]


def sender(port: int, names: list[str], payloads: list[bytes], start: Any, done: Any) -> None:
    """Gateways ``names``, each uploading every payload one after the other."""
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    from edge_broker.sync.upload import COLLECTORS_ONLINE, audit_topic, stored_topic

    state = {name: 0 for name in names}
    lock = threading.Lock()
    finished = threading.Event()
    clients: dict[str, Any] = {}
    bodies = {
        name: [p.replace(b'"gw":"GWID"', f'"gw":"{name}"'.encode()) for p in payloads]
        for name in names
    }
    ids = {
        name: [json.loads(b.split(b"\n", 1)[0])["batch"] for b in bodies[name]] for name in names
    }

    def send(name: str) -> None:
        clients[name].publish(audit_topic(name), bodies[name][state[name]], qos=1)

    def on_message(client: Any, name: Any, message: Any) -> None:
        if message.topic == COLLECTORS_ONLINE:
            with lock:
                if state[name] < len(payloads):
                    send(name)  # what the gateway does: resend what waits
            return
        with lock:
            if state[name] < len(payloads) and message.payload.decode() == ids[name][state[name]]:
                state[name] += 1
                if state[name] < len(payloads):
                    send(name)
                elif all(n >= len(payloads) for n in state.values()):
                    finished.set()

    for name in names:
        c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=name, userdata=name)
        c.on_message = on_message
        c.connect("127.0.0.1", port)
        c.subscribe([(stored_topic(name), 1), (COLLECTORS_ONLINE, 1)])
        c.loop_start()
        clients[name] = c
    time.sleep(1.0)  # subscribed
    start.wait()
    with lock:
        for name in names:
            send(name)
    finished.wait(600)
    done.put(sum(state.values()))
    for c in clients.values():
        c.disconnect()
        c.loop_stop()


def run(collectors: int, args: argparse.Namespace, payloads: list[bytes]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
        work = Path(tmp)
        cloud = procs.Mosquitto(work / "cloud", verbose=False).start()
        store = work / "store"
        procs_ = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "edge_broker.pipeline",
                    "collect",
                    "--broker",
                    f"127.0.0.1:{cloud.port}",
                    "-o",
                    str(store),
                    "--group",
                    "bench",
                ],
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(collectors)
        ]
        ctx = multiprocessing.get_context("spawn")
        start = ctx.Event()
        done = ctx.Queue()
        names = [f"gw-{i:04d}" for i in range(args.gateways)]
        groups = [names[i :: args.senders] for i in range(args.senders)]
        senders = [
            ctx.Process(target=sender, args=(cloud.port, g, payloads, start, done)) for g in groups
        ]
        try:
            for p in senders:
                p.start()
            time.sleep(3.0)  # collectors and senders connected and subscribed
            load = os.getloadavg()[0]
            began = time.perf_counter()
            start.set()
            confirmed = sum(done.get(timeout=900) for _ in senders)
            elapsed = time.perf_counter() - began
            for p in senders:
                p.join(30)
        finally:
            for p in procs_:
                p.terminate()
                p.wait(10)
            cloud.stop()
        files = list(store.rglob("*.jsonl"))
        expected = args.gateways * len(payloads)
        return {
            "collectors": collectors,
            "gateways": args.gateways,
            "batches": expected,
            "records_per_batch": args.records,
            "confirmed": confirmed,
            "stored_files": len(files),
            "seconds": round(elapsed, 2),
            "batches_per_s": round(confirmed / elapsed, 1),
            "records_per_s": round(confirmed * args.records / elapsed),
            "load_before": round(load, 1),
            "load_after": round(os.getloadavg()[0], 1),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collectors", default="1,3", help="comma-separated process counts")
    parser.add_argument("--gateways", type=int, default=30)
    parser.add_argument("--senders", type=int, default=2, help="processes simulating gateways")
    parser.add_argument("--batches", type=int, default=40, help="batches per gateway")
    parser.add_argument("--records", type=int, default=200, help="records per batch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-collect-log-") as tmp:
        payloads = make_batches(Path(tmp), args.records, args.batches)
    rows = [run(int(n), args, payloads) for n in args.collectors.split(",")]
    for row in rows:
        print(json.dumps(row))
        if row["stored_files"] != row["batches"] or row["confirmed"] != row["batches"]:
            sys.exit(f"lost or doubled batches: {row}")


if __name__ == "__main__":
    main()
