#!/usr/bin/env python3
"""One claims information request against N maximum-size claims (issue 16).

Fills a claim service (in this process, store in a temporary directory) with N claims of
about ``max_claim_bytes`` (16 KiB) each, from N/250 owners, every one naming the requester in
its permissions, and times ``ClaimService.claims_request`` for the requester: the event-loop
time one request costs and the size of the answer it builds. Run it with ``--root`` on an
older checkout to see the answer built before issue 16 (the whole set, in one message).

    .venv/bin/python scripts/bench_claims_request.py [--claims 2000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import fields
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--claims", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--root", default=str(Path(__file__).resolve().parent.parent))
    args = parser.parse_args()
    sys.path.insert(0, args.root)
    asyncio.run(run(args.claims, args.rounds, args.root))


async def run(n: int, rounds: int, root: str) -> None:
    from nacl.signing import SigningKey

    from edge_broker.claims.model import Activity, Permission, Restriction, RestrictionType
    from edge_broker.claims.persistence import KeyedClaimStore
    from edge_broker.claims.service import ClaimService
    from edge_broker.claims.signature import sign_restriction
    from edge_broker.claims.smoker_id import smoker_id
    from edge_broker.claims.throttle import ThrottleLimits
    from edge_broker.identity import Identity

    limits = ThrottleLimits()
    # no rate limit on requests either: this measures one request's cost (older checkouts
    # have no request_rate at all)
    unlimited_requests = (
        {"request_rate": 1e9, "request_burst": 1e9}
        if "request_rate" in {f.name for f in fields(ThrottleLimits)}
        else {}
    )
    roomy = ThrottleLimits(
        max_claims_total=10**9,
        max_claims_bytes=1 << 40,
        client_rate=1e9,
        client_burst=1e9,
        store_writes_per_second=1e9,
        store_burst=1e9,
        **unlimited_requests,
    )
    requester_key = SigningKey.generate()
    requester = smoker_id(requester_key.verify_key)
    filler = [smoker_id(SigningKey.generate().verify_key) for _ in range(200)]

    def big_claim(key: SigningKey, owner: str, i: int) -> bytes:
        perms = [Permission(requester, Activity.SUBSCRIBE)]
        for who in filler:  # as many permissions as fit in max_claim_bytes
            candidate = (*perms, Permission(who, Activity.PUBLISH))
            text = sign_restriction(
                key,
                Restriction(f"restricted/{owner}/t{i:05d}", RestrictionType.WHITELIST, candidate),
            ).to_json()
            if len(text.encode()) > limits.max_claim_bytes:
                break
            perms = list(candidate)
        r = Restriction(f"restricted/{owner}/t{i:05d}", RestrictionType.WHITELIST, tuple(perms))
        return sign_restriction(key, r).to_json().encode()

    with tempfile.TemporaryDirectory() as tmp:
        store = KeyedClaimStore.open(str(Path(tmp) / "claims.log"), fsync="never")
        service = ClaimService(store, roomy)
        keys = [SigningKey.generate() for _ in range((n + 249) // 250)]
        template: dict[int, bytes] = {}
        for i in range(n):
            key = keys[i // 250]
            owner = smoker_id(key.verify_key)
            payload = template.get(i // 250)
            if payload is None:
                payload = template[i // 250] = big_claim(key, owner, 0)
            # the same permissions for every claim of an owner: sign each topic once
            r = Restriction(
                f"restricted/{owner}/t{i:05d}", RestrictionType.WHITELIST, _perms(payload)
            )
            outcome = await service.claim(
                Identity(client_id=owner, method="smoker", smoker_id=owner),
                1,
                sign_restriction(key, r).to_json().encode(),
            )
            assert outcome.reason_code == 0, outcome
        size = len(payload)
        rows = []
        stranger = smoker_id(SigningKey.generate().verify_key)  # named in no claim: a full scan
        for who, label in ((requester, "named in every claim"), (stranger, "named in none")):
            me = Identity(client_id=who, method="smoker", smoker_id=who)
            request = f"access/claims/{who}/request"
            response = f"restricted/{who}/claims"
            times = []
            answer = b""
            for _ in range(rounds):
                started = time.perf_counter()
                _outcome, answer_or_none = service.claims_request(me, request, response)
                times.append(time.perf_counter() - started)
                answer = answer_or_none or b""
            rows.append(
                f"| {n} | {size} B | {label} | {statistics.median(times) * 1000:.1f} ms "
                f"| {len(answer):,} |"
            )
        await store.aclose()
    print(f"broker: {root}")
    print(f"| claims | claim size | requester | request time (median of {rounds}) | answer bytes |")
    print("|---|---|---|---|---|")
    print("\n".join(rows))


def _perms(payload: bytes) -> tuple:  # type: ignore[type-arg]
    import json

    from edge_broker.claims.model import Activity, Permission

    body = json.loads(payload)
    return tuple(
        Permission(p["clientId"], Activity(p["activity"]))
        for p in body["restriction"]["permissions"]
    )


if __name__ == "__main__":
    main()
