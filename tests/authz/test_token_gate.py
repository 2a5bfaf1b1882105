"""The token gate (gate 4 for token clients, AUTHZ.md §2) on its own: allow-list decisions with
the deciding rule, syntax refusals under strict names, and "does not apply" for other clients."""

from __future__ import annotations

import pytest

from edge_broker.authz.decision import GateName
from edge_broker.authz.grants import Grants
from edge_broker.authz.request import Publication
from edge_broker.authz.token_gate import TokenGate
from edge_broker.broker.message import Message
from edge_broker.identity import Identity
from edge_broker.mqtt.packets import NO_PROPERTIES, Subscription
from edge_broker.mqtt.reason_codes import ReasonCode

GRANTS = [
    {
        "tenant_ids": ["shop"],
        "allow_channels_pub": ["store.sell.#", "orders.(eu|us|a*).#"],
        "allow_channels_sub": ["store.?.status.#", "store.*.status"],
    },
    {"tenant_ids": ["depot"], "allow_channels_pub": ["events.>"], "allow_channels_sub": ["#"]},
]


def identity(tenant: str, sep: str = ".") -> Identity:
    grants = Grants.parse(
        [
            {
                **g,
                "allow_channels_pub": [r.replace(".", sep) for r in g["allow_channels_pub"]],
                "allow_channels_sub": [r.replace(".", sep) for r in g["allow_channels_sub"]],
            }
            for g in GRANTS
        ],
        sep,
    )
    return Identity("c", "token", tenant, grants=grants.for_tenant(tenant))


def publish(gate: TokenGate, who: Identity, topic: str):
    return gate.check_publish(who, Message(topic, b"", 0, False))


def subscribe(gate: TokenGate, who: Identity, pattern: str):
    return gate.check_subscribe(who, Subscription(pattern), pattern, None)


@pytest.mark.parametrize("sep", [".", "/"])
@pytest.mark.parametrize(
    ("tenant", "channel", "rule"),
    [
        ("shop", "store.sell", "store.sell.#"),
        ("shop", "store.sell.status.v2", "store.sell.#"),
        ("shop", "orders.asia.east", "orders.(eu|us|a*).#"),
        ("shop", "orders.ru", None),
        ("shop", "events.click", None),
        ("depot", "events.click", "events.>"),
        ("depot", "events", None),
        ("depot", "store.sell", None),
    ],
)
def test_publish_decisions_name_the_rule(sep, tenant, channel, rule):
    gate = TokenGate()
    d = publish(gate, identity(tenant, sep), channel.replace(".", sep))
    assert d is not None and d.gate is GateName.TOKEN
    if rule is None:
        assert d.denied and d.rule is None and d.reason_code == ReasonCode.NOT_AUTHORIZED
        assert "allow_channels_pub" in (d.reason or "") and repr(tenant) in (d.reason or "")
    else:
        assert d.allowed and d.rule == rule.replace(".", sep)


@pytest.mark.parametrize("sep", [".", "/"])
@pytest.mark.parametrize(
    ("tenant", "pattern", "rule"),
    [
        ("shop", "store.fi.status", "store.?.status.#"),
        ("shop", "store.*.status", "store.*.status"),
        ("shop", "store.*.status.v2", None),
        ("shop", "store.fi.status.v2", "store.?.status.#"),
        ("shop", "store.#", None),
        ("depot", "anything.at.all.>", "#"),
    ],
)
def test_subscribe_decisions_name_the_rule(sep, tenant, pattern, rule):
    gate = TokenGate()
    d = subscribe(gate, identity(tenant, sep), pattern.replace(".", sep))
    assert d is not None
    if rule is None:
        assert d.denied and "allow_channels_sub" in (d.reason or "")
    else:
        assert d.allowed and d.rule == rule.replace(".", sep)


def test_mqtt_plus_is_star_with_the_slash_separator():
    d = subscribe(TokenGate(), identity("shop", "/"), "store/+/status")
    assert d is not None and d.allowed and d.rule == "store/*/status"


def test_invalid_names_are_syntax_errors_not_denials():
    gate = TokenGate()
    who = identity("shop", "/")
    d = publish(gate, who, "store/sell/bad topic")
    assert d is not None and d.denied and d.reason_code == ReasonCode.TOPIC_NAME_INVALID
    d = subscribe(gate, who, "store//status")
    assert d is not None and d.denied and d.reason_code == ReasonCode.TOPIC_FILTER_INVALID
    d = subscribe(gate, who, "store/a#b")
    assert d is not None and d.reason_code == ReasonCode.TOPIC_FILTER_INVALID


def test_the_will_is_checked_as_a_publish():
    gate = TokenGate()
    who = identity("shop", "/")
    lwt = Publication("store/sell/lwt", b"", 0, False, NO_PROPERTIES)
    assert gate.check_will(who, lwt).allowed  # type: ignore[union-attr]
    d = gate.check_will(who, Publication("orders/ru", b"", 0, False, NO_PROPERTIES))
    assert d is not None and d.denied and "will topic" in (d.reason or "")


def test_the_gate_does_not_apply_without_token_grants():
    gate = TokenGate()
    anonymous = Identity("c", "anonymous")
    assert not gate.applies(anonymous)
    assert publish(gate, anonymous, "x") is None
    assert subscribe(gate, anonymous, "#") is None
    assert gate.check_will(anonymous, Publication("x", b"", 0, False, NO_PROPERTIES)) is None
    assert gate.delivers_need_check(identity("shop"), "#") is False
    assert gate.check_deliver(identity("shop"), object()) is None


def test_allowing_decisions_are_shared_per_rule_and_bounded():
    gate = TokenGate()
    who = identity("shop", "/")
    first = publish(gate, who, "store/sell/a")
    assert first is publish(gate, who, "store/sell/b")  # same rule, same Decision object
    from edge_broker.authz import token_gate

    for i in range(token_gate.ALLOW_CACHE_SIZE + 5):
        gate._allowed(f"rule-{i}")
    assert len(gate._allow) <= token_gate.ALLOW_CACHE_SIZE
    again = publish(gate, who, "store/sell/a")
    assert again is not None and again.allowed and again.rule == "store/sell/#"
