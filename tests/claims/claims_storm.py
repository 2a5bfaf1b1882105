"""A claim storm for the crash test: ``python claims_storm.py LOG`` claims topics without end,
64 at a time, on a ClaimService over ``LOG`` (fsync always), and prints ``ACK <topic>`` the
moment each claim is answered 0x00 — the moment a broker would send PUBACK 0x00."""

from __future__ import annotations

import asyncio
import sys

from claims_helpers import OWNER, OWNER_KEY, claim_payload, restriction, smoker_identity

from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.claims.throttle import ThrottleLimits
from edge_broker.mqtt.reason_codes import ReasonCode

LIMITS = ThrottleLimits(
    max_claims_per_client=10**9,
    max_claims_total=10**9,
    client_rate=1e9,
    client_burst=1e9,
    store_writes_per_second=1e9,
    store_burst=1e9,
)


async def storm(path: str) -> None:
    service = ClaimService(KeyedClaimStore.open(path, fsync="always"), LIMITS)
    who = smoker_identity()
    counter = iter(range(10**9))

    async def worker() -> None:
        for i in counter:
            topic = f"restricted/{OWNER}/storm/{i}"
            outcome = await service.claim(who, 1, claim_payload(restriction(topic), OWNER_KEY))
            if outcome.reason_code is ReasonCode.SUCCESS:
                sys.stdout.write(f"ACK {topic}\n")
                sys.stdout.flush()

    await asyncio.gather(*(worker() for _ in range(64)))


if __name__ == "__main__":
    asyncio.run(storm(sys.argv[1]))
