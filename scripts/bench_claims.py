#!/usr/bin/env python3
"""SMOKER claims benchmark: signature checks, claim evaluations, durable claims, load, decisions.

    .venv/bin/python scripts/bench_claims.py                 # quick: 10k claims
    .venv/bin/python scripts/bench_claims.py --load 10000 100000 --concurrency 1 16 64

Figures (per second unless said otherwise):
- verify: Ed25519 verifications of a typical claim's attached signature (pynacl/libsodium);
- evaluate: ``evaluate_claim`` end to end (parse, canonicalise, verify, owner, throttle);
- durable claims: ``ClaimService.claim`` on the append-only log with fsync="always", with N
  claims in flight at once (group commit shares one fsync among them);
- load: opening a store of N claims, every one re-verified (SMOKER.md "Claim store");
- decide: access decisions on a restricted topic with N claims in the index;
- memory: bytes held per loaded claim (claim index plus the log's key index);
- lazy load (what the broker does): time until the broker can serve (records read), then the
  background re-verification;
- ``--broker``: the real broker process (``python -m edge_broker run``): claims per second over
  the wire with fsync="always" (SMOKER clients, a window of claims in flight each), and publish
  throughput in the restricted area with N stored claims (a non-owner SMOKER publisher allowed by
  ``*``, a SMOKER subscriber on a wildcard: every delivery checked) against the same load on
  open topics; broker CPU µs per delivered message from /proc.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import platform
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nacl.signing import SigningKey
from procs import cpu_seconds  # noqa: E402

from edge_broker.claims.evaluate import evaluate_claim
from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore, record_value
from edge_broker.claims.service import ClaimService
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.claims.throttle import FloodGuard, ThrottleLimits
from edge_broker.identity import Identity

UNLIMITED = ThrottleLimits(
    max_claim_bytes=1 << 20,
    max_claims_per_client=10**9,
    max_claims_total=10**9,
    max_claims_bytes=1 << 40,
    client_rate=1e9,
    client_burst=1e9,
    store_writes_per_second=1e9,
    store_burst=1e9,
)
OWNER_KEY = SigningKey(bytes(range(1, 33)))
OWNER = smoker_id(OWNER_KEY.verify_key)
FRIENDS = [smoker_id(SigningKey(bytes([n]) * 32).verify_key) for n in range(1, 4)]


def restriction(i: int) -> Restriction:
    """A typical claim: whitelist, three named readers and one open writer permission."""
    perms = tuple(Permission(f, Activity.SUBSCRIBE) for f in FRIENDS) + (
        Permission("*", Activity.PUBLISH),
    )
    return Restriction(f"restricted/{OWNER}/sensors/{i}/value", RestrictionType.WHITELIST, perms)


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s ({seconds * 1e6 / count:.1f} µs each)"


def bench_verify(n: int) -> None:
    claim = sign_restriction(OWNER_KEY, restriction(0))
    key = OWNER_KEY.verify_key
    canonical = claim.restriction.canonical_bytes()
    sig = claim.signature[:64]
    start = time.perf_counter()
    for _ in range(n):
        key.verify(canonical, sig)
    print(f"verify:        {rate(n, time.perf_counter() - start)}")


class Admit:
    def __init__(self) -> None:
        self.guard = FloodGuard(UNLIMITED)

    def admit(self, owner: str, topic: str, size: int, now: float) -> str | None:
        return self.guard.admit(owner, topic, size, now, (), 0)


def bench_evaluate(n: int) -> None:
    payloads = [sign_restriction(OWNER_KEY, restriction(i)).to_json().encode() for i in range(n)]
    who = Identity(OWNER, "smoker", smoker_id=OWNER)
    throttle = Admit()
    start = time.perf_counter()
    for p in payloads:
        outcome = evaluate_claim(who, 1, p, throttle, 0.0)
        assert outcome.accepted
    print(f"evaluate:      {rate(n, time.perf_counter() - start)}  (payload {len(payloads[0])} B)")


async def bench_durable(n: int, concurrency: int, directory: Path) -> None:
    payloads = [sign_restriction(OWNER_KEY, restriction(i)).to_json().encode() for i in range(n)]
    store = KeyedClaimStore.open(str(directory / f"durable-{concurrency}.log"), fsync="always")
    service = ClaimService(store, UNLIMITED)
    who = Identity(OWNER, "smoker", smoker_id=OWNER)
    queue = iter(payloads)

    async def worker() -> None:
        for p in queue:
            outcome = await service.claim(who, 1, p)
            assert outcome.accepted, outcome

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    stats = store.keyed.stats()
    print(
        f"durable claims (fsync=always, {concurrency:>3} in flight): {rate(n, elapsed)}, "
        f"{stats.fsyncs} fsyncs"
    )
    await store.aclose()


def bench_load(n: int, directory: Path) -> None:
    path = directory / f"load-{n}.log"
    writer = KeyedClaimStore.open(str(path), fsync="never")
    for i in range(n):
        claim = sign_restriction(OWNER_KEY, restriction(i))
        writer.put_sync("~", claim.topic_name, record_value(claim, 0.0))
    writer.close()
    size = path.stat().st_size
    start = time.perf_counter()
    store = KeyedClaimStore.open(str(path), readonly=True)
    opened = time.perf_counter()
    service = ClaimService(store)
    done = time.perf_counter()
    report = service.load_report
    assert report.loaded == n and not report.quarantined
    print(
        f"load {n:>7,} claims ({size / 1e6:.1f} MB): {done - start:.2f} s "
        f"(log replay {opened - start:.2f} s, re-verify {done - opened:.2f} s)"
    )
    bench_decide(service, n)
    bench_lazy_load(path, n)
    if n <= 20_000:
        tracemalloc.start()
        measured = ClaimService(KeyedClaimStore.open(str(path), readonly=True))
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(measured) == n
        print(f"memory: {held / n:,.0f} B per claim (index and store's key index, tracemalloc)")


def bench_lazy_load(path: Path, n: int) -> None:
    async def run() -> None:
        start = time.perf_counter()
        store = KeyedClaimStore.open(str(path), readonly=True)
        service = ClaimService(store, lazy=True)
        serving = time.perf_counter()
        report = await service.verify_pending(64)
        done = time.perf_counter()
        assert report.loaded == n and report.pending == 0
        print(
            f"lazy load {n:>7,} claims: serving after {serving - start:.2f} s, "
            f"all re-verified in the background after {done - start:.2f} s"
        )

    asyncio.run(run())


def bench_decide(service: ClaimService, claims: int, rounds: int = 200_000) -> None:
    reader = Identity(FRIENDS[0], "smoker", smoker_id=FRIENDS[0])
    stranger = Identity("X", "smoker", smoker_id=smoker_id(SigningKey(b"\x09" * 32).verify_key))
    topics = [restriction(i % claims).topic_name for i in range(1000)]
    start = time.perf_counter()
    allowed = 0
    for i in range(rounds):
        who = reader if i & 1 else stranger
        allowed += service.decide(who, topics[i % 1000], Activity.SUBSCRIBE).allowed
    assert allowed == rounds // 2
    print(f"decide with {claims:,} claims: {rate(rounds, time.perf_counter() - start)}")


# -- the real broker ---------------------------------------------------------------------------

LISTENING = re.compile(r"listening on \S+:(\d+)")
PUBLISHER_KEY = SigningKey(b"\x09" * 32)  # allowed to publish by the claims' "*" PUBLISH
READER_KEY = SigningKey(bytes([1]) * 32)  # FRIENDS[0]: allowed to subscribe


def start_broker(directory: Path, fsync: str) -> tuple[subprocess.Popen[bytes], int]:
    config = directory / "bench.toml"
    config.write_text(
        '[[listeners]]\nname = "b"\nbind = "127.0.0.1"\nport = 0\n'
        'auth_methods = ["smoker", "anonymous"]\n\n[sys]\ninterval = 0\n\n'
        f"[limits]\nmax_queued_messages = 100000\nmax_queued_bytes = 100000000\n\n"
        f'[claims]\nstore_dir = "{directory}"\nfsync = "{fsync}"\nclient_rate = 1e6\n'
        "client_burst = 1e6\nstore_writes_per_second = 1e6\nstore_burst = 1e6\n"
        "max_claims_per_client = 10000000\nmax_claims_total = 100000000\n"
        "max_claims_bytes = 1099511627776\n"
    )
    log = directory / "bench.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "edge_broker", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    for _ in range(400):
        found = LISTENING.search(log.read_text(errors="replace"))
        if found:
            return process, int(found.group(1))
        time.sleep(0.05)
    process.kill()
    raise RuntimeError(log.read_text())


async def claims_over_the_wire(port: int, clients: int, per_client: int, window: int) -> None:
    from edge_broker.smoker_client import SmokerClient

    keys = [SigningKey(n.to_bytes(4, "big") * 8) for n in range(1000, 1000 + clients)]
    loads = []
    for k in keys:
        me = smoker_id(k.verify_key)
        loads.append(
            [
                sign_restriction(
                    k, Restriction(f"restricted/{me}/c/{i}", RestrictionType.WHITELIST)
                )
                .to_json()
                .encode()
                for i in range(per_client)
            ]
        )
    conns = [SmokerClient("127.0.0.1", port, k, timeout=60) for k in keys]
    for c in conns:
        await c.connect()

    async def one(c: SmokerClient, payloads: list[bytes]) -> None:
        gate = asyncio.Semaphore(window)

        async def claim(p: bytes) -> None:
            async with gate:
                assert (await c.claim_payload(p)).reason_code == 0

        await asyncio.gather(*(claim(p) for p in payloads))

    start = time.perf_counter()
    await asyncio.gather(*(one(c, p) for c, p in zip(conns, loads, strict=True)))
    elapsed = time.perf_counter() - start
    n = clients * per_client
    print(
        f"broker: durable claims over MQTT (fsync=always, {clients:>2} clients, {window} "
        f"pipelined each): {rate(n, elapsed)}"
    )
    for c in conns:
        await c.disconnect()


def subscriber(
    port: int, topic_filter: str, count: int, queue: multiprocessing.Queue[float]
) -> None:
    from edge_broker.smoker_client import SmokerClient

    async def run() -> None:
        async with SmokerClient("127.0.0.1", port, READER_KEY, timeout=60) as c:
            await c.subscribe(topic_filter, qos=0)
            queue.put(0.0)  # subscribed
            await c.next_message(60)
            start = time.perf_counter()
            for _ in range(count - 1):
                await c.next_message(10)
            queue.put(time.perf_counter() - start)

    asyncio.run(run())


async def publish_stream(port: int, topics: list[str], count: int) -> None:
    from edge_broker.mqtt.codec import encode
    from edge_broker.mqtt.packets import Publish
    from edge_broker.smoker_client import SmokerClient

    packets = [encode(Publish(t, b"21.5"), 5) for t in topics]
    async with SmokerClient("127.0.0.1", port, PUBLISHER_KEY, timeout=60) as c:
        writer = c._writer
        assert writer is not None
        for i in range(0, count, 200):
            writer.write(b"".join(packets[(i + j) % len(packets)] for j in range(200)))
            await writer.drain()
        await asyncio.sleep(0.5)


def bench_restricted_publish(directory: Path, claims: int, count: int) -> None:
    writer = KeyedClaimStore.open(str(directory / "claims.log"), fsync="never")
    for i in range(claims):
        claim = sign_restriction(OWNER_KEY, restriction(i))
        writer.put_sync("~", claim.topic_name, record_value(claim, 0.0))
    writer.close()
    process, port = start_broker(directory, "always")
    try:
        time.sleep(0.5 + claims / 4000)  # let the background re-verification finish
        for label, topics, topic_filter in (
            ("open topics", [f"open/{i}/value" for i in range(1000)], "open/+/value"),
            (
                f"restricted, {claims:,} claims",
                [restriction(i * 7 % claims).topic_name for i in range(1000)],
                "restricted/+/sensors/+/value",
            ),
        ):
            queue: multiprocessing.Queue[float] = multiprocessing.Queue()
            sub = multiprocessing.Process(
                target=subscriber, args=(port, topic_filter, count, queue)
            )
            sub.start()
            queue.get(timeout=30)
            cpu = cpu_seconds(process.pid)
            asyncio.run(publish_stream(port, topics, count + 100))
            elapsed = queue.get(timeout=120)
            used = cpu_seconds(process.pid) - cpu
            sub.join(10)
            print(
                f"broker: publish 1→1 QoS 0, {label}: {rate(count, elapsed)} delivered, "
                f"broker CPU {used * 1e6 / (count + 100):.1f} µs/message"
            )
    finally:
        process.terminate()
        process.wait(10)


def bench_broker(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        process, port = start_broker(Path(tmp), "always")
        try:
            for clients in args.wire_clients:
                asyncio.run(claims_over_the_wire(port, clients, args.durable // clients, 16))
        finally:
            process.terminate()
            process.wait(10)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        bench_restricted_publish(Path(tmp), args.publish_claims, args.messages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verify", type=int, default=20_000)
    parser.add_argument("--evaluate", type=int, default=5_000)
    parser.add_argument("--durable", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--load", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dir", help="where the logs go (default: a temp dir; fsync costs differ)")
    parser.add_argument("--broker", action="store_true", help="also measure the broker process")
    parser.add_argument("--broker-only", action="store_true", help="only the broker figures")
    parser.add_argument("--publish-claims", type=int, default=10_000)
    parser.add_argument("--wire-clients", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--messages", type=int, default=50_000)
    args = parser.parse_args()
    if args.broker_only:
        bench_broker(args)
        return
    print(f"# {platform.machine()} {platform.python_implementation()} {platform.python_version()}")
    bench_verify(args.verify)
    bench_evaluate(args.evaluate)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for c in args.concurrency:
            asyncio.run(bench_durable(args.durable, c, Path(tmp)))
        for n in args.load:
            bench_load(n, Path(tmp))
    if args.broker:
        bench_broker(args)


if __name__ == "__main__":
    main()
