"""MQTT actions on the site ACL (authz/acl_mqtt.py, AUTHZ.md §2 gate 5 mapping table): message
kinds, topic and filter mapping, refusal of what has no key expression (never fail open),
ingress and egress checks per subject, and the ``.`` separator."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl import Acl, AclDecision
from edge_broker.authz.acl_config import AclMessage, Flow
from edge_broker.authz.acl_mqtt import (
    AclRequest,
    check,
    check_delivery,
    check_publish,
    check_subscribe,
    filter_to_keyexpr,
    mqtt_publish_message,
    mqtt_subscribe_message,
    publish_request,
    subscribe_request,
    topic_to_keyexpr,
)
from edge_broker.identity import Identity
from edge_broker.matching.errors import RuleError
from edge_broker.mqtt.packets import Properties, Publish


@pytest.mark.parametrize(
    ("publish", "message"),
    [
        (Publish("t", b"x"), AclMessage.PUT),
        (Publish("t", b"", retain=False), AclMessage.PUT),  # empty but not retained: a put
        (Publish("t", b"x", retain=True), AclMessage.PUT),
        (Publish("t", b"", retain=True), AclMessage.DELETE),
        (Publish("t", b"q", properties=Properties(response_topic="r")), AclMessage.QUERY),
        (
            Publish("t", b"q", properties=Properties(response_topic="r", correlation_data=b"1")),
            AclMessage.QUERY,
        ),
        (Publish("t", b"a", properties=Properties(correlation_data=b"1")), AclMessage.REPLY),
        (
            Publish("t", b"", retain=True, properties=Properties(response_topic="r")),
            AclMessage.DELETE,
        ),
    ],
)
def test_publish_message_kinds(publish: Publish, message: AclMessage) -> None:
    assert mqtt_publish_message(publish) is message


def test_subscribe_message_kinds() -> None:
    assert mqtt_subscribe_message(Properties()) is AclMessage.DECLARE_SUBSCRIBER
    queryable = Properties(user_properties=(("queryable", "true"),))
    assert mqtt_subscribe_message(queryable) is AclMessage.DECLARE_QUERYABLE
    other = Properties(user_properties=(("queryable", "false"), ("x", "true")))
    assert mqtt_subscribe_message(other) is AclMessage.DECLARE_SUBSCRIBER


@pytest.mark.parametrize(
    ("mqtt_filter", "expr"),
    [
        ("a/+/b/#", "a/*/b/**"),
        ("#", "**"),
        ("+", "*"),
        ("+/#", "*/**"),
        ("a/#", "a/**"),
        ("a/b", "a/b"),
        ("$share/group/a/+", "a/*"),
    ],
)
def test_filter_mapping(mqtt_filter: str, expr: str) -> None:
    assert filter_to_keyexpr(mqtt_filter).text == expr


@pytest.mark.parametrize(
    "mqtt_filter",
    ["a//b", "/a", "a/", "$SYS/#", "a/$x", "a*/b", "a/#/b", "a+", "a/b?", "$share/g", "$share//a"],
)
def test_filters_without_key_expression_are_refused(mqtt_filter: str) -> None:
    with pytest.raises(RuleError, match="denies what it cannot represent"):
        filter_to_keyexpr(mqtt_filter)


@pytest.mark.parametrize("topic", ["a//b", "/a", "a/", "$SYS/broker/load", "a/*", "a/**",
                                   "x$y", "a/?", "a/+", ""])  # fmt: skip
def test_topics_without_key_are_refused(topic: str) -> None:
    with pytest.raises(RuleError):
        topic_to_keyexpr(topic)


def test_topic_mapping_and_separator() -> None:
    assert topic_to_keyexpr("a/b/c").text == "a/b/c"
    assert topic_to_keyexpr("dev/@raw", verbatims=frozenset({"@raw"})).text == "dev/@raw"
    assert topic_to_keyexpr("store.sell.status", ".").text == "store/sell/status"
    assert filter_to_keyexpr("store.*.status.#".replace("*", "+"), ".").text == "store/*/status/**"
    assert filter_to_keyexpr("$share.g.a.+", ".").text == "a/*"
    with pytest.raises(RuleError):
        topic_to_keyexpr("a/b.c", ".")  # "/" inside a level


def acl(default: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]] | None = None,
        policies: list[dict[str, Any]] | None = None) -> Acl:  # fmt: skip
    subjects = subjects if subjects is not None else [{"id": "all"}]
    if policies is None:
        policies = [{"rules": [r["id"] for r in rules], "subjects": [s["id"] for s in subjects]}]
    return Acl.load({"enabled": True, "default_permission": default, "rules": rules,
                     "subjects": subjects, "policies": policies})  # fmt: skip


def who(interface: str | None = "lo", user: str | None = None) -> Identity:
    return Identity(client_id="c", method="password", interface=interface, username=user)


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_unrepresentable_topics_are_denied_even_by_default_allow(default: str) -> None:
    everything = {"id": "all", "messages": ["put", "declare_subscriber"], "permission": "allow",
                  "key_exprs": ["**"]}  # fmt: skip
    subject = acl(default, [everything]).for_identity(who())
    decision = check_publish(subject, Publish("$SYS/x", b"1"))
    assert not decision.allowed and decision.rule_id is None
    assert decision.reason is not None and "not representable" in decision.reason
    assert not check_subscribe(subject, "a//b").allowed
    assert not check_delivery(subject, Publish("a/*", b"1")).allowed
    assert check_publish(subject, Publish("a/b", b"1")).allowed


def test_disabled_acl_allows_even_unrepresentable_topics() -> None:
    subject = Acl.load({"enabled": False}).for_identity(who())
    assert check_publish(subject, Publish("$SYS/x", b"1")).allowed
    assert check_subscribe(subject, "a//b").allowed


def test_ingress_publish_and_subscribe() -> None:
    rules = [
        {"id": "pub", "messages": ["put"], "flows": ["ingress"], "permission": "allow",
         "key_exprs": ["sensors/**"]},
        {"id": "sub", "messages": ["declare_subscriber"], "flows": ["ingress"],
         "permission": "allow", "key_exprs": ["cmd/*"]},
        {"id": "q", "messages": ["declare_queryable"], "permission": "allow",
         "key_exprs": ["rpc/**"]},
    ]  # fmt: skip
    subject = acl("deny", rules).for_identity(who())
    assert check_publish(subject, Publish("sensors/t1", b"20")) == AclDecision(True, "pub")
    assert not check_publish(subject, Publish("sensors/t1", b"", retain=True)).allowed  # delete
    assert check_subscribe(subject, "cmd/+") == AclDecision(True, "sub")
    assert check_subscribe(subject, "cmd/x") == AclDecision(True, "sub")
    assert not check_subscribe(subject, "cmd/#").allowed  # superset of the rule: not included
    assert not check_subscribe(subject, "#").allowed
    queryable = Properties(user_properties=(("queryable", "true"),))
    assert check_subscribe(subject, "rpc/+/x", queryable) == AclDecision(True, "q")
    assert not check_subscribe(subject, "rpc/+/x").allowed


def test_egress_deny_filters_deliveries_for_one_subject_only() -> None:
    rules = [{"id": "no-secrets-to-field", "messages": ["put"], "flows": ["egress"],
              "permission": "deny", "key_exprs": ["secret/**"]}]  # fmt: skip
    subjects = [{"id": "field", "interfaces": ["wlan0"]}]
    compiled = acl("allow", rules, subjects)
    field = compiled.for_identity(who("wlan0"))
    uplink = compiled.for_identity(who("eth0"))
    message = Publish("secret/key", b"k")
    assert check_delivery(field, message) == AclDecision(False, "no-secrets-to-field")
    assert check_delivery(uplink, message).allowed
    assert check_publish(field, message).allowed  # ingress is not restricted


def test_query_and_reply_are_distinct_messages() -> None:
    rules = [{"id": "rq", "messages": ["query"], "permission": "allow", "key_exprs": ["svc/**"]}]
    subject = acl("deny", rules).for_identity(who())
    request = Publish("svc/a", b"?", properties=Properties(response_topic="reply/1"))
    response = Publish("svc/a", b"!", properties=Properties(correlation_data=b"1"))
    assert check_publish(subject, request) == AclDecision(True, "rq")
    assert not check_publish(subject, response).allowed


def test_mqtt_parent_level_semantics_preserved() -> None:
    # MQTT "a/#" matches "a": the mapped "a/**" includes "a", so a subscriber on a/# that is
    # allowed the filter is also allowed deliveries on "a" under the same rule.
    rules = [{"id": "r", "messages": ["put", "declare_subscriber"], "permission": "allow",
              "key_exprs": ["a/**"]}]  # fmt: skip
    subject = acl("deny", rules).for_identity(who())
    assert check_subscribe(subject, "a/#").allowed
    assert check_delivery(subject, Publish("a", b"1")).allowed


def test_one_mapped_request_checked_for_every_subscriber() -> None:
    rules = [{"id": "field-no-cfg", "messages": ["put"], "flows": ["egress"],
              "permission": "deny", "key_exprs": ["dev/*/cfg"]}]  # fmt: skip
    compiled = acl("allow", rules, [{"id": "field", "interfaces": ["wlan0"]}])
    request = publish_request(Publish("dev/7/cfg", b"{}"))
    assert request == AclRequest(AclMessage.PUT, topic_to_keyexpr("dev/7/cfg"))
    verdicts = [
        check(compiled.for_identity(who(interface)), Flow.EGRESS, request)
        for interface in ("wlan0", "eth0", "wlan0")
    ]
    assert verdicts == [AclDecision(False, "field-no-cfg"), AclDecision(True),
                        AclDecision(False, "field-no-cfg")]  # fmt: skip


def test_unrepresentable_request_carries_its_refusal() -> None:
    request = subscribe_request("$SYS/#")
    assert request.key is None and request.message is AclMessage.DECLARE_SUBSCRIBER
    assert request.refusal is not None and "'$'" in request.refusal
    subject = acl("allow", []).for_identity(who())
    decision = check(subject, Flow.INGRESS, request)
    assert decision == AclDecision(False, None, request.refusal)
    assert check(Acl.load({"enabled": False}).for_identity(who()), Flow.INGRESS, request).allowed


def test_verbatim_levels_need_a_rule_naming_them() -> None:
    assert filter_to_keyexpr("sensors/@cal/+", verbatims=frozenset({"@cal"})).text == (
        "sensors/@cal/*"
    )
    for text in ("dev/@raw", "@x", "a/@"):
        with pytest.raises(RuleError, match="verbatim chunk that no ACL rule names"):
            topic_to_keyexpr(text, verbatims=frozenset({"@cal"}))
    with pytest.raises(RuleError, match="verbatim"):
        filter_to_keyexpr("cmd/@x/#")


def test_at_levels_cannot_slip_past_a_wildcard_deny() -> None:
    # Zenoh: "cmd/**" never includes "cmd/@evil". Mapped blindly, a default-allow ACL would let
    # the publish through and MQTT subscribers on cmd/# would get it.
    rules = [{"id": "no-cmd", "messages": ["put", "declare_subscriber"], "permission": "deny",
              "key_exprs": ["cmd/**"]}]  # fmt: skip
    compiled = acl("allow", rules)
    subject = compiled.for_identity(who())
    assert compiled.verbatims == frozenset() and subject.verbatims == frozenset()
    assert check_publish(subject, Publish("cmd/reboot", b"1")) == AclDecision(False, "no-cmd")
    evil = check_publish(subject, Publish("cmd/@evil", b"1"))
    assert not evil.allowed and evil.reason is not None and "'@evil'" in evil.reason
    assert not check_delivery(subject, Publish("cmd/@evil", b"1")).allowed
    assert check_publish(subject, Publish("other/x", b"1")).allowed


def test_named_verbatim_levels_follow_zenoh_semantics() -> None:
    rules = [
        {"id": "cal", "messages": ["put"], "permission": "allow", "key_exprs": ["sensors/@cal/*"]},
        {"id": "all", "messages": ["put"], "permission": "allow", "key_exprs": ["sensors/**"]},
    ]
    compiled = acl("deny", rules)
    assert compiled.verbatims == frozenset({"@cal"})
    subject = compiled.for_identity(who())
    assert check_publish(subject, Publish("sensors/@cal/t1", b"1")) == AclDecision(True, "cal")
    assert check_publish(subject, Publish("sensors/t1", b"1")) == AclDecision(True, "all")
    # "sensors/**" never includes a verbatim chunk, and "@cal" must be in second position.
    assert not check_publish(subject, Publish("sensors/@cal", b"1")).allowed
    assert not check_publish(subject, Publish("sensors/x/@cal/y", b"1")).allowed


def _mapped(text: str, separator: str, verbatims: frozenset[str]) -> str:
    try:
        return topic_to_keyexpr(text, separator, verbatims).text
    except RuleError:
        return "<refused>"


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from(["a", "b", "@a", "@b", "$", "a$", "*", "+", "#", "?", "x y", ""]),
        min_size=1,
        max_size=5,
    ),  # fmt: skip
    st.sampled_from([frozenset(), frozenset({"@a"})]),
)
def test_topic_fast_path_equals_level_by_level_mapping(
    levels: list[str], verbatims: frozenset[str]
) -> None:
    # With "." as separator the level-by-level path always runs; with "/" the fast path may.
    slash, dot = "/".join(levels), ".".join(levels)
    assert _mapped(slash, "/", verbatims) == _mapped(dot, ".", verbatims)
