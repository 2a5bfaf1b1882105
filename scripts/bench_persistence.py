#!/usr/bin/env python3
"""Benchmark of broker persistence (issue 8): QoS 1 throughput into a persistent session with
``[persistence] durability`` sync / interval / none and with persistence off, and start-up
(recovery) time for a store holding 100k queued messages.

    .venv/bin/python scripts/bench_persistence.py [--dir DIR] [--messages 20000]
        [--publishers 4] [--window 32] [--queued 100000] [--modes off,none,interval,sync]
        [--sync-publishers 16] [--subscribers 1,10] [--repeat N] [--before COMMIT]

Issue 17: each mode runs with one and with ten persistent subscribers and prints the broker's
CPU per message (from /proc, so other load on the machine does not count) side by side with
persistence off, the ratios against the targets, and for ``sync`` with ``--sync-publishers``
publishers how many messages one fsync covers (from the store's closing log line).

Run it on the gateway's real storage (``--dir /var/lib/edge-broker-bench``): on tmpfs fsync
costs nothing and the sync figures mean little. The load generator is raw sockets with
pre-encoded MQTT 3.1.1 packets in separate processes (as scripts/bench_load.py), each publisher
keeping ``--window`` QoS 1 PUBLISH unacknowledged; the subscriber is a persistent session
(clean session 0) that acknowledges everything, so every message is stored, then deleted.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Connect, Publish, Subscribe, Subscription

CTX = mp.get_context("fork")
LISTEN_RE = re.compile(r"listening on (\S+):(\d+)")
LOADED_RE = re.compile(r"restored in ([0-9.]+) s")
PAYLOAD = b"x" * 64
PROFILE: list[Path] = []  # --profile DIR: each edge-broker run writes DIR/<run>.prof (cProfile)
# --before COMMIT: mode "none@before" runs the edge_broker package of COMMIT (git archive here)
SOURCES: dict[str, Path] = {}


def _recv_exact(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        data += chunk
    return data


def _connect(port: int, client_id: str, clean: bool) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(encode(Connect(4, client_id, clean, 0), 4))
    ack = _recv_exact(s, 4)
    if ack[0] != 0x20 or ack[3] != 0:
        raise ConnectionError(f"CONNACK refused: {ack!r}")
    return s


def _subscribe(port: int, client_id: str) -> socket.socket:
    s = _connect(port, client_id, clean=False)
    s.sendall(encode(Subscribe(1, (Subscription("bench/#", 1),)), 4))
    suback = _recv_exact(s, 5)
    if suback[0] != 0x90 or suback[4] >= 0x80:
        raise ConnectionError(f"SUBACK refused: {suback!r}")
    return s


def subscriber(
    port: int,
    pkt_len: int,
    pid_off: int,
    expected: int,
    ready: Any,
    out: Any,
    client_id: str = "bench-sub",
) -> None:
    """Acknowledge every delivery (fixed-size packets); report how many arrived."""
    s = _subscribe(port, client_id)
    ready.set()
    buf = bytearray()
    total = 0
    s.settimeout(30)
    while total < expected:
        try:
            data = s.recv(1 << 18)
        except TimeoutError:
            break
        if not data:
            break
        buf += data
        n = len(buf) // pkt_len
        s.sendall(
            b"".join(
                b"\x40\x02" + buf[i * pkt_len + pid_off : i * pkt_len + pid_off + 2]
                for i in range(n)
            )
        )
        del buf[: n * pkt_len]
        total += n
    out.put(("sub", total))
    s.close()


def publisher(port: int, index: int, count: int, window: int, go: Any, out: Any) -> None:
    """Send ``count`` QoS 1 PUBLISH keeping ``window`` unacknowledged; time until all acked."""
    s = _connect(port, f"bench-pub-{index}", clean=True)
    # Topics of one width: the subscriber splits its input into packets of one size.
    packets = [
        encode(Publish(f"bench/{index:03d}", PAYLOAD, 1, packet_id=pid), 4)
        for pid in range(1, 65536)
    ]
    go.wait()
    started = time.perf_counter()
    sent = acked = 0
    first = min(window, count)
    s.sendall(b"".join(packets[i % 65535] for i in range(first)))
    sent = first
    pending = b""
    while acked < count:
        data = s.recv(1 << 16)
        if not data:
            raise ConnectionError("broker closed the connection")
        pending += data
        n = len(pending) // 4
        pending = pending[n * 4 :]
        acked += n
        more = min(n, count - sent)
        if more:
            s.sendall(b"".join(packets[(sent + i) % 65535] for i in range(more)))
            sent += more
    out.put(("pub", time.perf_counter() - started, acked))
    s.close()


def start_broker(
    workdir: Path, persistence: str, state: Path, extra: str = "", source: Path | None = None
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``source``: a directory holding the ``edge_broker`` package to run instead of this
    one (``--before``); the broker starts there, so its package comes first on sys.path."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "broker.toml"
    lines = [
        "[[listeners]]",
        'name = "tcp"',
        'bind = "127.0.0.1"',
        "port = 0",
        "[log]",
        'level = "info"',
        "[limits]",
        "receive_maximum = 65535",
        "max_queued_messages = 200000",
        "max_queued_bytes = 268435456",
        # all sessions together: ten subscribers behind a fast publisher pass the default
        # 32 MiB, and a dropped message is work not done (the run would look cheaper)
        "max_queued_bytes_total = 4294967296",
    ]
    if persistence != "off":
        lines += [
            "[persistence]",
            "enabled = true",
            f'state_dir = "{state}"',
            f'durability = "{persistence}"',
            "interval_ms = 50",
        ]
    config.write_text("\n".join(lines) + "\n" + extra)
    log_path = workdir / "broker.log.txt"
    with open(log_path, "wb") as log_file:
        profile = (
            ["-m", "cProfile", "-o", str(PROFILE[0] / f"{workdir.name}.prof")] if PROFILE else []
        )
        process = subprocess.Popen(
            [sys.executable, *profile, "-m", "edge_broker", "run", "--config", str(config)],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            cwd=source,
            env=None if source is None else {**os.environ, "PYTHONPATH": str(source)},
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        found = LISTEN_RE.search(log_path.read_text(errors="replace"))
        if found:
            return process, int(found.group(2)), log_path
        if process.poll() is not None:
            raise RuntimeError(f"broker exited:\n{log_path.read_text()}")
        time.sleep(0.01)
    process.kill()
    raise RuntimeError("broker did not start")


MOSQUITTO = "/usr/sbin/mosquitto"


def start_mosquitto(
    workdir: Path, state: Path, autosave: int = 1
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Mosquitto 2 with ``persistence true``: its in-memory state is saved every ``autosave``
    seconds (``autosave_interval``, the counterpart of our ``interval`` mode)."""
    workdir.mkdir(parents=True, exist_ok=True)
    state.mkdir(parents=True, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    config = workdir / "mosquitto.conf"
    config.write_text(
        f"listener {port} 127.0.0.1\nallow_anonymous true\nlog_type error\n"
        f"persistence true\npersistence_location {state}/\n"
        f"autosave_interval {autosave}\nmax_queued_messages 200000\n"
        "max_inflight_messages 32\n"
    )
    log_path = workdir / "mosquitto.log.txt"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [MOSQUITTO, "-c", str(config)], stdout=log_file, stderr=subprocess.STDOUT
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, port, log_path
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"mosquitto exited:\n{log_path.read_text()}") from None
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("mosquitto did not start")


