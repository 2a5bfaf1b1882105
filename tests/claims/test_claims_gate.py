"""The claims gate (gate 6, AUTHZ.md §2), alone and last in the broker's gate pipeline, without
sockets: which filters reach the restricted area, exact vs wildcard SUBSCRIBE, recheck marks,
delivery decisions as of now, and the order gates 1–5 then claims."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from claims_helpers import OTHER, OWNER, claim_payload, plain_identity, restriction, smoker_identity
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.decision import Decision, GateName, deny
from edge_broker.authz.gates import GatePipeline
from edge_broker.authz.policy import Policy
from edge_broker.broker.message import Message
from edge_broker.claims.gate import ClaimsGate, reaches_restricted
from edge_broker.claims.model import Activity, RestrictionType
from edge_broker.claims.persistence import KeyedClaimStore
from edge_broker.claims.service import ClaimService
from edge_broker.matching.mqtt_topics import topic_matches
from edge_broker.mqtt.packets import Subscription
from edge_broker.mqtt.reason_codes import ReasonCode

T = f"restricted/{OWNER}/t"


def Msg(topic: str) -> Message:  # noqa: N802 - reads as the message it builds
    return Message(topic, b"", 0, False)


class Sess:
    def __init__(self, identity: Any) -> None:
        self.identity = identity


@pytest.fixture
async def service(tmp_path: Path) -> Any:
    store = KeyedClaimStore.open(str(tmp_path / "claims.log"), fsync="never")
    yield ClaimService(store)
    await store.aclose()


async def claim(service: ClaimService, kind: RestrictionType, *perms: tuple[str, Activity]) -> None:
    outcome = await service.claim(smoker_identity(), 1, claim_payload(restriction(T, kind, *perms)))
    assert outcome.reason_code == ReasonCode.SUCCESS


@pytest.mark.parametrize(
    "f,reaches",
    [
        ("#", True),
        ("+/" + OWNER + "/t", True),
        ("restricted/+/t", True),
        ("restricted/#", True),
        (T, True),
        ("+/+/+", True),
        ("+", False),
        ("open/#", False),
        ("$SYS/#", False),
        ("restricted", False),
        ("+/x", True),
        # runtime subscription patterns (PATTERNS.md §2): conservatively rechecked
        (">", True),
        ("r*/#", True),
        ("restricted/*/t", True),
        ("open/*", True),
        # a prefix '#' (PATTERNS.md §2 'p#') is a runtime pattern too: 're#' matches
        # 'restricted/<owner>/t' (it was not rechecked: one check too few)
        ("re#", True),
        ("restricted#", True),
    ],
)
def test_which_filters_reach_the_restricted_area(f: str, reaches: bool) -> None:
    assert reaches_restricted(f) is reaches


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["restricted", OWNER, "t", "+", "x"]), min_size=1, max_size=4),
    st.booleans(),
)
def test_a_filter_that_matches_a_restricted_topic_reaches_the_area(
    levels: list[str], hash_tail: bool
) -> None:
    f = "/".join(levels) + ("/#" if hash_tail else "")
    if topic_matches(f, T) or topic_matches(f, f"restricted/{OWNER}/x/t"):
        assert reaches_restricted(f)


async def test_exact_subscribe_is_decided_now_and_marked_for_recheck(service: ClaimService) -> None:
    gate = ClaimsGate(service)
    sub = Subscription(T, 1)
    other = smoker_identity(OTHER)
    denied = gate.check_subscribe(other, sub, T, None)
    assert denied is not None and denied.denied and denied.reason_code == 0x87
    assert denied.gate is GateName.CLAIMS
    await claim(service, RestrictionType.WHITELIST, (OTHER, Activity.SUBSCRIBE))
    allowed = gate.check_subscribe(other, sub, T, None)
    assert allowed is not None and allowed.allowed and allowed.recheck
    plain = gate.check_subscribe(plain_identity(), sub, T, None)
    assert plain is not None and plain.denied


async def test_wildcards_are_accepted_and_deliveries_decided_at_delivery_time(
    service: ClaimService,
) -> None:
    gate = ClaimsGate(service)
    other = smoker_identity(OTHER)
    for f in ("#", "restricted/+/t", f"+/{OWNER}/t"):
        verdict = gate.check_subscribe(other, Subscription(f, 0), f, None)
        assert verdict is not None and verdict.allowed and verdict.recheck
        assert gate.delivers_need_check(other, f)
    assert gate.check_subscribe(other, Subscription("open/#", 0), "open/#", None) is None
    assert not gate.delivers_need_check(other, "open/#")
    assert gate.check_deliver(other, Msg("open/t")) is None
    denied = gate.check_deliver(other, Msg(T))
    assert denied is not None and denied.denied
    await claim(service, RestrictionType.BLACKLIST)
    allowed = gate.check_deliver(other, Msg(T))
    assert allowed is not None and allowed.allowed
    await claim(service, RestrictionType.BLACKLIST, (OTHER, Activity.SUBSCRIBE))
    again = gate.check_deliver(other, Msg(T))
    assert again is not None and again.denied
    hits = gate._cache.hits
    assert gate.check_deliver(other, Msg(T)) is again  # cached until the claims change
    assert gate._cache.hits == hits + 1
    await claim(service, RestrictionType.BLACKLIST)
    fresh = gate.check_deliver(other, Msg(T))
    assert fresh is not None and fresh.allowed


async def test_system_topics_publish_and_will(service: ClaimService) -> None:
    gate = ClaimsGate(service)
    who = smoker_identity(OTHER)
    for f in ("access/claim", "access/unclaim", f"access/claims/{OTHER}/request"):
        verdict = gate.check_subscribe(who, Subscription(f, 0), f, None)
        assert verdict is not None and verdict.denied
    publish = gate.check_publish(who, Message(T, b"", 0, False))
    assert publish is not None and publish.denied
    assert gate.check_publish(who, Message("open/t", b"", 0, False)) is None
    will = gate.check_will(who, Message(T, b"bye", 0, False))
    assert will is not None and will.denied
    owner_will = gate.check_will(smoker_identity(), Message(T, b"bye", 0, False))
    assert owner_will is not None and owner_will.allowed


class DenyNo:
    """A gate before the claims (as the site ACL is): denies topics under ``no/``."""

    @property
    def gate(self) -> GateName:
        return GateName.ACL

    def check_publish(self, identity: Any, message: Any) -> Decision | None:
        return deny(GateName.ACL, "no", "no") if message.topic.startswith("no/") else None

    def check_will(self, identity: Any, will: Any) -> Decision | None:
        return None

    def check_subscribe(
        self, identity: Any, subscription: Subscription, topic_filter: str, share_group: str | None
    ) -> Decision | None:
        return None

    def delivers_need_check(self, identity: Any, topic_filter: str) -> bool:
        return True

    def check_deliver(self, identity: Any, message: Any) -> Decision | None:
        return deny(GateName.ACL, "no", "no") if message.topic.startswith("no/") else None


def broker_policy(gate: ClaimsGate) -> Policy:
    """The broker's policy with the claims gate last in the pipeline, as ``Broker`` builds it."""
    return Policy("/", GatePipeline(gates=[DenyNo(), gate]))


