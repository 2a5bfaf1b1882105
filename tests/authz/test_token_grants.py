"""tenant_grants of seed 000: JSON shape, errors naming grant and rule, per-tenant compilation."""

from __future__ import annotations

from typing import Any

import pytest

from edge_broker.authz.grants import GrantError, Grants, TenantGrant
from edge_broker.matching.errors import RuleError

SEPARATORS = [".", "/"]


def s(text: str, sep: str) -> str:
    return text.replace(".", sep)


@pytest.mark.parametrize("sep", SEPARATORS)
def test_several_grants_for_different_tenant_sets(sep: str) -> None:
    grants = Grants.parse(
        [
            {
                "tenant_ids": ["eu", "us"],
                "allow_channels_pub": [s("orders.(eu|us|a*).#", sep)],
                "allow_channels_sub": [s("store.(sell|bay|b*).#", sep)],
            },
            {
                "tenant_ids": ["us"],
                "allow_channels_pub": [s("events.>", sep)],
                "allow_channels_sub": [s("store.?.status.#", sep)],
            },
        ],
        sep,
    )
    assert grants.tenants == {"eu", "us"}
    eu, us = grants.for_tenant("eu"), grants.for_tenant("us")
    assert eu is not None and us is not None
    assert eu.grant_indexes == (0,) and us.grant_indexes == (0, 1)
    assert eu.can_publish(s("orders.asia.east", sep)) == s("orders.(eu|us|a*).#", sep)
    assert eu.can_publish(s("events.click", sep)) is None
    assert us.can_publish(s("events.click", sep)) == s("events.>", sep)
    assert us.can_publish(s("events", sep)) is None
    assert eu.can_subscribe(s("store.fi.status", sep)) is None
    assert us.can_subscribe(s("store.fi.status", sep)) == s("store.?.status.#", sep)
    assert us.can_subscribe(s("store.bag.>", sep)) == s("store.(sell|bay|b*).#", sep)
    assert grants.for_tenant("asia") is None


def test_first_rule_in_grant_order_is_reported() -> None:
    grants = Grants.parse(
        [
            {"tenant_ids": ["t"], "allow_channels_pub": ["a/b"]},
            {"tenant_ids": ["t"], "allow_channels_pub": ["#"]},
        ]
    )
    t = grants.for_tenant("t")
    assert t is not None
    assert t.can_publish("a/b") == "a/b"
    assert t.can_publish("a/c") == "#"


def test_tenants_sharing_grants_share_the_compiled_rules() -> None:
    grants = Grants.parse([{"tenant_ids": ["a", "b"], "allow_channels_pub": ["x/#"]}])
    assert grants.for_tenant("a") is grants.for_tenant("b")


def test_empty_tenant_id_is_tilde_and_lookup_normalises() -> None:
    grants = Grants.parse([{"tenant_ids": ["", "~"], "allow_channels_pub": ["x"]}])
    assert grants.grants[0].tenant_ids == ("~",)
    assert grants.for_tenant("") is grants.for_tenant(None) is grants.for_tenant("~")


def test_missing_rule_lists_allow_nothing() -> None:
    grants = Grants.parse([{"tenant_ids": ["t"]}])
    t = grants.for_tenant("t")
    assert t is not None
    assert t.can_publish("a") is None and t.can_subscribe("#") is None


def test_round_trip_to_json() -> None:
    value = [{"tenant_ids": ["t"], "allow_channels_pub": ["a/#"], "allow_channels_sub": ["?"]}]
    grants = Grants.parse(value)
    assert grants.to_json() == value
    assert isinstance(grants.grants[0], TenantGrant)
    assert Grants.parse(grants.to_json()).to_json() == value


def test_invalid_channel_or_pattern_is_a_rule_error_not_a_denial() -> None:
    t = Grants.parse(
        [{"tenant_ids": ["t"], "allow_channels_pub": ["#"], "allow_channels_sub": ["#"]}]
    ).for_tenant("t")
    assert t is not None
    with pytest.raises(RuleError, match="wildcard"):
        t.can_publish("a/*")
    with pytest.raises(RuleError):
        t.can_subscribe("a/#/b")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({}, "tenant_grants: must be a list of grants, not an object"),
        ([], "tenant_grants: is empty; a token needs at least one grant"),
        (
            [1],
            "tenant_grants[0]: must be an object with keys tenant_ids, allow_channels_pub, "
            "allow_channels_sub, not a number",
        ),
        (
            [{"tenant_ids": ["t"], "allow_channel_pub": []}],
            "tenant_grants[0]: unknown key 'allow_channel_pub'",
        ),
        ([{"allow_channels_pub": []}], "tenant_grants[0]: missing 'tenant_ids'"),
        (
            [{"tenant_ids": "t"}],
            "tenant_grants[0].tenant_ids: must be a list of strings, not a string",
        ),
        ([{"tenant_ids": []}], "tenant_grants[0].tenant_ids: is empty"),
        ([{"tenant_ids": [None]}], "tenant_grants[0].tenant_ids[0]: must be a string, not null"),
        ([{"tenant_ids": ["a b"]}], "tenant_grants[0].tenant_ids[0]: a b: tenant contains ' '"),
        (
            [{"tenant_ids": ["t"], "allow_channels_sub": [True]}],
            "tenant_grants[0].allow_channels_sub[0]: must be a string, not a boolean",
        ),
        (
            [{"tenant_ids": ["t"]}, {"tenant_ids": ["u"], "allow_channels_pub": ["ok", "a/*/b"]}],
            "tenant_grants[1].allow_channels_pub[1]: a/*/b: '*' is not allowed in publish rules",
        ),
        (
            [{"tenant_ids": ["t"], "allow_channels_sub": ["store/sell|bay/status"]}],
            "tenant_grants[0].allow_channels_sub[0]: store/sell|bay/status: segment 'sell|bay': "
            "'|' outside parentheses",
        ),
    ],
)
def test_errors_name_the_grant_and_the_rule(value: Any, message: str) -> None:
    with pytest.raises(GrantError) as info:
        Grants.parse(value)
    assert str(info.value).startswith(message)


def test_limits_on_the_number_of_grants() -> None:
    with pytest.raises(GrantError, match="at most 256"):
        Grants.parse([{"tenant_ids": ["t"]}] * 257)
