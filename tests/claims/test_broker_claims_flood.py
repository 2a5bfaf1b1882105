"""Claim floods through the live broker (SMOKER.md "Flood throttling"; seed 002 "Claim flooding"):
one client firing thousands of claims gets 0x97 for all but its burst, the broker keeps serving
other clients meanwhile, and the store grows only within the limits (default limits, fsync on)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

from claims_broker import client, restriction, running_broker
from claims_helpers import OWNER, OWNER_KEY, key

from edge_broker.claims.settings import ClaimsConfig
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.mqtt.reason_codes import ReasonCode

DEFAULTS = ClaimsConfig()
DEFAULT_LIMITS = {
    "fsync": "always",
    "client_rate": DEFAULTS.client_rate,
    "client_burst": DEFAULTS.client_burst,
    "store_writes_per_second": DEFAULTS.store_writes_per_second,
    "store_burst": DEFAULTS.store_burst,
}
FLOOD = 3000
WINDOW = 64  # claims in flight at once


async def test_one_flooding_client_gets_0x97_and_others_are_served(tmp_path: Path) -> None:
    payloads = [
        sign_restriction(OWNER_KEY, restriction(f"restricted/{OWNER}/f{i}", "WHITELIST"))
        .to_json()
        .encode()
        for i in range(FLOOD)
    ]
    async with running_broker(tmp_path, **DEFAULT_LIMITS) as (broker, port):
        async with (
            client(port, OWNER_KEY) as flooder,
            client(port, key(7)) as bystander,
        ):
            mine = f"restricted/{smoker_id(key(7).verify_key)}/ping"
            assert await bystander.subscribe(mine) == (1,)
            codes: list[int] = []
            window = asyncio.Semaphore(WINDOW)

            async def one(payload: bytes) -> None:
                async with window:
                    codes.append((await flooder.claim_payload(payload)).reason_code)

            started = time.monotonic()
            flood = asyncio.gather(*(one(p) for p in payloads))
            round_trips: list[float] = []
            while not flood.done():  # the bystander keeps publishing and receiving meanwhile
                sent = time.monotonic()
                ack = await bystander.publish(mine, b"ping", qos=1)
                assert ack is not None and ack.ok
                assert (await bystander.next_message(10)).payload == b"ping"
                round_trips.append(time.monotonic() - sent)
                await asyncio.sleep(0.01)
            await flood
            elapsed = time.monotonic() - started
            accepted = codes.count(ReasonCode.SUCCESS)
            quota = codes.count(ReasonCode.QUOTA_EXCEEDED)
            assert accepted + quota == FLOOD, set(codes)
            allowed = DEFAULTS.client_burst + DEFAULTS.client_rate * elapsed
            assert DEFAULTS.client_burst <= accepted <= allowed + 1
            assert len(round_trips) >= 2  # served during the flood, not after it
            assert broker.claims is not None
            assert len(broker.claims.service) == accepted
            assert broker.claims.store.keyed.count("tinydb:claims") == accepted
            # ~1 KB of log per stored claim (plus header): the 0x97 claims left no trace
            assert os.path.getsize(broker.claims.path) < 2048 * (accepted + 1)


async def test_the_global_write_budget_caps_many_clients(tmp_path: Path) -> None:
    limits = {
        **DEFAULT_LIMITS,
        "fsync": "never",
        "store_burst": 50.0,
        "store_writes_per_second": 1.0,
    }
    async with running_broker(tmp_path, **limits) as (broker, port):
        codes: list[int] = []

        async def claimer(n: int) -> None:
            k = key(200 + n)
            me = smoker_id(k.verify_key)
            async with client(port, k) as c:
                for i in range(10):
                    ack = await c.claim(restriction(f"restricted/{me}/t{i}", "WHITELIST"))
                    codes.append(ack.reason_code)

        await asyncio.gather(*(claimer(n) for n in range(10)))
        accepted = codes.count(ReasonCode.SUCCESS)
        assert 50 <= accepted <= 55  # the burst, plus what 1/s refilled during the test
        assert codes.count(ReasonCode.QUOTA_EXCEEDED) == 100 - accepted
        assert broker.claims is not None and len(broker.claims.service) == accepted


async def test_live_claim_limit_per_client_and_replacement(tmp_path: Path) -> None:
    async with running_broker(tmp_path, max_claims_per_client=3) as (broker, port):
        async with client(port, OWNER_KEY) as owner:
            topics = [f"restricted/{OWNER}/l{i}" for i in range(4)]
            codes = [(await owner.claim(restriction(t, "WHITELIST"))).reason_code for t in topics]
            assert codes == [0, 0, 0, ReasonCode.QUOTA_EXCEEDED]
            # replacing a claim it holds does not count; unclaiming frees a slot
            assert (await owner.claim(restriction(topics[0], "BLACKLIST"))).reason_code == 0
            assert (await owner.unclaim(topics[1])).reason_code == 0
            assert (await owner.claim(restriction(topics[3], "WHITELIST"))).reason_code == 0
            assert broker.claims is not None and len(broker.claims.service) == 3
