#!/usr/bin/env python3
"""Logins fair between sources (issue 31 item 4): one address floods wrong passwords while
real devices log in from other addresses. Not a test: figures for docs/limits-admission.md.

Starts ``python -m edge_broker run`` (defaults, one ``password`` listener on 127.0.0.1, a
password file of N devices ``dev-<i>`` / ``pw-<i>`` made with the broker's argon2id
parameters). The adversary binds 127.0.0.2 and keeps ``--flood`` CONNECTs outstanding, each
for a new unknown user with a wrong password, reconnecting as soon as it is answered (as fast
as the broker lets it). After ``--warmup`` seconds of flood, while it goes on:

1. cold: the N devices CONNECT at once, device i from 127.0.0.(3 + i); a device refused
   (0x89 / 0x9F) tries again after 0.5 s. Measured: how many got in at the first attempt,
   and the time until all N are in;
2. warm: all disconnect and connect again at once (the credential cache): refusals;
3. after a reload (SIGHUP, file unchanged): the same again, so the cache must have survived.

The adversary's answers are counted by reason code. ``--root`` runs another checkout's broker
(for the figures before). Load context matters (argon2id is CPU-bound): say what else ran.

    .venv/bin/python scripts/bench_login_fairness.py --devices 200
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from bench_logins import launch, password_file  # noqa: E402

from edge_broker.mqtt.codec import PacketReader, encode  # noqa: E402
from edge_broker.mqtt.packets import Connack, Connect, Disconnect  # noqa: E402

ADVERSARY = "127.0.0.2"
RETRY_AFTER = 0.5


def name(code: int) -> str:
    return f"0x{code:02X}" if code >= 0 else {-1: "no CONNACK", -2: "no connection"}[code]


def device_address(i: int) -> str:
    n = 3 + i
    return f"127.0.{n // 250}.{n % 250 + 1}" if n >= 250 else f"127.0.0.{n}"


def start_broker(
    root: Path, workdir: Path, passwd: Path
) -> tuple[subprocess.Popen[bytes], int, Path]:
    return launch(
        root,
        workdir,
        f'[passwords]\nfile = "{passwd}"\n\n'
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\nauth_methods = ["password"]\n',
    )


async def connect(
    port: int, source: str, client_id: str, user: str, password: bytes
) -> tuple[int, asyncio.StreamWriter | None]:
    """(CONNACK reason code, or -1 without one; the open writer when accepted)."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    except OSError:
        return -2, None
    writer.write(encode(Connect(5, client_id, True, 600, username=user, password=password), 5))
    packets = PacketReader(side="client", protocol_level=5)
    try:
        while True:
            data = await reader.read(4096)
            if not data:
                break
            for packet in packets.feed(data):
                if isinstance(packet, Connack):
                    if packet.reason_code == 0:
                        return 0, writer
                    writer.close()
                    return packet.reason_code, None
    except OSError:
        pass
    writer.close()
    return -1, None


async def flood(port: int, outstanding: int, answers: Counter[int], stop: asyncio.Event) -> None:
    ids = itertools.count()

    async def one() -> None:
        while not stop.is_set():
            n = next(ids)
            code, writer = await connect(port, ADVERSARY, f"evil-{n}", f"nobody-{n}", b"guess")
            answers[code] += 1
            if writer is not None:
                writer.close()

    await asyncio.gather(*(one() for _ in range(outstanding)))


async def device(
    port: int, i: int, started: float, retry: bool
) -> tuple[int, float, int, asyncio.StreamWriter | None]:
    """(first answer, seconds until in (or inf), attempts, writer)."""
    first = None
    attempts = 0
    while True:
        attempts += 1
        code, writer = await connect(
            port, device_address(i), f"dev-{i}", f"dev-{i}", f"pw-{i}".encode()
        )
        first = code if first is None else first
        if code == 0:
            return first, time.monotonic() - started, attempts, writer
        if not retry or time.monotonic() - started > 60:
            return first, float("inf"), attempts, None
        await asyncio.sleep(RETRY_AFTER)


async def phase(port: int, n: int, retry: bool) -> dict[str, object]:
    started = time.monotonic()
    results = await asyncio.gather(*(device(port, i, started, retry) for i in range(n)))
    writers = [w for *_, w in results if w is not None]
    for w in writers:
        w.write(encode(Disconnect(0), 5))
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
    firsts = Counter(first for first, *_ in results)
    return {
        "first_try_accepted": firsts.get(0, 0),
        "first_try_refused": {
            f"0x{c:02X}" if c >= 0 else str(c): k for c, k in firsts.items() if c
        },
        "all_in_s": max(at for _, at, _, _ in results),
        "attempts": sum(a for _, _, a, _ in results),
    }


async def scenario(
    port: int, proc: subprocess.Popen[bytes], log: Path, args: argparse.Namespace
) -> None:
    answers: Counter[int] = Counter()
    stop = asyncio.Event()
    attack = asyncio.ensure_future(flood(port, args.flood, answers, stop))
    await asyncio.sleep(args.warmup)
    flood_started, before = time.monotonic(), sum(answers.values())
    print("cold  ", await phase(port, args.devices, retry=True), flush=True)
    print("warm  ", await phase(port, args.devices, retry=False), flush=True)
    proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while "policy applied" not in log.read_text(errors="replace") and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    print("reload", await phase(port, args.devices, retry=False), flush=True)
    rate = (sum(answers.values()) - before) / (time.monotonic() - flood_started)
    stop.set()
    attack.cancel()
    try:
        await attack
    except asyncio.CancelledError:
        pass
    named = {name(c): k for c, k in sorted(answers.items())}
    print(f"adversary: {rate:.0f} answered CONNECTs/s during the phases; answers {named}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=200)
    parser.add_argument("--flood", type=int, default=64, help="adversary CONNECTs outstanding")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of flood before")
    parser.add_argument("--root", default=str(ROOT), help="the checkout whose broker runs")
    args = parser.parse_args()
    passwd = password_file(args.devices, False)
    with tempfile.TemporaryDirectory() as tmp:
        proc, port, log = start_broker(Path(args.root), Path(tmp), passwd)
        try:
            time.sleep(0.5)
            asyncio.run(scenario(port, proc, log, args))
        finally:
            proc.terminate()
            proc.wait(15)


if __name__ == "__main__":
    main()
