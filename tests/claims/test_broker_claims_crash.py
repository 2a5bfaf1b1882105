"""Crash safety of claims in the real broker process (issue 6 "Crash safety"): kill -9 during a
claim storm from several SMOKER clients, restart: every claim that was answered PUBACK 0x00 is
present and verified. Torn tails and flipped bits in the claim log are detected, reported in the
broker's log, and the broker starts and serves the intact claims."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

from claims_broker import client, restriction
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY, key

from edge_broker.claims.model import Claim
from edge_broker.claims.persistence import CLAIMS_LOG, KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClientError

STORMERS = 8
WANTED = 200  # acknowledged claims before the kill


def config(store: Path, fsync: str = "always") -> dict[str, Any]:
    return {
        "listeners": [{"name": "t", "bind": "127.0.0.1", "auth_methods": ["smoker", "anonymous"]}],
        "claims": {
            "store_dir": str(store),
            "fsync": fsync,
            "client_rate": 1e6,
            "client_burst": 1e6,
            "store_writes_per_second": 1e6,
            "store_burst": 1e6,
            "max_claims_per_client": 100000,
            "max_claims_total": 1000000,
        },
    }


async def test_kill_9_during_a_claim_storm_loses_no_acknowledged_claim(
    tmp_path: Path, broker_factory: Any
) -> None:
    store = tmp_path / "store"
    broker = broker_factory(config(store))
    acked: list[str] = []
    killed = asyncio.Event()

    async def stormer(n: int) -> None:
        k = key(300 + n)
        me = smoker_id(k.verify_key)
        try:
            async with client(broker.port, k) as c:
                i = 0
                while not killed.is_set():
                    batch = [f"restricted/{me}/s{i + j}" for j in range(8)]
                    i += 8
                    acks = await asyncio.gather(
                        *(c.claim(restriction(t, "WHITELIST", (OTHER, "SUBSCRIBE"))) for t in batch)
                    )
                    acked.extend(
                        t
                        for t, a in zip(batch, acks, strict=True)
                        if a.reason_code == ReasonCode.SUCCESS
                    )
        except (SmokerClientError, OSError, ConnectionError, TimeoutError):
            assert killed.is_set()  # only the kill may end a stormer

    storm = asyncio.gather(*(stormer(n) for n in range(STORMERS)))
    while len(acked) < WANTED:
        await asyncio.sleep(0.01)
        assert not storm.done(), storm
    killed.set()
    broker.stop(signal.SIGKILL)  # claims and fsyncs are in flight right now
    await storm
    survivors = list(acked)
    assert len(survivors) >= WANTED

    path = store / CLAIMS_LOG
    offline = KeyedClaimStore.open(str(path), readonly=True)
    service = ClaimService(offline)
    assert service.load_report.quarantined == ()
    missing = [t for t in survivors if not isinstance(service.lookup(t), Claim)]
    assert missing == []
    offline.close()

    again = broker_factory(config(store))
    sample = survivors[len(survivors) // 2]
    async with client(again.port, OTHER_KEY) as other:
        assert await other.subscribe(sample) == (1,)  # whitelisted by the surviving claim
    assert "claims verified" in again.log()


async def test_torn_tail_and_flipped_bits_are_reported_and_the_broker_starts(
    tmp_path: Path, broker_factory: Any
) -> None:
    store = tmp_path / "store"
    first = broker_factory(config(store))
    topics = [f"restricted/{OWNER}/t{i}" for i in range(30)]
    async with client(first.port, OWNER_KEY) as owner:
        for t in topics:
            ack = await owner.claim(restriction(t, "WHITELIST", (OTHER, "SUBSCRIBE")))
            assert ack.reason_code == ReasonCode.SUCCESS
    assert first.stop() == 0

    path = store / CLAIMS_LOG
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10  # a flipped bit inside some record
    path.write_bytes(bytes(data) + b"\x00\x00\x01\x00torn-tail")  # a torn last append
    second = broker_factory(config(store))
    log = second.log()
    assert "claim store recovery" in log, log
    async with client(second.port, OTHER_KEY) as other:
        codes = await other.subscribe(topics)
    granted = [t for t, c in zip(topics, codes, strict=True) if c < 0x80]
    assert len(granted) == len(topics) - 1  # exactly the damaged record is gone
    async with client(second.port, OWNER_KEY) as owner:  # and the store takes new claims
        lost = next(t for t, c in zip(topics, codes, strict=True) if c >= 0x80)
        ack = await owner.claim(restriction(lost, "WHITELIST", (OTHER, "SUBSCRIBE")))
        assert ack.reason_code == ReasonCode.SUCCESS
    assert second.stop() == 0