def start_any(workdir: Path, mode: str, state: Path) -> tuple[subprocess.Popen[bytes], int, Path]:
    if mode == "mosquitto":
        return start_mosquitto(workdir, state)
    mode, _, tag = mode.partition("@")
    return start_broker(workdir, mode, state, source=SOURCES[tag] if tag else None)


def kill_loss(base: Path, mode: str, count: int) -> tuple[int, int]:
    """QoS 1 messages acknowledged to a publisher for an offline persistent subscriber, then
    kill -9 and a restart: (acknowledged, delivered after the restart)."""
    state = base / f"state-kill-{mode}"
    shutil.rmtree(state, ignore_errors=True)
    process, port, _ = start_any(base / f"kill-{mode}", mode, state)
    try:
        _subscribe(port, "kill-sub").close()
        out: Any = CTX.Queue()
        go = CTX.Event()
        pub = CTX.Process(target=publisher, args=(port, 0, count, 32, go, out))
        pub.start()
        go.set()
        out.get(timeout=600)
        pub.join(30)
    finally:
        process.kill()
        process.wait()
    process, port, _ = start_any(base / f"kill-{mode}-2", mode, state)
    try:
        s = _connect(port, "kill-sub", clean=False)
        sample = encode(Publish("bench/000", PAYLOAD, 1, packet_id=1), 4)
        pid_off = len(sample) - len(PAYLOAD) - 2
        got, buf = 0, b""
        s.settimeout(2.0)
        while True:
            try:
                data = s.recv(1 << 18)
            except TimeoutError:
                break
            if not data:
                break
            buf += data
            n = len(buf) // len(sample)
            s.sendall(
                b"".join(
                    b"\x40\x02" + buf[i * len(sample) + pid_off : i * len(sample) + pid_off + 2]
                    for i in range(n)
                )
            )
            buf = buf[n * len(sample) :]
            got += n
        s.close()
    finally:
        stop(process)
    return count, got


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def cpu_seconds(pid: int) -> float:
    """User + system CPU the process used so far (/proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


STORE_STATS_RE = re.compile(r"broker store closed: (\d+) appends, (\d+) fsyncs")


def throughput(
    base: Path, mode: str, messages: int, publishers: int, window: int, subscribers: int = 1
) -> tuple[float, float, float]:
    """(messages/s, broker CPU µs per published message, messages per fsync) for QoS 1 into
    ``subscribers`` persistent sessions."""
    name = f"{mode}-{subscribers}s-{publishers}p"
    state = base / f"state-{name}"
    shutil.rmtree(state, ignore_errors=True)
    process, port, log_path = start_any(base / f"run-{name}", mode, state)
    try:
        sample = encode(Publish("bench/000", PAYLOAD, 1, packet_id=1), 4)
        pid_off = len(sample) - len(PAYLOAD) - 2
        per = messages // publishers
        out: Any = CTX.Queue()
        go = CTX.Event()
        subs = []
        for k in range(subscribers):
            ready = CTX.Event()
            sub = CTX.Process(
                target=subscriber,
                args=(port, len(sample), pid_off, per * publishers, ready, out, f"bench-sub-{k}"),
            )
            sub.start()
            ready.wait(30)
            subs.append(sub)
        pubs = [
            CTX.Process(target=publisher, args=(port, i, per, window, go, out))
            for i in range(publishers)
        ]
        for p in pubs:
            p.start()
        time.sleep(0.5)
        cpu_before = cpu_seconds(process.pid)
        go.set()
        results = [out.get(timeout=600) for _ in range(publishers + subscribers)]
        cpu = cpu_seconds(process.pid) - cpu_before
        for p in [*pubs, *subs]:
            p.join(30)
        elapsed = max(r[1] for r in results if r[0] == "pub")
        delivered = min(r[1] for r in results if r[0] == "sub")
        if delivered < per * publishers:
            drops = log_path.read_text(errors="replace").count("limits.max_queued")
            print(
                f"  warning: a subscriber got {delivered} of {per * publishers}"
                + (f" ({drops} queue-limit warnings in {log_path})" if drops else "")
            )
    finally:
        stop(process)
    found = STORE_STATS_RE.search(log_path.read_text(errors="replace"))
    total = per * publishers
    per_fsync = total / max(1, int(found.group(2))) if found else float("nan")
    return total / elapsed, cpu / total * 1e6, per_fsync


def recovery(base: Path, queued: int) -> tuple[float, float, int]:
    """Fill a store with ``queued`` messages for an offline session; then time a restart:
    (seconds until listening, seconds the store load took, store bytes)."""
    state = base / "state-recovery"
    shutil.rmtree(state, ignore_errors=True)
    process, port, _ = start_broker(base / "fill", "none", state)
    try:
        _subscribe(port, "bench-sub").close()
        out: Any = CTX.Queue()
        go = CTX.Event()
        pubs = [
            CTX.Process(target=publisher, args=(port, i, queued // 4, 256, go, out))
            for i in range(4)
        ]
        for p in pubs:
            p.start()
        go.set()
        for _ in pubs:
            out.get(timeout=1200)
        for p in pubs:
            p.join(30)
    finally:
        stop(process)
    size = (state / "broker.log").stat().st_size
    started = time.perf_counter()
    process, port, log_path = start_broker(base / "restart", "sync", state)
    listening = time.perf_counter() - started
    try:
        found = LOADED_RE.search(log_path.read_text(errors="replace"))
        loaded = float(found.group(1)) if found else float("nan")
    finally:
        stop(process)
    return listening, loaded, size


def _summary(cpu: dict[tuple[str, int], float], tag: str) -> None:
    """The ratios against issue 17's targets, for the runs of ``tag`` ("" or "@before")."""
    off1, none1 = cpu.get((f"off{tag}", 1)), cpu.get((f"none{tag}", 1))
    if off1 is None or none1 is None:
        return
    print(f"durability 'none' vs off, 1 subscriber{tag}: {none1 / off1:.2f}x (target <= 2x)")
    off10, none10 = cpu.get((f"off{tag}", 10)), cpu.get((f"none{tag}", 10))
    if off10 is None or none10 is None:
        return
    extra1, extra10 = none1 - off1, none10 - off10
    # The reading persistence owns: what storing a message for ten sessions costs beside
    # storing it for one (ten socket writes cost 4-5x one with persistence off already).
    print(
        f"durability 'none', 10 persistent subscribers vs 1{tag}: {none10 / none1:.2f}x per "
        f"message (target <= 1.5x), {none10 / 10 / none1:.2f}x per delivery; vs off with 10 "
        f"subscribers {none10 / off10:.2f}x; persistence's own cost {extra10:.1f} µs vs "
        f"{extra1:.1f} µs per message: {extra10 / extra1:.2f}x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dir", help="directory for the stores (default: a temporary directory under ./var)"
    )
    parser.add_argument("--messages", type=int, default=20000)
    parser.add_argument("--publishers", type=int, default=4)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--queued", type=int, default=100000)
    parser.add_argument("--modes", default="off,none,interval,sync")
    parser.add_argument(
        "--sync-publishers",
        type=int,
        default=16,
        help="publishers of the group-commit run (0: skip it)",
    )
    parser.add_argument(
        "--mosquitto",
        action="store_true",
        help=f"also run {MOSQUITTO} with persistence true (autosave_interval 1)"
        " and measure what each broker loses on kill -9",
    )
    parser.add_argument("--kill-messages", type=int, default=2000)
    parser.add_argument("--subscribers", default="1,10", help="persistent subscriber counts to run")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run each mode this many times, alternating, and print the median (CPU per message)",
    )
    parser.add_argument(
        "--before",
        metavar="COMMIT",
        help="also run each mode with the edge_broker of COMMIT (git archive), alternating with "
        "this one, and print its figures beside",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run each edge-broker under cProfile, writing DIR/<run>.prof (CPU figures grow)",
    )
    args = parser.parse_args()
    if args.profile:
        PROFILE.append(Path(args.profile).resolve())
        PROFILE[0].mkdir(parents=True, exist_ok=True)
    if args.dir:
        base = Path(args.dir).resolve()  # the broker reads state_dir relative to its config
        base.mkdir(parents=True, exist_ok=True)
        cleanup = False
    else:
        Path("var").mkdir(exist_ok=True)
        base = Path(tempfile.mkdtemp(prefix="bench-persistence-", dir="var")).resolve()
        cleanup = True
    modes = args.modes.split(",")
    if args.before:
        source = base / f"source-{args.before}"
        source.mkdir(exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", args.before, "edge_broker"], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
        SOURCES["before"] = source
        modes = [m for mode in modes for m in (mode, f"{mode}@before")]
    fs = subprocess.run(["stat", "-f", "-c", "%T", str(base)], capture_output=True, text=True)
    print(
        f"store directory {base} ({fs.stdout.strip() or 'unknown'} filesystem), "
        f"{os.cpu_count()} CPUs"
    )
    try:
        print(
            "QoS 1, 64-byte payloads, into persistent sessions (clean session 0); CPU is the "
            "broker process's user+system time per published message"
        )
        cpu: dict[tuple[str, int], float] = {}
        if args.before:
            print(f"'@before': the edge_broker of {args.before}, run alternating with this one")
        for subscribers in (int(n) for n in args.subscribers.split(",")):
            runs: dict[str, list[tuple[float, float, float]]] = {}
            for _ in range(args.repeat):  # modes alternate: the machine's load drifts
                for mode in modes:
                    runs.setdefault(mode, []).append(
                        throughput(
                            base, mode, args.messages, args.publishers, args.window, subscribers
                        )
                    )
            for mode, results in runs.items():
                rate, us, per_fsync = sorted(results, key=lambda r: r[1])[len(results) // 2]
                cpu[mode, subscribers] = us
                plain, _, tag = mode.partition("@")
                label = "persistence off" if plain == "off" else f"durability = {plain!r}"
                label += f" @{tag}" if tag else ""
                extra = f", {per_fsync:.1f} msg/fsync" if mode == "sync" else ""
                print(
                    f"  {subscribers:2} subscriber(s), {label:24}: {rate:8.0f} msg/s, "
                    f"{us:7.1f} µs CPU/msg{extra} ({args.publishers} publishers, window "
                    f"{args.window})"
                )
        for tag in ("", "@before") if args.before else ("",):
            _summary(cpu, tag)
        if args.mosquitto:
            for subscribers in (1, 10):
                rate, us, _ = throughput(
                    base, "mosquitto", args.messages, args.publishers, args.window, subscribers
                )
                print(
                    f"  {subscribers:2} subscriber(s), Mosquitto persistence true      : "
                    f"{rate:8.0f} msg/s, {us:7.1f} µs CPU/msg (autosave_interval 1)"
                )
            modes = [m for m in args.modes.split(",") if m != "off"] + ["mosquitto"]
            for mode in modes:
                acked, got = kill_loss(base, mode, args.kill_messages)
                label = (
                    "Mosquitto (autosave_interval 1)"
                    if mode == "mosquitto"
                    else f"edge-broker durability = {mode!r}"
                )
                print(
                    f"kill -9 right after {acked} acknowledged QoS 1 messages for an offline "
                    f"persistent subscriber, {label}: {got} delivered after the restart, "
                    f"{max(0, acked - got)} lost"
                )
        if args.sync_publishers:
            rate, us, per_fsync = throughput(
                base, "sync", args.messages, args.sync_publishers, args.window
            )
            print(
                f"durability = 'sync', {args.sync_publishers} publishers, 1 subscriber: "
                f"{rate:.0f} msg/s, {us:.1f} µs CPU/msg, {per_fsync:.1f} messages per fsync"
            )
        if args.queued:
            listening, loaded, size = recovery(base, args.queued)
            print(
                f"restart with {args.queued} queued messages ({size / 1e6:.1f} MB store): "
                f"store loaded in {loaded:.2f} s, listening after {listening:.2f} s"
            )
    finally:
        if cleanup:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