async def test_the_pipeline_runs_the_earlier_gates_first_then_the_claims(
    service: ClaimService,
) -> None:
    policy = broker_policy(ClaimsGate(service))
    other = smoker_identity(OTHER)
    assert policy.has_delivery_gates
    assert policy.routable(Message("open/t", b"", 0, False))
    assert not policy.routable(Message("access/claim", b"", 0, False))
    first = policy.check_publish(other, Message("no/x", b"", 0, False))
    assert isinstance(first, Decision) and first.gate is GateName.ACL  # the earlier denial wins
    second = policy.check_publish(other, Message(T, b"", 0, False))
    assert isinstance(second, Decision) and second.gate is GateName.CLAIMS and second.denied
    third = policy.check_publish(other, Message("open/t", b"", 0, False))
    assert isinstance(third, Decision) and third.allowed
    sub = policy.check_subscribe(other, Subscription("$share/g/#", 0))
    assert isinstance(sub, Decision) and sub.allowed and sub.recheck
    bad = policy.check_subscribe(other, Subscription("a/#/b", 0))
    assert isinstance(bad, Decision) and bad.gate is GateName.SYNTAX
    reserved = policy.check_subscribe(other, Subscription("access/claim", 0))
    assert isinstance(reserved, Decision) and reserved.denied
    acl_denied = policy.check_deliver(Sess(other), Msg("no/t"))  # type: ignore[arg-type]
    assert acl_denied.gate is GateName.ACL
    claims_denied = policy.check_deliver(Sess(other), Msg(T))  # type: ignore[arg-type]
    assert claims_denied.gate is GateName.CLAIMS
    assert policy.check_deliver(Sess(other), Msg("open/t")).allowed  # type: ignore[arg-type]
    await claim(service, RestrictionType.WHITELIST, (OTHER, Activity.ALL))
    assert policy.check_deliver(Sess(other), Msg(T)).allowed  # type: ignore[arg-type]
    allowed = policy.check_publish(other, Message(T, b"", 0, False))
    assert isinstance(allowed, Decision) and allowed.allowed


LEVELS = ["restricted", OWNER, OTHER, "t", "x", "+", "*", "r*"]
TOPICS = [
    T,
    f"restricted/{OWNER}/x",
    f"restricted/{OTHER}/t",
    f"restricted/{OWNER}/t/x",
    "restricted/x/t",
    "open/t",
]


@settings(max_examples=400, deadline=None)
@given(
    levels=st.lists(st.sampled_from(LEVELS), min_size=1, max_size=4),
    tail=st.sampled_from(["", "/#", "/>"]),
    shared=st.booleans(),
    subscriber=st.sampled_from([OTHER, OWNER, None]),
)
def test_no_subscription_that_matches_a_restricted_topic_escapes_the_delivery_check(
    tmp_path_factory: pytest.TempPathFactory,
    levels: list[str],
    tail: str,
    shared: bool,
    subscriber: str | None,
) -> None:
    """The leak invariant: a subscription able to receive a restricted topic is refused, or
    marked ``recheck`` so that every delivery through it is decided on the concrete topic."""
    f = "/".join(levels) + tail
    if f.startswith(("#", ">")):
        f = "#"
    policy = broker_policy(ClaimsGate(_EMPTY_SERVICE))
    who = smoker_identity(subscriber) if subscriber else plain_identity()
    verdict = policy.check_subscribe(who, Subscription(f"$share/g/{f}" if shared else f, 0))
    assert isinstance(verdict, Decision)
    if verdict.denied:
        return
    for topic in TOPICS:
        if topic.startswith("restricted/") and topic_matches(
            f.replace("*", "+").replace(">", "#"), topic
        ):
            assert verdict.recheck, (f, topic)


class _NoClaims:
    """A claim store with nothing in it (the property test needs no disk)."""

    def records(self) -> list[tuple[str, str, Any]]:
        return []

    async def put(self, tenant: str, topic: str, value: Any) -> None:
        raise AssertionError("not used")

    async def delete(self, tenant: str, topic: str) -> None:
        raise AssertionError("not used")


_EMPTY_SERVICE = ClaimService(_NoClaims())
