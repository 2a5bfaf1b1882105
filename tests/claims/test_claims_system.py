"""The broker-facing calls of ``claims.system``: system topics, SUBSCRIBE decisions and
per-delivery checks through claim updates and unclaims."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from claims_helpers import OTHER, OWNER, THIRD, claim_payload, plain_identity, restriction
from claims_helpers import smoker_identity as smoker

from edge_broker.claims.model import Activity, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.claims.system import (
    delivery_allowed,
    handle_system_publish,
    publish_decision,
    subscribe_decision,
)
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


@pytest.mark.parametrize(
    "topic_filter",
    [
        "#",
        f"+/{OWNER}/t",
        "restricted/+/t",
        "$share/g/#",
        "restricted/#",
        "$share/g/restricted/+/t",
    ],
)
async def test_wildcards_are_accepted_and_filtered_per_delivery(
    service: ClaimService, topic_filter: str
) -> None:
    reader, stranger, plain = smoker(OTHER), smoker(THIRD), plain_identity("sensor")
    for who in (reader, stranger, plain):
        assert subscribe_decision(service, who, topic_filter) is None  # SUBACK by the other gates

    def receivers() -> set[str]:
        return {
            w.client_id
            for w in (smoker(), reader, stranger, plain)
            if delivery_allowed(service, w, TOPIC)
        }

    assert receivers() == {OWNER}  # unclaimed: the owner only
    await claim(service, (OTHER, Activity.SUBSCRIBE))
    assert receivers() == {OWNER, OTHER}
    await claim(service, (THIRD, Activity.ALL))  # update: OTHER out, THIRD in, at the next message
    assert receivers() == {OWNER, THIRD}
    await claim(service, kind=BL)  # empty blacklist: every SMOKER client, never a plain one
    assert receivers() == {OWNER, OTHER, THIRD}
    outcome = await handle_system_publish(service, smoker(), "access/unclaim", 1, TOPIC.encode())
    assert outcome.reason_code is ReasonCode.SUCCESS
    assert receivers() == {OWNER}
    # outside the restricted area nothing is filtered
    assert delivery_allowed(service, plain, "sensors/1")


async def test_exact_subscriptions_are_decided_at_subscribe(service: ClaimService) -> None:
    await claim(service, (OTHER, Activity.SUBSCRIBE))
    for f in (TOPIC, f"$share/grp/{TOPIC}"):
        ok = subscribe_decision(service, smoker(OTHER), f)
        assert ok is not None and ok.allowed
        denied = subscribe_decision(service, smoker(THIRD), f)
        assert denied is not None and denied.reason_code is ReasonCode.NOT_AUTHORIZED
        plain = subscribe_decision(service, plain_identity(), f)
        assert plain is not None and not plain.allowed
    assert subscribe_decision(service, smoker(THIRD), "sensors/+") is None
    assert subscribe_decision(service, smoker(THIRD), "sensors/1") is None


@pytest.mark.parametrize(
    "topic_filter",
    ["access/claim", "access/unclaim", f"access/claims/{OWNER}/request", "$share/g/access/claim"],
)
async def test_nobody_subscribes_to_system_topics(service: ClaimService, topic_filter: str) -> None:
    result = subscribe_decision(service, smoker(), topic_filter)
    assert result is not None and result.reason_code is ReasonCode.NOT_AUTHORIZED


async def test_publish_decision(service: ClaimService) -> None:
    await claim(service, (OTHER, Activity.PUBLISH))
    assert publish_decision(service, smoker(OTHER), TOPIC).allowed
    assert not publish_decision(service, smoker(THIRD), TOPIC).allowed
    assert not publish_decision(service, plain_identity(), TOPIC).allowed
    assert publish_decision(service, plain_identity(), "open/topic").allowed


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
