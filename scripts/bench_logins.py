#!/usr/bin/env python3
"""A login storm against the real broker (issue 16): N password clients CONNECT at once.

Starts ``python -m edge_broker run`` with one ``password`` listener and a password file of N
distinct users, opens N sockets, sends every CONNECT, and measures

- the time until every client has its CONNACK (``all answered``), and how many were accepted
  (0x00) or told Server busy (0x89);
- the broker's peak RSS during the storm (VmRSS sampled every 5 ms) and its RSS before it.

Then all disconnect (those the first storm turned away log in once more, a few at a time, not
measured: every device was connected before the outage) and connect again at once: the second
storm is the warm case (the verified-credential cache skips argon2id). ``--cache-entries 0`` turns
the cache off; ``--old-hashes`` writes the password file with the previous default
(argon2id m=64 MiB t=2) to show what the same storm cost before issue 16. ``--root`` runs
another checkout's broker.

The connect-rate limit is raised for the run (``connect_burst``/``connect_rate`` = 100,000):
the storm measures authentication, not the rate limit, which would otherwise ask the clients
past its burst (400 by default) to come back later with 0x9F.

    .venv/bin/python scripts/bench_logins.py --clients 200 1000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nacl.pwhash

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from procs import PeakRss, rss_kib  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import Connack, Connect, Disconnect  # noqa: E402

NEW = (5, 7 * 1024 * 1024)  # edge_broker/auth/password.py since issue 16
OLD = (2, 64 * 1024 * 1024)  # libsodium "interactive", the default before


def _hash(args: tuple[int, int, int]) -> str:
    i, ops, mem = args
    return nacl.pwhash.argon2id.str(f"pw-{i}".encode(), opslimit=ops, memlimit=mem).decode()


def password_file(n: int, old: bool) -> Path:
    """N users ``dev-<i>`` / ``pw-<i>``; made once per (n, parameters) and kept in /tmp."""
    ops, mem = OLD if old else NEW
    path = Path(tempfile.gettempdir()) / f"edge-broker-bench-logins-{n}-t{ops}-m{mem >> 20}.passwd"
    if not path.exists():
        with ProcessPoolExecutor(os.cpu_count() or 2) as pool:
            hashes = list(pool.map(_hash, [(i, ops, mem) for i in range(n)], chunksize=16))
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(f"dev-{i}:{h}\n" for i, h in enumerate(hashes)))
        tmp.replace(path)
    return path


def start_broker(
    root: Path, workdir: Path, passwd: Path, cache_entries: int | None, connect_timeout: float
) -> tuple[subprocess.Popen[bytes], int, Path]:
    extra = f"cache_entries = {cache_entries}\n" if cache_entries is not None else ""
    return launch(
        root,
        workdir,
        f'[passwords]\nfile = "{passwd}"\n{extra}\n'
        f"[broker]\nconnect_timeout = {connect_timeout}\n\n"
        "[limits]\nconnect_rate = 100000\nconnect_burst = 100000\nmax_connections = 5000\n\n"
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n',
    )


def launch(
    root: Path, workdir: Path, config_text: str
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """``python -m edge_broker run`` of checkout ``root`` with ``config_text`` (one TCP
    listener on 127.0.0.1 port 0); returns the process, its port and its log."""
    config = workdir / "broker.toml"
    config.write_text(config_text)
    log = workdir / "broker.log"
    env = dict(os.environ, PYTHONPATH=str(root))
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "edge_broker", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=root,
            env=env,
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        if found:
            return proc, int(found.group(1)), log
        if proc.poll() is not None:
            raise SystemExit(f"broker exited:\n{log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not start")


async def one_login(
    port: int, i: int, started: float
) -> tuple[int, float, asyncio.StreamWriter | None]:
    """(reason code or -1 for no CONNACK, seconds since the storm started, open writer)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        encode(
            Connect(5, f"dev-{i}", True, 600, username=f"dev-{i}", password=f"pw-{i}".encode()), 5
        )
    )
    packets = PacketReader(side="client", protocol_level=5)
    while True:
        data = await reader.read(4096)
        if not data:
            writer.close()
            return -1, time.monotonic() - started, None
        for packet in packets.feed(data):
            if isinstance(packet, Connack):
                return packet.reason_code, time.monotonic() - started, writer


async def storm(
    port: int, who: range | list[int]
) -> tuple[list[int], float, list[asyncio.StreamWriter]]:
    started = time.monotonic()
    results = await asyncio.gather(*(one_login(port, i, started) for i in who))
    codes = [code for code, _, _ in results]
    last = max(at for _, at, _ in results)
    return codes, last, [w for _, _, w in results if w is not None]


async def close_all(writers: list[asyncio.StreamWriter]) -> None:
    for w in writers:
        w.write(encode(Disconnect(0), 5))
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)


def summary(codes: list[int]) -> str:
    parts = [f"{codes.count(0)} accepted"]
    for code in sorted(set(codes) - {0}):
        parts.append(f"{codes.count(code)} " + ("no CONNACK" if code == -1 else f"0x{code:02X}"))
    return ", ".join(parts)


def run(args: argparse.Namespace, n: int) -> list[str]:
    passwd = password_file(n, args.old_hashes)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, _log = start_broker(
            Path(args.root), Path(tmp), passwd, args.cache_entries, args.connect_timeout
        )
        try:
            time.sleep(0.5)
            base = rss_kib(proc.pid)
            for phase in ("cold", "warm"):
                before = rss_kib(proc.pid)
                with PeakRss(proc.pid, interval=0.005) as peak:
                    codes, last = asyncio.run(_phase(port, range(n)))
                rows.append(
                    f"| {n} | {phase} | {last:.2f} | {summary(codes)} | "
                    f"{before / 1024:.0f} | {peak.peak / 1024:.0f} | {base / 1024:.0f} |"
                )
                print(rows[-1], flush=True)
                if phase == "cold":
                    # The reconnect storm: every device was connected before the outage. Those
                    # the cold storm turned away log in now, a few at a time (not measured).
                    left = [i for i, code in enumerate(codes) if code != 0]
                    while left:
                        batch, left = left[:8], left[8:]
                        retry, _ = asyncio.run(_phase(port, batch))
                        left += [i for i, code in zip(batch, retry, strict=True) if code != 0]
                time.sleep(1.0)
        finally:
            proc.terminate()
            proc.wait(15)
    return rows


async def _phase(port: int, who: range | list[int]) -> tuple[list[int], float]:
    codes, last, writers = await storm(port, who)
    await close_all(writers)
    return codes, last


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, nargs="+", default=[200, 1000])
    parser.add_argument(
        "--cache-entries",
        type=int,
        default=None,
        help="[passwords] cache_entries (default: the broker's default)",
    )
    parser.add_argument(
        "--old-hashes",
        action="store_true",
        help="argon2id m=64 MiB t=2, the default before issue 16",
    )
    parser.add_argument("--connect-timeout", type=float, default=10.0)
    parser.add_argument("--root", default=str(ROOT), help="checkout whose broker to run")
    args = parser.parse_args()
    print(
        f"hashes: {'m=64MiB t=2 (old)' if args.old_hashes else 'm=7MiB t=5 (new)'}; "
        f"cache_entries: {args.cache_entries if args.cache_entries is not None else 'default'}; "
        f"broker: {args.root}"
    )
    print(
        "| clients | cache | all answered (s) | CONNACKs | RSS before (MiB) | peak RSS (MiB) | "
        "idle RSS (MiB) |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in args.clients:
        run(args, n)


if __name__ == "__main__":
    main()
