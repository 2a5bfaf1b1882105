"""The claims byte pool through the live broker with real SMOKER clients, at the shipped
``[claims]`` defaults (16 KiB claims, 10,000 claims, ``max_claims_bytes`` 4 MiB, ``[limits]
tenant_share`` 0.5): an adversary that fills its tenant's share of the pool with claims of the
largest size gets 0x97 naming ``claims.max_claims_bytes``, and a victim device of another tenant
still stores its small claim."""

from __future__ import annotations

from pathlib import Path

from claims_broker import restriction, running_broker
from claims_helpers import OWNER, OWNER_KEY, key

from edge_broker.broker.sys_topics import limit_values
from edge_broker.claims.pool import claim_charge
from edge_broker.claims.settings import ClaimsConfig
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.mqtt.reason_codes import ReasonCode
from edge_broker.smoker_client import SmokerClient

DEFAULTS = ClaimsConfig()
ADVERSARY = key(66)
NAMED = [smoker_id(key(1000 + n).verify_key) for n in range(200)]


def claim(topic: str, named: int) -> bytes:
    perms = [(c, "SUBSCRIBE") for c in NAMED[:named]]
    return sign_restriction(ADVERSARY, restriction(topic, "WHITELIST", *perms)).to_json().encode()


def largest(topic: str) -> int:
    """How many clients a claim of ``ADVERSARY`` on ``topic`` names within max_claim_bytes."""
    fits = [n for n in range(len(NAMED)) if len(claim(topic, n)) <= DEFAULTS.max_claim_bytes]
    assert fits[-1] < len(NAMED) - 1, "NAMED is too short to fill a claim"
    return fits[-1]


async def test_an_adversary_fills_its_share_and_a_victim_still_claims(tmp_path: Path) -> None:
    me = smoker_id(ADVERSARY.verify_key)
    named = largest(f"restricted/{me}/t00")
    assert DEFAULTS.max_claim_bytes - 400 < len(claim(f"restricted/{me}/t00", named))
    async with running_broker(tmp_path, tenant_choice="open") as (broker, port):
        assert broker.claims is not None
        service = broker.claims.service
        share = int(DEFAULTS.max_claims_bytes * broker.config.limits.tenant_share)
        async with SmokerClient("127.0.0.1", port, ADVERSARY, tenant="evil", timeout=5) as bad:
            codes: list[int] = []
            refusal = None
            for i in range(share // 20_000 + 5):  # more than the share can hold
                ack = await bad.claim_payload(claim(f"restricted/{me}/t{i:02}", named))
                codes.append(ack.reason_code)
                if ack.reason_code == ReasonCode.QUOTA_EXCEEDED:
                    refusal = ack.reason_string
                    break
            assert refusal is not None, codes
            assert "claims.max_claims_bytes" in refusal and "tenant 'evil'" in refusal
            stored = codes.count(ReasonCode.SUCCESS)
            assert service.live_in_tenant("evil") == stored > 0
            assert service.pool_stored("evil") <= share < service.pool_stored("evil") + 30_000
        async with SmokerClient("127.0.0.1", port, OWNER_KEY, tenant="home", timeout=5) as victim:
            small = restriction(f"restricted/{OWNER}/temperature", "WHITELIST")
            ack = await victim.claim(small)
            assert ack.reason_code == ReasonCode.SUCCESS, ack
        record = service.lookup(f"restricted/{OWNER}/temperature", "home")
        assert record is not None and service.pool_stored("home") == claim_charge(record)
        # what an operator reads of the pool: $SYS/broker/limits/claims/... and the stats the
        # metrics endpoint serves
        values = limit_values(broker)
        assert values["limits/claims/count"] == str(len(service)) == str(stored + 1)
        assert values["limits/claims/bytes"] == str(service.pool_used())
        stats = broker.claims.stats()
        assert stats.pool_bytes == service.pool_stored() > share
        assert stats.pool_limit == DEFAULTS.max_claims_bytes
