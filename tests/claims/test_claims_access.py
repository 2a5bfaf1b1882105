"""SMOKER.md "Access decision": owner, exact-topic claims, compromised claims, lists, ``*``."""

from __future__ import annotations

import pytest
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY, THIRD, restriction

from edge_broker.authz.decision import GateName
from edge_broker.claims.access import Quarantined, decide
from edge_broker.claims.model import Activity, Claim, RestrictionType
from edge_broker.claims.signature import sign_restriction
from edge_broker.mqtt.reason_codes import ReasonCode

TOPIC = f"restricted/{OWNER}/temperature"
PUB, SUB = Activity.PUBLISH, Activity.SUBSCRIBE
WL, BL = RestrictionType.WHITELIST, RestrictionType.BLACKLIST


def store(*claims: Claim | Quarantined) -> dict[str, Claim | Quarantined]:
    return {c.topic_name: c for c in claims}


def signed(kind: RestrictionType, *perms: tuple[str, Activity], topic: str = TOPIC) -> Claim:
    return sign_restriction(OWNER_KEY, restriction(topic, kind, *perms))


def allowed(who: str | None, activity: Activity, claims: dict, topic: str = TOPIC) -> bool:  # type: ignore[type-arg]
    return decide(who, topic, activity, claims.get).allowed


def test_outside_the_restricted_area_the_gate_does_not_apply() -> None:
    for topic in ("a/b", "restricted", "restrictedx/a", "$SYS/x", "Restricted/" + OWNER + "/a"):
        result = decide(None, topic, PUB, {}.get)
        assert result.allowed and result.reason_code is ReasonCode.SUCCESS


def test_step_1_non_smoker_clients_are_denied_even_with_an_open_blacklist() -> None:
    claims = store(signed(BL))
    result = decide(None, TOPIC, SUB, claims.get)
    assert not result.allowed and result.reason_code is ReasonCode.NOT_AUTHORIZED
    assert not allowed(None, PUB, {}, f"restricted/{OWNER}/unclaimed")


def test_step_2_owner_always_allowed_claimed_or_not_even_if_compromised() -> None:
    for claims in (
        {},
        store(signed(WL)),
        store(signed(BL, ("*", Activity.ALL), (OWNER, Activity.ALL))),
        store(Quarantined(TOPIC, "bad signature")),
    ):
        for activity in (PUB, SUB):
            assert allowed(OWNER, activity, claims)
            assert allowed(OWNER, activity, claims, f"restricted/{OWNER}/other/deeper")
    assert allowed(OWNER, PUB, {}, f"restricted/{OWNER}")


def test_step_3_claims_are_per_exact_topic() -> None:
    claims = store(signed(BL))  # open to everyone, but only this very topic
    assert allowed(OTHER, PUB, claims)
    assert not allowed(OTHER, PUB, claims, TOPIC + "/sub")
    assert not allowed(OTHER, PUB, claims, f"restricted/{OWNER}/temp")
    result = decide(OTHER, f"restricted/{OWNER}/unclaimed", SUB, claims.get)
    assert result.reason_code is ReasonCode.NOT_AUTHORIZED


def test_step_4_compromised_claim_answers_0x83() -> None:
    claims = store(Quarantined(TOPIC, "signature does not verify"))
    for activity in (PUB, SUB):
        result = decide(OTHER, TOPIC, activity, claims.get)
        assert not result.allowed
        assert result.reason_code is ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
        assert "compromised" in result.reason


@pytest.mark.parametrize(
    ("kind", "perms", "expect_pub", "expect_sub"),
    [
        (WL, (), False, False),  # empty whitelist: owner only
        (BL, (), True, True),  # empty blacklist: every SMOKER client
        (WL, ((OTHER, PUB),), True, False),
        (WL, ((OTHER, SUB),), False, True),
        (WL, ((OTHER, Activity.ALL),), True, True),
        (WL, (("*", SUB),), False, True),
        (WL, (("*", Activity.ALL),), True, True),
        (WL, ((THIRD, Activity.ALL),), False, False),
        (BL, ((OTHER, PUB),), False, True),
        (BL, ((OTHER, SUB),), True, False),
        (BL, ((OTHER, Activity.ALL),), False, False),
        (BL, (("*", PUB),), False, True),
        (BL, ((THIRD, Activity.ALL),), True, True),
        (WL, ((THIRD, PUB), ("*", SUB)), False, True),
        (BL, ((THIRD, PUB), ("*", SUB)), True, False),
    ],
)
def test_step_5_whitelist_blacklist_and_star(
    kind: RestrictionType,
    perms: tuple[tuple[str, Activity], ...],
    expect_pub: bool,
    expect_sub: bool,
) -> None:
    claims = store(signed(kind, *perms))
    assert allowed(OTHER, PUB, claims) is expect_pub
    assert allowed(OTHER, SUB, claims) is expect_sub
    denied = decide(OTHER, TOPIC, PUB, claims.get)
    if not expect_pub:
        assert denied.reason_code is ReasonCode.NOT_AUTHORIZED


def test_claims_in_another_owners_area_do_not_leak() -> None:
    foreign_topic = f"restricted/{OTHER}/temperature"
    theirs = sign_restriction(OTHER_KEY, restriction(None, WL, (THIRD, PUB), owner=OTHER))
    claims = store(theirs, signed(BL))
    assert allowed(THIRD, PUB, claims, foreign_topic)
    assert not allowed(
        OWNER, PUB, claims, foreign_topic
    )  # the owner of one area is a stranger in another
    assert allowed(THIRD, PUB, claims)  # OWNER's blacklist is empty


def test_invalid_owner_segment_is_nobodys_area() -> None:
    for topic in ("restricted/sensor-1/a", "restricted//a", "restricted/"):
        assert not allowed(OTHER, PUB, {}, topic)


def test_access_result_maps_to_a_gate_6_decision() -> None:
    claims = store(Quarantined(TOPIC, "tampered"))
    decision = decide(OTHER, TOPIC, SUB, claims.get).decision()
    assert decision.denied and decision.gate is GateName.CLAIMS
    assert decision.reason_code is ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR
    assert decide(OWNER, TOPIC, SUB, claims.get).decision().allowed
