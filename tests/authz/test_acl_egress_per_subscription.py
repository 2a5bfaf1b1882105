"""Issue 21 item 4: the site ACL decides per subscription whether its deliveries can be denied
(``AclGate.delivers_need_check``), so only those take the per-delivery check. The property: a
subscription judged "no check needed" never carries a delivery the check would deny."""

from __future__ import annotations

from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_gate import AclGate
from edge_broker.authz.acl_mqtt import topic_to_keyexpr
from edge_broker.broker.message import Message as BrokerMessage
from edge_broker.identity import Identity
from edge_broker.matching.errors import RuleError
from edge_broker.matching.mqtt_topics import topic_matches
from edge_broker.matching.subscription_patterns import parse_pattern
from edge_broker.mqtt.packets import Properties

USERS = ("guest", "staff", None)
LEVELS = ("a", "b", "@v", "ab")
RULE_CHUNKS = ("a", "b", "@v", "*", "**", "a$*")
FILTER_LEVELS = ("a", "b", "@v", "ab", "+")
PATTERN_LEVELS = ("a", "b", "ab", "*", "a*")
PATTERN_TAILS = ("", "/#", "/>", "/a#", "/a>")
KINDS = (
    (False, b"p", Properties()),
    (True, b"", Properties()),
    (False, b"p", Properties(response_topic="r")),
    (False, b"p", Properties(correlation_data=b"c")),
)


