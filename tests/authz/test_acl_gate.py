"""authz/acl_gate.py on its own: the message kinds, seed-001 patterns as key expressions (a
property against the pattern matcher), the Reason Strings, the bounded caches, and when
deliveries need checking."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_gate import AclGate, egress_can_deny, pattern_to_keyexpr
from edge_broker.authz.decision import GateName
from edge_broker.broker.message import Message as BrokerMessage
from edge_broker.identity import Identity
from edge_broker.matching.errors import RuleError
from edge_broker.matching.keyexpr import KeyExpr
from edge_broker.matching.subscription_patterns import parse_pattern
from edge_broker.mqtt.packets import Properties, Publish, Subscription


def section(
    default: str = "deny", flows: tuple[str, ...] = ("ingress", "egress")
) -> dict[str, Any]:
    return {
        "enabled": True,
        "default_permission": default,
        "rules": [
            {
                "id": "no-admin",
                "messages": ["put", "declare_subscriber"],
                "flows": list(flows),
                "permission": "deny",
                "key_exprs": ["admin/**"],
            },
            {
                "id": "sensors",
                "messages": ["put", "delete", "declare_subscriber"],
                "flows": list(flows),
                "permission": "allow",
                "key_exprs": ["sensors/**", "admin/**"],
            },
        ],
        "subjects": [{"id": "all"}],
        "policies": [{"rules": ["no-admin", "sensors"], "subjects": ["all"]}],
    }


def ident(**kw: Any) -> Identity:
    return Identity(client_id="c", method="anonymous", **kw)


def test_reason_strings_name_rule_or_default() -> None:
    gate = AclGate(Acl.load(section()))
    denied = gate.check_publish(ident(), BrokerMessage("admin/x", b"1", 0, False))
    assert (
        denied is not None
        and denied.denied
        and denied.gate is GateName.ACL
        and denied.rule == "no-admin"
    )
    assert denied.reason == "publish to 'admin/x' (put): denied by acl rule \"no-admin\""
    default = gate.check_publish(ident(), BrokerMessage("other", b"1", 0, False))
    assert (
        default is not None
        and default.reason == "publish to 'other' (put): denied by acl default_permission"
    )
    allowed = gate.check_publish(ident(), BrokerMessage("sensors/t", b"1", 0, False))
    assert allowed is not None and allowed.allowed and allowed.rule == "sensors"
    odd = gate.check_publish(ident(), BrokerMessage("a//b", b"1", 0, False))
    assert odd is not None and odd.denied and "not representable" in (odd.reason or "")


def test_will_subscribe_queryable_and_delivery() -> None:
    gate = AclGate(Acl.load(section()))
    will = gate.check_will(ident(), BrokerMessage("admin/lwt", b"bye", 0, False))
    assert will is not None and will.rule == "no-admin"
    sub = gate.check_subscribe(ident(), Subscription("sensors/#"), "sensors/#", None)
    assert sub is not None and sub.allowed
    queryable = gate.check_subscribe_with_properties(
        ident(), Subscription("sensors/#"), "sensors/#", None, (("queryable", "true"),)
    )
    assert (
        queryable is not None
        and queryable.denied
        and "(declare_queryable)" in (queryable.reason or "")
    )
    delivered = gate.check_deliver(ident(), BrokerMessage("admin/x", b"1", 0, False))
    assert delivered is not None and delivered.denied and delivered.reason is not None
    assert delivered.reason.startswith("deliver 'admin/x' (put)")
    deleted = gate.check_deliver(ident(), BrokerMessage("sensors/x", b"", 0, True))
    assert deleted is not None and deleted.allowed  # delete is allowed on sensors/**


def test_subjects_are_resolved_per_attribute_triple() -> None:
    acl = Acl.load(
        {
            "enabled": True,
            "rules": [{"id": "r", "messages": ["put"], "permission": "allow", "key_exprs": ["x"]}],
            "subjects": [{"id": "wifi", "interfaces": ["wlan0"]}],
            "policies": [{"rules": ["r"], "subjects": ["wifi"]}],
        }
    )
    gate = AclGate(acl)
    on_wifi, on_eth = ident(interface="wlan0"), ident(interface="eth0")
    assert gate.check_publish(on_wifi, BrokerMessage("x", b"1", 0, False)).allowed  # type: ignore[union-attr]
    assert gate.check_publish(on_eth, BrokerMessage("x", b"1", 0, False)).denied  # type: ignore[union-attr]
    assert gate.subject(on_wifi) is gate.subject(ident(interface="wlan0", username=None))
    assert "match subjects: 'wifi'" in gate.describe_subject(on_wifi)
    assert "match subjects: none" in gate.describe_subject(on_eth)


def test_decision_cache_is_bounded() -> None:
    gate = AclGate(Acl.load(section()), cache_limit=10)
    for i in range(100):
        gate.check_publish(ident(), BrokerMessage(f"sensors/{i}", b"1", 0, False))
        assert len(gate._ingress[0]) <= 10


@pytest.mark.parametrize(
    ("default", "flows", "expected"),
    [
        ("deny", ("ingress",), True),  # every delivery needs an egress allow
        ("allow", ("ingress",), False),  # nothing can deny a delivery
        ("allow", ("egress",), True),
        ("allow", ("ingress", "egress"), True),
    ],
)
def test_egress_checked_only_when_a_delivery_can_be_denied(
    default: str, flows: tuple[str, ...], expected: bool
) -> None:
    acl = Acl.load(section(default, flows))
    assert egress_can_deny(acl) is expected
    assert AclGate(acl).checks_every_delivery is expected


# -- seed-001 runtime patterns as key expressions --------------------------------------------

LEVELS = ["a", "ab", "abc", "b", "ba"]
PREFIXES = ["a", "ab", "b"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    body = draw(
        st.lists(
            st.one_of(
                st.sampled_from(LEVELS), st.just("*"), st.sampled_from([p + "*" for p in PREFIXES])
            ),
            max_size=3,
        )
    )
    tail = draw(
        st.one_of(
            st.none(),
            st.sampled_from(["#", ">"]),
            st.sampled_from([p + t for p in PREFIXES for t in "#>"]),
        )
    )
    tokens = body + ([tail] if tail else [])
    return "/".join(tokens) if tokens else "a"


@settings(max_examples=400, deadline=None)
@given(patterns(), st.lists(st.sampled_from(LEVELS), min_size=1, max_size=5))
def test_pattern_key_expression_includes_exactly_the_matching_channels(
    pattern: str, levels: list[str]
) -> None:
    channel = "/".join(levels)
    key = pattern_to_keyexpr(pattern, "/", frozenset())
    assert key.includes(KeyExpr.parse(channel)) is parse_pattern(pattern).matches(channel)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("a/*", "a/*"),
        ("a/b*", "a/b$*"),
        ("a/>", "a/*/**"),
        ("a/b#", "a/b$*/**"),
        ("a/b>", "a/b$*/*/**"),
        (">", "*/**"),
        ("#", "**"),
    ],
)
def test_pattern_forms(pattern: str, expected: str) -> None:
    assert pattern_to_keyexpr(pattern, "/", frozenset()).text == expected


@pytest.mark.parametrize("pattern", ["$SYS/*", "a/@v*", "a/@x/*", "a/b$/*"])
def test_unrepresentable_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(RuleError):
        pattern_to_keyexpr(pattern, "/", frozenset({"@v"}))


def test_pattern_subscription_decided_by_inclusion() -> None:
    gate = AclGate(Acl.load(section()))
    patterns_on = ident(subscription_patterns=True)
    ok = gate.check_subscribe(patterns_on, Subscription("sensors/t*"), "sensors/t*", None)
    assert ok is not None and ok.allowed
    wide = gate.check_subscribe(patterns_on, Subscription("s*/t"), "s*/t", None)
    assert wide is not None and wide.denied  # s$*/t is not included in sensors/**
    literal = gate.check_subscribe(ident(), Subscription("sensors/t*"), "sensors/t*", None)
    assert literal is not None and literal.denied  # on an MQTT listener '*' is no wildcard


# -- the cached gate agrees with the engine, whatever the order of requests -----------------

IFACES = [None, "wlan0", "eth0"]
USERS = [None, "ops", "guest"]
TOPIC_LEVELS = ["a", "b", "admin", "@cal", "", "x$y"]

MIXED = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [
        {
            "id": "a-all",
            "messages": ["put", "delete", "query", "reply"],
            "permission": "allow",
            "key_exprs": ["a/**", "b/*"],
        },
        {
            "id": "no-admin",
            "messages": ["put", "query"],
            "permission": "deny",
            "key_exprs": ["**/admin/**"],
        },
        {
            "id": "cal",
            "messages": ["put"],
            "flows": ["egress"],
            "permission": "allow",
            "key_exprs": ["a/@cal"],
        },
        {
            "id": "guest-no-b",
            "messages": ["put", "reply"],
            "flows": ["egress"],
            "permission": "deny",
            "key_exprs": ["b/**"],
        },
    ],
    "subjects": [
        {"id": "wifi", "interfaces": ["wlan0"]},
        {"id": "ops", "usernames": ["ops"]},
        {"id": "guest", "usernames": ["guest"]},
    ],
    "policies": [
        {"rules": ["a-all", "no-admin"], "subjects": ["wifi", "ops"]},
        {"rules": ["cal", "guest-no-b"], "subjects": ["guest", "ops"]},
    ],
}

REQUEST = st.tuples(
    st.sampled_from(IFACES),
    st.sampled_from(USERS),
    st.lists(st.sampled_from(TOPIC_LEVELS), min_size=1, max_size=3).map("/".join),
    st.booleans(),
    st.sampled_from([b"", b"p"]),
    st.sampled_from(
        [Properties(), Properties(response_topic="r"), Properties(correlation_data=b"c")]
    ),
    st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(REQUEST, min_size=1, max_size=30))
def test_cached_gate_agrees_with_the_engine(requests: list[Any]) -> None:
    from edge_broker.authz.acl_mqtt import check_delivery, check_publish

    acl = Acl.load(MIXED)
    gate = AclGate(acl, cache_limit=7)  # small: the cache empties and refills during the run
    for interface, user, topic, retain, payload, props, egress in requests:
        identity = ident(interface=interface, username=user)
        subject = acl.for_identity(identity)
        packet = Publish(topic, payload, 0, retain, properties=props)
        if egress:
            got = gate.check_deliver(identity, BrokerMessage(topic, payload, 0, retain, props))
            want = check_delivery(subject, packet)
        else:
            got = gate.check_publish(identity, BrokerMessage(topic, payload, 0, retain, props))
            want = check_publish(subject, packet)
        assert got is not None
        assert (got.allowed, got.rule) == (want.allowed, want.rule_id), (identity, topic, egress)
