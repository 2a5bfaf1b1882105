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
- memory: bytes held per loaded claim (claim index plus the log's key index).
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import tempfile
import time
import tracemalloc
from pathlib import Path

from nacl.signing import SigningKey

from edge_broker.auth.identity import Identity
from edge_broker.claims.evaluate import evaluate_claim
from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore, record_value
from edge_broker.claims.service import ClaimService
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.claims.throttle import FloodGuard, ThrottleLimits

UNLIMITED = ThrottleLimits(
    max_claim_bytes=1 << 20,
    max_claims_per_client=10**9,
    max_claims_total=10**9,
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
    if n <= 20_000:
        tracemalloc.start()
        measured = ClaimService(KeyedClaimStore.open(str(path), readonly=True))
        held, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(measured) == n
        print(f"memory: {held / n:,.0f} B per claim (index and store's key index, tracemalloc)")


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--verify", type=int, default=20_000)
    parser.add_argument("--evaluate", type=int, default=5_000)
    parser.add_argument("--durable", type=int, default=2_000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--load", type=int, nargs="+", default=[10_000])
    parser.add_argument("--dir", help="where the logs go (default: a temp dir; fsync costs differ)")
    args = parser.parse_args()
    print(f"# {platform.machine()} {platform.python_implementation()} {platform.python_version()}")
    bench_verify(args.verify)
    bench_evaluate(args.evaluate)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        for c in args.concurrency:
            asyncio.run(bench_durable(args.durable, c, Path(tmp)))
        for n in args.load:
            bench_load(n, Path(tmp))


if __name__ == "__main__":
    main()
