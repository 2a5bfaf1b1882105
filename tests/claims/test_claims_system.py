"""``claims.system``: the broker's PUBLISH to SMOKER's system topics (SUBSCRIBE and delivery
decisions are the claims gate's: test_claims_gate.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claims_helpers import OTHER, OWNER, claim_payload, plain_identity, restriction
from claims_helpers import smoker_identity as smoker

from edge_broker.claims.model import Activity, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.claims.system import handle_system_publish
from edge_broker.mqtt.reason_codes import ReasonCode

TOPIC = f"restricted/{OWNER}/t"
WL, BL = RestrictionType.WHITELIST, RestrictionType.BLACKLIST


@pytest.fixture
async def service(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = KeyedClaimStore.open(str(tmp_path / "claims.log"))
    yield ClaimService(store)
    await store.aclose()


async def claim(
    service: ClaimService, *perms: tuple[str, Activity], kind: RestrictionType = WL
) -> None:
    outcome = await handle_system_publish(
        service, smoker(), "access/claim", 1, claim_payload(restriction(TOPIC, kind, *perms))
    )
    assert outcome.reason_code is ReasonCode.SUCCESS, outcome


async def test_claims_request_and_other_system_publishes(service: ClaimService) -> None:
    await claim(service, (OTHER, Activity.SUBSCRIBE))
    response = f"restricted/{OWNER}/claims"
    outcome = await handle_system_publish(
        service, smoker(), f"access/claims/{OWNER}/request", 1, b"", response
    )
    assert outcome.reason_code is ReasonCode.SUCCESS and outcome.response is not None
    topic, payload = outcome.response
    assert (
        topic == response
        and json.loads(payload)["ownedClaims"][0]["restriction"]["topicName"] == TOPIC
    )
    qos0 = await handle_system_publish(service, smoker(), "access/claim", 0, b"{}")
    assert qos0.reason_code is None
    plain = await handle_system_publish(
        service, plain_identity(), "access/unclaim", 1, TOPIC.encode()
    )
    assert plain.reason_code is ReasonCode.NOT_AUTHORIZED
    with pytest.raises(ValueError):
        await handle_system_publish(service, smoker(), "sensors/1", 1, b"")