def acl_section(default: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    for i, rule in enumerate(rules):
        rule["id"] = f"r{i}"
    return {
        "enabled": True,
        "default_permission": default,
        "rules": rules,
        "subjects": [{"id": "guests", "usernames": ["guest"]}, {"id": "all"}],
        "policies": [
            {"rules": [r["id"] for r in rules if r["to"] == "guests"], "subjects": ["guests"]},
            {"rules": [r["id"] for r in rules if r["to"] == "all"], "subjects": ["all"]},
        ],
    }


RULE = st.fixed_dictionaries(
    {
        "messages": st.lists(
            st.sampled_from(["put", "delete", "query", "reply"]), min_size=1, unique=True
        ),
        "flows": st.lists(st.sampled_from(["ingress", "egress"]), min_size=1, unique=True),
        "permission": st.sampled_from(["allow", "deny", "deny"]),
        "key_exprs": st.lists(
            st.lists(st.sampled_from(RULE_CHUNKS), min_size=1, max_size=3).map("/".join),
            min_size=1,
            max_size=2,
        ),
        "to": st.sampled_from(["guests", "all"]),
    }
)
TOPIC = st.lists(st.sampled_from(LEVELS), min_size=1, max_size=4).map("/".join)
MQTT_FILTER = st.tuples(
    st.lists(st.sampled_from(FILTER_LEVELS), min_size=0, max_size=3),
    st.booleans(),
).map(lambda p: "/".join([*p[0], "#"] if p[1] else p[0]) or "#")
PATTERN = st.tuples(
    st.lists(st.sampled_from(PATTERN_LEVELS), min_size=1, max_size=3),
    st.sampled_from(PATTERN_TAILS),
).map(lambda p: "/".join(p[0]) + p[1])


def _rules(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [dict(r) for r in raw]


def _strip(section: dict[str, Any]) -> dict[str, Any]:
    for rule in section["rules"]:
        rule.pop("to", None)
    return section


def _acl(default: str, raw: list[dict[str, Any]]) -> Acl | None:
    section = acl_section(default, _rules(raw))
    try:
        return Acl.load(_strip(section))
    except Exception:  # a generated key expression the ACL refuses: not a case to judge
        return None


def _never_skips_a_denial(
    acl: Acl, user: str | None, topic_filter: str, topic: str, kind: int, patterns: bool
) -> None:
    try:  # only topics that passed the ingress check are ever delivered
        topic_to_keyexpr(topic, "/", acl.verbatims)
    except RuleError:
        assume(False)
    gate = AclGate(acl)
    identity = Identity(
        client_id="c", method="password", username=user, subscription_patterns=patterns
    )
    if gate.delivers_need_check(identity, topic_filter):
        return
    retain, payload, props = KINDS[kind]
    verdict = gate.check_deliver(identity, BrokerMessage(topic, payload, 0, retain, props))
    assert verdict is not None
    assert verdict.allowed, (topic_filter, topic, verdict.reason)


@settings(max_examples=600, deadline=None)
@given(
    st.sampled_from(["allow", "deny"]),
    st.lists(RULE, min_size=1, max_size=4),
    st.sampled_from(USERS),
    MQTT_FILTER,
    TOPIC,
    st.integers(0, 3),
)
def test_an_unchecked_mqtt_subscription_never_carries_a_denied_delivery(
    default: str,
    rules: list[dict[str, Any]],
    user: str | None,
    topic_filter: str,
    topic: str,
    kind: int,
) -> None:
    acl = _acl(default, rules)
    assume(acl is not None)
    assert acl is not None
    assume(topic_matches(topic_filter, topic))
    _never_skips_a_denial(acl, user, topic_filter, topic, kind, False)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(RULE, min_size=1, max_size=4),
    st.sampled_from(USERS),
    PATTERN,
    TOPIC,
    st.integers(0, 3),
)
def test_an_unchecked_runtime_pattern_never_carries_a_denied_delivery(
    rules: list[dict[str, Any]], user: str | None, pattern: str, topic: str, kind: int
) -> None:
    acl = _acl("allow", rules)
    assume(acl is not None)
    assert acl is not None
    try:
        parsed = parse_pattern(pattern)
    except RuleError:
        assume(False)
    assume(parsed.matches(topic))
    _never_skips_a_denial(acl, user, pattern, topic, kind, True)


def _fixed(rules: list[dict[str, Any]], default: str = "allow") -> AclGate:
    acl = _acl(default, rules)
    assert acl is not None
    return AclGate(acl)


SECRET = {
    "messages": ["put"],
    "flows": ["egress"],
    "permission": "deny",
    "key_exprs": ["plant/secret/**"],
    "to": "guests",
}


def who(user: str | None) -> Identity:
    return Identity(client_id="c", method="password", username=user)


def test_only_filters_that_meet_a_deny_rule_of_the_subject_are_checked() -> None:
    gate = _fixed([dict(SECRET)])
    guest, staff = who("guest"), who("staff")
    assert gate.delivers_need_check(guest, "plant/#")
    assert gate.delivers_need_check(guest, "#")
    assert gate.delivers_need_check(guest, "plant/+/x")
    assert gate.delivers_need_check(guest, "plant/secret/door")
    assert not gate.delivers_need_check(guest, "sensors/#")
    assert not gate.delivers_need_check(guest, "plant/public/#")
    assert not gate.delivers_need_check(staff, "plant/#")  # the rule is the guests' only


def test_default_deny_and_unmappable_filters_are_always_checked() -> None:
    assert _fixed([dict(SECRET)], "deny").delivers_need_check(who("staff"), "sensors/x")
    gate = _fixed([dict(SECRET)])
    assert gate.delivers_need_check(who("guest"), "plant//x")  # no key expression: checked


def test_a_wildcard_is_checked_when_the_rules_name_a_verbatim_chunk() -> None:
    """Zenoh's ``**`` never matches ``@cal`` while MQTT's ``#`` does: ``cmd/#`` would not
    intersect the deny rule as key expressions, yet it delivers ``cmd/@cal``."""
    rule = dict(SECRET, key_exprs=["cmd/@cal"])
    gate = _fixed([rule])
    assert gate.delivers_need_check(who("guest"), "cmd/#")
    denied = gate.check_deliver(who("guest"), BrokerMessage("cmd/@cal", b"x", 0, False))
    assert denied is not None and denied.denied


def test_no_egress_deny_no_check() -> None:
    ingress_only = dict(SECRET, flows=["ingress"])
    assert not _fixed([ingress_only]).delivers_need_check(who("guest"), "#")
