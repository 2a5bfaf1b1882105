"""Seed 003 TopicPermission semantics, containment and the no-leak property."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.permissions import (
    PermissionBindError,
    PermissionConfigError,
    PermissionList,
    make_permission,
    overlapping_pairs,
    parse_permission_list,
    shadowed_permissions,
)
from edge_broker.matching.mqtt_topics import topic_matches


def plist(*rules: dict[str, object], default: str | None = None) -> PermissionList:
    return parse_permission_list(list(rules), "t", default)


def test_empty_list_allows_and_nonempty_denies_by_default() -> None:
    assert plist().check_publish("a", 0, False).allowed
    assert not plist({"topic": "x"}).check_publish("a", 0, False).allowed
    assert plist({"topic": "x"}, default="allow").check_publish("a", 0, False).allowed
    assert not plist(default="deny").check_publish("a", 0, False).allowed


def test_first_match_wins_and_names_the_rule() -> None:
    perms = plist(
        {"id": "no-admin", "topic": "admin/#", "type": "DENY"}, {"id": "all", "topic": "#"}
    )
    denied = perms.check_publish("admin/x", 0, False)
    assert (
        not denied.allowed and denied.permission is not None and denied.permission.id == "no-admin"
    )
    assert perms.check_publish("user/x", 0, False).permission.id == "all"  # type: ignore[union-attr]


def test_seed_example_client_own_topics() -> None:
    perms = plist({"topic": "${clientid}/#"}).bind("dev1", None, "~")
    assert perms.check_publish("dev1/temp", 1, False).allowed
    assert perms.check_publish("dev1", 1, False).allowed  # '#' also matches the parent
    assert not perms.check_publish("dev2/temp", 1, False).allowed


def test_qos_activity_retain_attributes() -> None:
    perms = plist(
        {"topic": "a", "qos": "ZERO_ONE", "activity": "PUBLISH", "retain": "NOT_RETAINED"},
        {"topic": "b", "activity": "SUBSCRIBE"},
    )
    assert perms.check_publish("a", 1, False).allowed
    assert not perms.check_publish("a", 2, False).allowed
    assert not perms.check_publish("a", 0, True).allowed
    assert not perms.check_subscribe("a", 0).allowed
    assert perms.check_subscribe("b", 2).allowed
    assert not perms.check_publish("b", 0, False).allowed


def test_shared_subscription_attributes() -> None:
    perms = plist(
        {"topic": "s/#", "shared_subscription": "SHARED", "shared_group": "workers"},
        {"topic": "n/#", "shared_subscription": "NOT_SHARED"},
    )
    assert perms.check_subscribe("s/x", 0, "workers").allowed
    assert not perms.check_subscribe("s/x", 0, "others").allowed
    assert not perms.check_subscribe("s/x", 0, None).allowed
    assert perms.check_subscribe("n/x", 0, None).allowed
    assert not perms.check_subscribe("n/x", 0, "g").allowed


def test_true_containment_never_admits_a_wider_filter() -> None:
    perms = plist({"topic": "a/+"})
    assert perms.check_subscribe("a/x", 0).allowed
    assert perms.check_subscribe("a/+", 0).allowed
    assert not perms.check_subscribe("a/#", 0).allowed
    assert not perms.check_subscribe("#", 0).allowed


def test_overlap_with_earlier_deny_marks_recheck() -> None:
    perms = plist({"id": "no-admin", "topic": "admin/#", "type": "DENY"}, {"topic": "#"})
    verdict = perms.check_subscribe("#", 0)
    assert verdict.allowed and verdict.recheck
    assert not perms.check_delivery("admin/secret", 0).allowed
    assert perms.check_delivery("user/x", 0).allowed
    exact = perms.check_subscribe("user/+", 0)
    assert exact.allowed and not exact.recheck


def test_default_allow_with_deny_list_rechecks_wildcards() -> None:
    perms = plist({"topic": "admin/#", "type": "DENY"}, default="allow")
    assert perms.check_subscribe("#", 0).recheck
    assert not perms.check_subscribe("admin/#", 0).allowed
    assert not perms.check_subscribe("admin/x", 0).allowed


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"topic": "a/#/b"}, "'#'"),
        ({"topic": ""}, "non-empty"),
        ({"topic": "a", "qos": "THREE"}, "qos 'THREE'"),
        ({"topic": "a", "activity": "READ"}, "activity 'READ'"),
        ({"topic": "a", "type": "MAYBE"}, "type 'MAYBE'"),
        ({"topic": "a", "colour": "red"}, "unknown field"),
        ({"topic": "${user}/#"}, "unknown placeholder"),
        ({"topic": "a", "shared_group": "g/h"}, "shared_group"),
    ],
)
def test_invalid_permissions_name_rule_and_field(fields: dict[str, object], message: str) -> None:
    with pytest.raises(PermissionConfigError, match=message) as info:
        make_permission(fields, "r1")
    assert "'r1'" in str(info.value)


def test_placeholders_never_widen() -> None:
    perms = plist({"topic": "devices/${clientid}/#"}, {"topic": "t/${username}/${tenant}"})
    bound = perms.bind("c1", "alice", "acme")
    assert bound.check_publish("t/alice/acme", 0, False).allowed
    for bad in ("+", "#", "a/b", "x\x00"):
        with pytest.raises(PermissionBindError):
            perms.bind(bad, "alice", "acme")
    with pytest.raises(PermissionBindError, match="has no username"):
        perms.bind("c1", None, "acme")
    assert plist({"topic": "a"}).bind("+", None, "~").check_publish("a", 0, False).allowed


def test_lint_helpers() -> None:
    perms = plist(
        {"id": "wide", "topic": "a/#"},
        {"id": "narrow", "topic": "a/b", "qos": "ONE"},
        {"id": "deny", "topic": "a/+/c", "type": "DENY"},
    )
    assert [(s.id, by.id) for s, by in shadowed_permissions(perms)] == [
        ("narrow", "wide"),
        ("deny", "wide"),
    ]
    assert [(a.id, b.id) for a, b in overlapping_pairs(perms)] == [("wide", "deny")]


# -- the no-leak property over a tiny alphabet -----------------------------------------------

LEVELS = ["a", "b", "$x"]
TOPICS = ["/".join(p) for n in (1, 2, 3) for p in itertools.product(LEVELS, repeat=n)]
FILTER_LEVELS = st.sampled_from(["a", "b", "+", "$x"])


@st.composite
def filters(draw: st.DrawFn) -> str:
    levels = draw(st.lists(FILTER_LEVELS, min_size=1, max_size=3))
    if draw(st.booleans()):
        levels.append("#")
    return "/".join(levels)


@st.composite
def permission_lists(draw: st.DrawFn) -> PermissionList:
    rules = [
        {
            "topic": draw(filters()),
            "type": draw(st.sampled_from(["ALLOW", "DENY"])),
            "qos": draw(st.sampled_from(["ALL", "ZERO", "ONE_TWO", "TWO"])),
            "activity": draw(st.sampled_from(["ALL", "SUBSCRIBE", "PUBLISH"])),
        }
        for _ in range(draw(st.integers(0, 6)))
    ]
    return plist(*rules, default=draw(st.sampled_from([None, "allow", "deny"])))


@settings(max_examples=500, deadline=None)
@given(permission_lists(), filters(), st.integers(0, 2))
def test_a_wildcard_never_delivers_what_an_exact_subscription_could_not_get(
    perms: PermissionList, subscription: str, qos: int
) -> None:
    verdict = perms.check_subscribe(subscription, qos)
    if not verdict.allowed:
        return
    for topic in TOPICS:
        if not topic_matches(subscription, topic):
            continue
        delivered = not verdict.recheck or perms.check_delivery(topic, qos).allowed
        if delivered:
            assert perms.check_subscribe(topic, qos).allowed, (subscription, topic, qos)


def _first_applicable(perms: PermissionList, pred) -> bool | None:  # type: ignore[no-untyped-def]
    for perm in perms.permissions:
        if pred(perm):
            return perm.allow
    return None


@settings(max_examples=500, deadline=None)
@given(permission_lists(), st.sampled_from(TOPICS), st.integers(0, 2), st.booleans())
def test_publish_equals_a_linear_first_match(
    perms: PermissionList, topic: str, qos: int, retain: bool
) -> None:
    expected = _first_applicable(
        perms, lambda p: topic_matches(p.topic, topic) and p.applies_to_publish(qos, retain)
    )
    got = perms.check_publish(topic, qos, retain)
    assert got.allowed == (perms.default_allows if expected is None else expected)
