"""The byte pool of live claims, ``[claims] max_claims_bytes`` (claims/pool.py): what a claim is
charged, refusals that leave the store and the accepted claims untouched, the tenant's share of
the bytes, and a pool that never drifts from the sum of the live claims across random claims,
replacements, unclaims, revocations and restarts."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from claims_helpers import key, restriction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edge_broker.claims.model import Activity, Claim, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.pool import (
    CLAIM_OVERHEAD,
    claim_charge,
    document_charge,
    wire_bytes,
)
from edge_broker.claims.service import ClaimService
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.claims.throttle import ThrottleLimits
from edge_broker.identity import Identity
from edge_broker.mqtt.reason_codes import ReasonCode

KEYS = [key(n) for n in range(3)]
IDS = [smoker_id(k.verify_key) for k in KEYS]
NAMED = [smoker_id(key(100 + n).verify_key) for n in range(8)]
ROOMY = {"client_burst": 1e6, "store_burst": 1e6}


def signed(owner: int, topic: int, named: int, kind: str = "WHITELIST") -> Claim:
    """A claim of ``IDS[owner]`` on its topic ``t<topic>`` naming ``named`` clients."""
    perms = [(NAMED[i], Activity.SUBSCRIBE) for i in range(named)]
    topic_name = f"restricted/{IDS[owner]}/t{topic}"
    r = restriction(topic_name, RestrictionType(kind), *perms, owner=IDS[owner])
    return sign_restriction(KEYS[owner], r)


def who(owner: int, tenant: str = "~") -> Identity:
    me = IDS[owner]
    return Identity(client_id=me, method="smoker", smoker_id=me, tenant=tenant)


def open_service(path: Path, limits: ThrottleLimits, lazy: bool = False) -> ClaimService:
    store = KeyedClaimStore.open(str(path / "claims.log"), fsync="never")
    return ClaimService(store, limits, lazy=lazy)


async def close(service: ClaimService) -> None:
    assert isinstance(service.store, KeyedClaimStore)
    await service.store.aclose()


def live_charges(service: ClaimService) -> dict[str, int]:
    """tenant -> the charges of its claims in the index, computed afresh from the records."""
    sums: dict[str, int] = {}
    for tenant in service.tenants():
        sums[tenant] = sum(claim_charge(r) for r in service.records(tenant) if isinstance(r, Claim))
    return sums


@given(st.integers(0, 3), st.booleans())
def test_the_wire_size_is_that_of_the_canonical_claim(named: int, blacklist: bool) -> None:
    claim = signed(0, 0, named, "BLACKLIST" if blacklist else "WHITELIST")
    canonical = len(claim.restriction.canonical_bytes())
    assert wire_bytes(canonical) == len(claim.to_json().encode())
    assert claim_charge(claim) == CLAIM_OVERHEAD + int(1.6 * len(claim.to_json().encode()))
    document = {"restriction": claim.restriction.canonical_bytes().decode(), "signature": b""}
    assert document_charge(document) == claim_charge(claim)  # what a restart recharges
    assert document_charge({"nothing": 1}) == CLAIM_OVERHEAD


async def test_a_claim_over_the_pool_is_refused_and_nothing_is_lost(tmp_path: Path) -> None:
    small, big = signed(0, 0, 0), signed(0, 1, 8)
    pool = claim_charge(small) + claim_charge(big) - 1  # both do not fit
    service = open_service(tmp_path, ThrottleLimits(max_claims_bytes=pool, **ROOMY))
    assert (await service.claim(who(0), 1, small.to_json().encode())).accepted
    refused = await service.claim(who(0), 1, big.to_json().encode())
    assert refused.reason_code is ReasonCode.QUOTA_EXCEEDED
    reason = refused.reason_string or ""
    assert f"claims.max_claims_bytes is {pool}" in reason
    assert f"the live claims would hold {pool + 1} B (this claim {claim_charge(big)} B)" in reason
    assert service.lookup(small.topic_name) == small and service.lookup(big.topic_name) is None
    assert service.store.keyed.count("tinydb:claims") == 1  # type: ignore[attr-defined]
    assert service.pool_used() == service.pool_stored() == claim_charge(small)
    # replacing the small claim by the big one releases the small one's bytes: it fits
    bigger = signed(0, 0, 8)
    assert (await service.claim(who(0), 1, bigger.to_json().encode())).accepted
    assert service.pool_stored() == claim_charge(bigger)
    # and the unclaim gives them back
    assert (await service.unclaim(who(0), 1, bigger.topic_name.encode())).accepted
    assert service.pool_stored() == 0 and service.pool_stored("~") == 0
    assert (await service.claim(who(0), 1, big.to_json().encode())).accepted
    await close(service)


async def test_a_tenant_holds_at_most_its_share_of_the_bytes(tmp_path: Path) -> None:
    claim = signed(0, 0, 4)
    charge = claim_charge(claim)
    limits = ThrottleLimits(max_claims_bytes=4 * charge, tenant_share=0.5, **ROOMY)
    service = open_service(tmp_path, limits)
    codes, reasons = [], []
    for topic in range(4):
        c = signed(0, topic, 4)
        outcome = await service.claim(who(0, "acme"), 1, c.to_json().encode())
        codes.append(outcome.reason_code)
        reasons.append(outcome.reason_string or "")
    assert codes == [ReasonCode.SUCCESS] * 2 + [ReasonCode.QUOTA_EXCEEDED] * 2
    assert f"tenant 'acme' would hold {3 * charge} B of live claims" in reasons[2]
    assert (
        f"its share is {2 * charge} B (limits.tenant_share 0.5 of claims.max_claims_bytes"
        in (reasons[2])
    )
    # another tenant still claims within its own share
    outcome = await service.claim(who(1, "globex"), 1, signed(1, 0, 4).to_json().encode())
    assert outcome.reason_code is ReasonCode.SUCCESS
    assert service.pool_stored("acme") == 2 * charge and service.pool_stored() == 3 * charge
    await close(service)


async def test_concurrent_claims_reserve_their_bytes(tmp_path: Path) -> None:
    """Claims still being written count: a burst cannot overshoot the pool."""
    charge = claim_charge(signed(0, 0, 2))
    service = open_service(tmp_path, ThrottleLimits(max_claims_bytes=3 * charge, **ROOMY))
    payloads = [signed(0, t, 2).to_json().encode() for t in range(8)]
    outcomes = await asyncio.gather(*(service.claim(who(0), 1, p) for p in payloads))
    assert sum(o.accepted for o in outcomes) == 3
    assert service.pool_stored() == 3 * charge == service.pool_used()
    await close(service)


TENANTS = st.sampled_from(["~", "acme"])
OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("claim"),
            st.integers(0, 2),  # owner
            st.integers(0, 3),  # topic
            st.integers(0, 8),  # clients named
            TENANTS,
        ),
        st.tuples(
            st.just("unclaim"), st.integers(0, 2), st.integers(0, 3), st.just(0), st.just("~")
        ),
        st.tuples(
            st.just("revoke"), st.integers(0, 2), st.integers(0, 3), st.just(0), st.just("acme")
        ),
        st.tuples(st.just("restart"), st.just(0), st.just(0), st.booleans(), st.just("~")),
    ),
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(3, 12), st.sampled_from([1.0, 0.6]))
def test_the_pool_never_drifts_from_the_live_claims(
    ops: list[tuple[str, int, int, int, str]], pool_claims: int, share: float
) -> None:
    """Random claims (new and replacing), unclaims, operator revocations and restarts (eager
    and lazy): the pool is always the sum of the live claims' charges, per tenant and in
    total, never above ``max_claims_bytes`` or a tenant's share, and what the test's own
    model of the accepted claims says."""
    limits = ThrottleLimits(
        max_claims_bytes=pool_claims * CLAIM_OVERHEAD * 2, tenant_share=share, **ROOMY
    )

    async def run(path: Path) -> None:
        service = open_service(path, limits)
        model: dict[tuple[str, str], int] = {}
        for op, owner, topic, extra, tenant in ops:
            name = f"restricted/{IDS[owner]}/t{topic}"
            if op == "claim":
                claim = signed(owner, topic, extra)
                outcome = await service.claim(who(owner, tenant), 1, claim.to_json().encode())
                if outcome.accepted:
                    model[(tenant, name)] = claim_charge(claim)
                else:
                    assert outcome.reason_code is ReasonCode.QUOTA_EXCEEDED
                    assert "claims.max_claims_bytes" in (outcome.reason_string or "")
            elif op == "unclaim":
                assert (await service.unclaim(who(owner, tenant), 1, name.encode())).accepted
                model.pop((tenant, name), None)
            elif op == "revoke":
                await service.revoke(tenant, name)
                model.pop((tenant, name), None)
            else:
                await close(service)
                service = open_service(path, limits, lazy=bool(extra))
                assert service.pool_stored() == sum(model.values())  # before verification
            service.verify_all()
            fresh = live_charges(service)
            assert service.pool_stored() == sum(fresh.values()) == sum(model.values())
            assert service.pool_used() == service.pool_stored()  # nothing in flight
            for t, total in fresh.items():
                assert service.pool_stored(t) == total
                assert total == sum(c for (mt, _), c in model.items() if mt == t)
                assert total <= limits.max_claims_bytes * share or share == 1.0
            assert service.pool_stored() <= limits.max_claims_bytes
        await close(service)

    with tempfile.TemporaryDirectory() as d:
        asyncio.run(run(Path(d)))


def test_max_claims_bytes_is_read_from_the_config_and_checked() -> None:
    from edge_broker.claims.runtime import throttle_limits
    from edge_broker.config import ConfigError, loads_config

    config = loads_config("[claims]\nmax_claims_bytes = 1048576\n")
    assert config.claims.max_claims_bytes == 1048576
    assert throttle_limits(config.claims).max_claims_bytes == 1048576
    assert ThrottleLimits().max_claims_bytes == loads_config("").claims.max_claims_bytes
    try:
        loads_config("[claims]\nmax_claims_bytes = 100\n")
    except ConfigError as exc:
        assert [p.key for p in exc.problems] == ["claims.max_claims_bytes"]
    else:
        raise AssertionError("max_claims_bytes = 100 was accepted")
