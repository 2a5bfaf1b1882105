"""Issue 21 item 4 with SMOKER claims enabled: only subscriptions whose filter reaches into
``restricted/`` have their deliveries checked (``SubscriptionEntry.egress``); claims, updates
and unclaims then take effect at the next message through them, and everyone else's deliveries
take no check. Over real sockets against the broker running in this test's event loop."""

from __future__ import annotations

from pathlib import Path

from claims_broker import client, restriction, running_broker
from claims_helpers import OTHER, OTHER_KEY, OWNER, OWNER_KEY
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.broker.server import Broker
from edge_broker.claims.gate import reaches_restricted
from edge_broker.matching.errors import RuleError
from edge_broker.matching.mqtt_topics import topic_matches
from edge_broker.matching.subscription_patterns import parse_pattern
from edge_broker.mqtt.reason_codes import ReasonCode

T = f"restricted/{OWNER}/t"


def marks(broker: Broker, client_id: str) -> dict[str, bool]:
    (session,) = [s for s in broker.sessions if s.client_id == client_id]
    return {f: e.egress for f, e in session.subscriptions.items()}


async def test_claim_update_and_unclaim_are_decided_through_checked_subscriptions_only(
    tmp_path: Path, checks: list[str]
) -> None:
    async with (
        running_broker(tmp_path) as (broker, port),
        client(port, OWNER_KEY) as owner,
        client(port, OTHER_KEY) as other,
        client(port, client_id="plain") as plain,
    ):
        assert await other.subscribe("#", qos=0) == (0,)
        assert await plain.subscribe("sensors/#", qos=0) == (0,)
        assert marks(broker, OTHER) == {"#": True}
        assert marks(broker, "plain") == {"sensors/#": False}

        await owner.publish("sensors/a", b"1", qos=1)
        assert (await plain.next_message()).topic == "sensors/a"
        assert (await other.next_message()).topic == "sensors/a"
        assert checks == ["sensors/a"]  # other's '#' only; plain's sensors/# takes no check

        ok = ReasonCode.SUCCESS
        assert (
            await owner.claim(restriction(T, "WHITELIST", (OTHER, "SUBSCRIBE")))
        ).reason_code == ok
        await owner.publish(T, b"allowed", qos=1)
        assert (await other.next_message()).payload == b"allowed"

        assert (await owner.claim(restriction(T, "WHITELIST"))).reason_code == ok  # update
        await owner.publish(T, b"update", qos=1)
        await other.no_message()

        assert (
            await owner.claim(restriction(T, "WHITELIST", (OTHER, "SUBSCRIBE")))
        ).reason_code == ok
        await owner.publish(T, b"again", qos=1)
        assert (await other.next_message()).payload == b"again"
        assert (await owner.unclaim(T)).reason_code == ok  # unclaimed: the owner's only
        await owner.publish(T, b"unclaimed", qos=1)
        await other.no_message()
        await plain.no_message()
        assert marks(broker, OTHER) == {"#": True}  # claims never move the marks
        assert marks(broker, "plain") == {"sensors/#": False}


FILTER_LEVELS = ("restricted", "r", "re", "x", "+", "*", "r*", "restricted*")
TAILS = ("", "/#", "/>", "/r#", "/r>", "#")


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(FILTER_LEVELS), min_size=0, max_size=3),
    st.sampled_from(TAILS),
    st.lists(st.sampled_from(("restricted", "r", "o", "t")), min_size=1, max_size=4),
)
def test_every_filter_or_pattern_that_can_carry_a_restricted_topic_is_checked(
    body: list[str], tail: str, levels: list[str]
) -> None:
    """``reaches_restricted`` (ClaimsGate.delivers_need_check) over MQTT filters and runtime
    patterns: whatever can match a topic under ``restricted/`` is marked for checks."""
    text = "/".join(body) + tail if body else (tail.lstrip("/") or "#")
    topic = "restricted/" + "/".join(levels)
    try:
        matches = parse_pattern(text).matches(topic)
    except RuleError:
        try:
            matches = topic_matches(text, topic)
        except RuleError:
            return
    if matches:
        assert reaches_restricted(text), (text, topic)
