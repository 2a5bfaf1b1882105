"""The claim service on the real append-only store (``store.KeyedLog`` in a temporary dir)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from claims_helpers import (
    OTHER,
    OTHER_KEY,
    OWNER,
    OWNER_KEY,
    THIRD,
    claim_payload,
    key,
    plain_identity,
    restriction,
    smoker_identity,
)

from edge_broker.claims.access import Quarantined
from edge_broker.claims.model import Activity, Claim, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore, record_value
from edge_broker.claims.service import ClaimService
from edge_broker.claims.signature import sign_restriction
from edge_broker.claims.smoker_id import smoker_id
from edge_broker.claims.throttle import ThrottleLimits
from edge_broker.identity import Identity
from edge_broker.mqtt.reason_codes import ReasonCode

TOPIC = f"restricted/{OWNER}/temperature"
WL, BL = RestrictionType.WHITELIST, RestrictionType.BLACKLIST
PUB, SUB = Activity.PUBLISH, Activity.SUBSCRIBE
ROOMY = ThrottleLimits(client_burst=10_000, store_burst=10_000)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def open_service(
    path: Path, limits: ThrottleLimits = ROOMY, clock: Clock | None = None
) -> ClaimService:
    store = KeyedClaimStore.open(str(path / "claims.log"))
    return ClaimService(store, limits, clock=clock or Clock())


async def close(service: ClaimService) -> None:
    assert isinstance(service.store, KeyedClaimStore)
    await service.store.aclose()


def appends(service: ClaimService) -> int:
    assert isinstance(service.store, KeyedClaimStore)
    return service.store.keyed.stats().appends


async def test_claim_is_durable_and_verified_after_reopen(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    payload = claim_payload(restriction(TOPIC, WL, (OTHER, SUB)))
    outcome = await service.claim(smoker_identity(), 1, payload)
    assert outcome.reason_code is ReasonCode.SUCCESS
    assert service.decide(smoker_identity(OTHER), TOPIC, SUB).allowed
    assert not service.decide(smoker_identity(OTHER), TOPIC, PUB).allowed
    await close(service)

    again = open_service(tmp_path)
    assert again.load_report.loaded == 1 and again.load_report.quarantined == ()
    record = again.lookup(TOPIC)
    assert isinstance(record, Claim) and record == outcome.claim
    assert again.decide(smoker_identity(OTHER), TOPIC, SUB).allowed
    await close(again)


async def test_update_replaces_and_applies_at_the_next_decision(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    other = smoker_identity(OTHER)
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, BL)))
    assert service.decide(other, TOPIC, SUB).allowed
    generation = service.generation
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, BL, (OTHER, SUB))))
    assert service.generation > generation
    assert not service.decide(other, TOPIC, SUB).allowed
    assert service.decide(smoker_identity(THIRD), TOPIC, SUB).allowed
    assert len(service) == 1 and service.live_topics("~", OWNER) == {TOPIC}
    await close(service)


async def test_unclaim_removes_durably_and_nothing_to_remove_writes_nothing(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, BL)))
    written = appends(service)
    outcome = await service.unclaim(smoker_identity(), 1, f"restricted/{OWNER}/never".encode())
    assert outcome.reason_code is ReasonCode.SUCCESS and appends(service) == written
    outcome = await service.unclaim(smoker_identity(), 1, TOPIC.encode())
    assert outcome.reason_code is ReasonCode.SUCCESS and appends(service) == written + 1
    assert service.lookup(TOPIC) is None
    assert not service.decide(smoker_identity(OTHER), TOPIC, SUB).allowed
    refused = await service.unclaim(smoker_identity(OTHER), 1, TOPIC.encode())
    assert refused.reason_code is ReasonCode.NOT_AUTHORIZED
    await close(service)
    again = open_service(tmp_path)
    assert len(again) == 0
    await close(again)


def tamper(path: Path, tenant: str, topic: str, value: object) -> None:
    store = KeyedClaimStore.open(str(path / "claims.log"))
    store.put_sync(tenant, topic, value)
    store.close()


async def test_tampered_records_are_quarantined_and_answer_0x83(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    good = f"restricted/{OWNER}/good"
    await service.claim(smoker_identity(), 1, claim_payload(restriction(good, WL, (OTHER, SUB))))
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, WL)))
    await close(service)
    # an attacker with access to the store widens the whitelist without the owner's key
    genuine = sign_restriction(OWNER_KEY, restriction(TOPIC, WL))
    widened = Claim(restriction(TOPIC, WL, (THIRD, Activity.ALL)), genuine.signature)
    tamper(tmp_path, "~", TOPIC, record_value(widened, 0.0))
    # ... or moves a valid claim to another topic, or writes garbage
    moved = f"restricted/{OWNER}/moved"
    tamper(tmp_path, "~", moved, record_value(sign_restriction(OWNER_KEY, restriction(good)), 0))
    junk = f"restricted/{OWNER}/junk"
    tamper(tmp_path, "~", junk, {"nothing": 1})
    # ... or claims someone else's area with its own key
    stolen = f"restricted/{OTHER}/stolen"
    thief = restriction(stolen, BL, owner=OTHER)
    tamper(tmp_path, "~", stolen, record_value(sign_restriction(OWNER_KEY, thief), 0))
    # ... or stores a restriction that is not strict JSON
    loose = f"restricted/{OWNER}/loose"
    bad_json = record_value(sign_restriction(OWNER_KEY, restriction(loose)), 0)
    bad_json["restriction"] = '{"topicName": "x", "topicName": "y"}'
    tamper(tmp_path, "~", loose, bad_json)

    service = open_service(tmp_path)
    report = service.load_report
    assert report.loaded == 1
    assert {(t, topic) for t, topic, _ in report.quarantined} == {
        ("~", TOPIC),
        ("~", moved),
        ("~", junk),
        ("~", stolen),
        ("~", loose),
    }
    reasons = {topic: why for _, topic, why in report.quarantined}
    assert "does not verify" in reasons[TOPIC] and "does not verify" in reasons[stolen]
    assert "duplicate key" in reasons[loose]
    assert "stored under" in reasons[moved]
    assert "no claim" in reasons[junk]
    for topic in (TOPIC, moved, junk):
        result = service.decide(smoker_identity(THIRD), topic, SUB)
        assert result.reason_code is ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
        assert service.decide(smoker_identity(), topic, SUB).allowed  # the owner still may
    assert service.decide(smoker_identity(OTHER), good, SUB).allowed
    assert isinstance(service.lookup(stolen), Quarantined)
    assert len(service.quarantined()) == 5

    # the owner claims again: back in service; the owner unclaims: gone
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, WL, (THIRD, SUB))))
    assert service.decide(smoker_identity(THIRD), TOPIC, SUB).allowed
    await service.unclaim(smoker_identity(), 1, moved.encode())
    assert service.lookup(moved) is None
    await close(service)
    again = open_service(tmp_path)
    assert {topic for _, topic, _ in again.load_report.quarantined} == {junk, stolen, loose}
    await close(again)


async def test_flood_gets_0x97_and_does_not_touch_the_store(tmp_path: Path) -> None:
    clock = Clock()
    limits = ThrottleLimits(client_rate=1.0, client_burst=5, max_claims_per_client=100)
    service = open_service(tmp_path, limits, clock)
    codes = []
    for i in range(200):
        topic = f"restricted/{OWNER}/t{i}"
        outcome = await service.claim(smoker_identity(), 1, claim_payload(restriction(topic)))
        codes.append(outcome.reason_code)
    assert codes.count(ReasonCode.SUCCESS) == 5
    assert codes.count(ReasonCode.QUOTA_EXCEEDED) == 195
    assert appends(service) == 5 and len(service) == 5
    # another client is served meanwhile
    other = await service.claim(
        smoker_identity(OTHER), 1, claim_payload(restriction(None, owner=OTHER), OTHER_KEY)
    )
    assert other.reason_code is ReasonCode.SUCCESS
    clock.now += 1.0
    late = await service.claim(
        smoker_identity(), 1, claim_payload(restriction(f"restricted/{OWNER}/late"))
    )
    assert late.reason_code is ReasonCode.SUCCESS
    await close(service)


async def test_concurrent_claims_respect_the_live_limit(tmp_path: Path) -> None:
    limits = ThrottleLimits(max_claims_per_client=3, client_burst=1000, store_burst=1000)
    service = open_service(tmp_path, limits)
    payloads = [claim_payload(restriction(f"restricted/{OWNER}/c{i}")) for i in range(10)]
    outcomes = await asyncio.gather(*(service.claim(smoker_identity(), 1, p) for p in payloads))
    accepted = [o for o in outcomes if o.reason_code is ReasonCode.SUCCESS]
    assert len(accepted) == 3 and len(service) == 3
    # an update of a held topic is still accepted at the limit
    update = await service.claim(smoker_identity(), 1, payloads[0])
    held = {o.claim.topic_name for o in accepted if o.claim}
    assert (update.reason_code is ReasonCode.SUCCESS) == (f"restricted/{OWNER}/c0" in held)
    await close(service)


async def test_total_limit_across_owners(tmp_path: Path) -> None:
    service = open_service(tmp_path, ThrottleLimits(max_claims_total=3, client_burst=100))
    codes = []
    for n in range(5):
        k = key(n)
        me = smoker_id(k.verify_key)
        payload = claim_payload(restriction(None, owner=me), k)
        codes.append((await service.claim(smoker_identity(me), 1, payload)).reason_code)
    assert codes == [ReasonCode.SUCCESS] * 3 + [ReasonCode.QUOTA_EXCEEDED] * 2
    await close(service)


async def test_tenant_share_keeps_room_for_other_tenants(tmp_path: Path) -> None:
    """Throw-away SMOKER keys of one tenant (each its own principal) stop at the tenant's share
    of max_claims_total (docs/limits-quotas.md); a device of another tenant still claims."""
    limits = ThrottleLimits(max_claims_total=4, client_burst=100, tenant_share=0.5)
    service = open_service(tmp_path, limits)
    codes, reasons = [], []
    for n in range(4):
        k = key(n)
        me = smoker_id(k.verify_key)
        who = Identity(client_id=me, method="smoker", smoker_id=me, tenant="acme")
        outcome = await service.claim(who, 1, claim_payload(restriction(None, owner=me), k))
        codes.append(outcome.reason_code)
        reasons.append(outcome.reason_string or "")
    assert codes == [ReasonCode.SUCCESS] * 2 + [ReasonCode.QUOTA_EXCEEDED] * 2
    assert "tenant 'acme' holds 2 live claims; its share is 2" in reasons[2]
    assert "limits.tenant_share 0.5 of claims.max_claims_total 4" in reasons[2]
    device = Identity(client_id=OWNER, method="smoker", smoker_id=OWNER, tenant="globex")
    outcome = await service.claim(device, 1, claim_payload(restriction(None)))
    assert outcome.reason_code is ReasonCode.SUCCESS
    assert service.live_in_tenant("acme") == 2 and service.live_in_tenant("globex") == 1
    await close(service)


async def test_store_failure_answers_0x80_and_changes_nothing(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, BL)))
    await close(service)  # the log is closed: every write now fails
    outcome = await service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, WL)))
    assert outcome.reason_code is ReasonCode.UNSPECIFIED_ERROR
    assert "could not make the claim durable" in (outcome.reason_string or "")
    assert outcome.claim is None
    record = service.lookup(TOPIC)
    assert isinstance(record, Claim) and record.restriction.restriction_type is BL
    gone = await service.unclaim(smoker_identity(), 1, TOPIC.encode())
    assert gone.reason_code is ReasonCode.UNSPECIFIED_ERROR and service.lookup(TOPIC) is not None
    assert service.live_topics("~", OWNER) == {TOPIC}


async def test_claim_then_unclaim_in_flight_ends_absent(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    payload = claim_payload(restriction(TOPIC, BL))
    claimed, unclaimed = await asyncio.gather(
        service.claim(smoker_identity(), 1, payload),
        service.unclaim(smoker_identity(), 1, TOPIC.encode()),
    )
    assert claimed.reason_code is ReasonCode.SUCCESS
    assert unclaimed.reason_code is ReasonCode.SUCCESS
    assert service.lookup(TOPIC) is None
    await close(service)
    again = open_service(tmp_path)
    assert again.lookup(TOPIC) is None
    await close(again)


async def test_cancelled_claim_still_lands_in_index_and_store_alike(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    task = asyncio.create_task(
        service.claim(smoker_identity(), 1, claim_payload(restriction(TOPIC, BL)))
    )
    await asyncio.sleep(0)  # queued in the log
    task.cancel()
    await service.drain()
    in_index = service.lookup(TOPIC) is not None
    assert in_index  # it was queued before the cancellation, so it was written
    await close(service)
    again = open_service(tmp_path)
    assert (again.lookup(TOPIC) is not None) == in_index
    await close(again)


async def test_non_smoker_and_qos0_never_reach_the_store(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    payload = claim_payload(restriction(TOPIC, BL))
    plain = await service.claim(plain_identity(OWNER), 1, payload)
    assert plain.reason_code is ReasonCode.NOT_AUTHORIZED
    assert (await service.claim(smoker_identity(), 0, payload)).reason_code is None
    assert (await service.unclaim(plain_identity(OWNER), 1, TOPIC.encode())).reason_code is (
        ReasonCode.NOT_AUTHORIZED
    )
    assert appends(service) == 0
    await close(service)


async def test_tenants_are_isolated(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    a = Identity(OWNER, "smoker", tenant="site-a", smoker_id=OWNER)
    await service.claim(a, 1, claim_payload(restriction(TOPIC, BL)))
    other_a = Identity(OTHER, "smoker", tenant="site-a", smoker_id=OTHER)
    other_b = Identity(OTHER, "smoker", tenant="site-b", smoker_id=OTHER)
    assert service.decide(other_a, TOPIC, SUB).allowed
    assert not service.decide(other_b, TOPIC, SUB).allowed
    assert service.lookup(TOPIC, "site-a") is not None and service.lookup(TOPIC) is None
    await close(service)
    again = open_service(tmp_path)
    assert again.lookup(TOPIC, "site-a") is not None and again.lookup(TOPIC, "site-b") is None
    await close(again)


async def test_claims_information_request(tmp_path: Path) -> None:
    service = open_service(tmp_path)
    mine = f"restricted/{OWNER}/a"
    await service.claim(smoker_identity(), 1, claim_payload(restriction(mine, WL, (OTHER, SUB))))
    theirs = restriction(None, WL, (OWNER, PUB), owner=OTHER)
    await service.claim(smoker_identity(OTHER), 1, claim_payload(theirs, OTHER_KEY))
    open_to_all = restriction(f"restricted/{OTHER}/open", BL, ("*", PUB), owner=OTHER)
    await service.claim(smoker_identity(OTHER), 1, claim_payload(open_to_all, OTHER_KEY))
    unrelated = restriction(f"restricted/{OTHER}/x", WL, (THIRD, PUB), owner=OTHER)
    await service.claim(smoker_identity(OTHER), 1, claim_payload(unrelated, OTHER_KEY))

    request = f"access/claims/{OWNER}/request"
    response = f"restricted/{OWNER}/claims"
    outcome, payload = service.claims_request(smoker_identity(), request, response)
    assert outcome.reason_code is ReasonCode.SUCCESS and outcome.response_topic == response
    assert payload is not None
    body = json.loads(payload)
    assert body["clientId"] == OWNER
    assert [c["restriction"]["topicName"] for c in body["ownedClaims"]] == [mine]
    assert [c["restriction"]["topicName"] for c in body["involvedClaims"]] == [
        f"restricted/{OTHER}/open",
        f"restricted/{OTHER}/temperature",
    ]
    assert (
        body["ownedClaims"][0]
        == sign_restriction(OWNER_KEY, restriction(mine, WL, (OTHER, SUB))).to_json_obj()
    )

    wrong, none = service.claims_request(smoker_identity(), request, f"restricted/{OWNER}/x")
    assert wrong.reason_code is ReasonCode.TOPIC_NAME_INVALID and none is None
    missing, _ = service.claims_request(smoker_identity(), request, None)
    assert missing.reason_code is ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
    foreign, _ = service.claims_request(smoker_identity(OTHER), request, response)
    assert foreign.reason_code is ReasonCode.NOT_AUTHORIZED
    plain, _ = service.claims_request(plain_identity(OWNER), request, response)
    assert plain.reason_code is ReasonCode.NOT_AUTHORIZED
    await close(service)
