"""Seed 004 reproduced on the compiled ACL: the sample config, subject combinations, the
priority pseudocode with both default permissions, and every matching-table row as an ACL
decision (request matched by inclusion)."""

from __future__ import annotations

from typing import Any

import json5
import pytest

from edge_broker.authz.acl import Acl, AclDecision
from edge_broker.authz.acl_config import (
    AclError,
    AclMessage,
    Flow,
    load_acl_config,
    load_acl_json5,
)
from edge_broker.identity import Identity
from tests.seed004_tables import MATCHING_TABLE

# The seed's sample, verbatim except two things the seed gets wrong as JSON5: the section is
# wrapped in braces (the seed shows a fragment) and the stray "," in `,]` after the usernames
# is removed (JSON5 has no array elisions; see test_seed_sample_with_stray_comma_is_refused).
SEED_SAMPLE = """
{ access_control: {
  "enabled": true,
  "default_permission": "deny",

  "rules":
  [
    {
      "id": "allow pub/sub on test/demo",
      "messages": [
        "put",
        "delete",
        "declare_subscriber",
      ],
      "flows":["egress","ingress"],
      "permission": "allow",
      "key_exprs": [
        "test/demo"
      ],
    },
 ],

 "subjects": [
  {
    "id": "loopback interface",
    "interfaces": [
      "lo0",
      "lo",
    ],
  },
  {
    "id": "usernames on any interface",
    "usernames": [
      "zenoh_instance_1",
      "zenoh_instance_2",
    ]
  },
 ],

 "policies": [
  {
    "rules": ["allow pub/sub on test/demo"],
    "subjects": [
      "loopback interface",
      "usernames on any interface",
    ]
  }
 ],
} }
"""

RULE = "allow pub/sub on test/demo"
ALL_FLOWS = (Flow.INGRESS, Flow.EGRESS)


@pytest.fixture(scope="module")
def sample() -> Acl:
    # the broker's reader (authz/json5_text.py), checked against the json5 package's
    acl = Acl.compile(load_acl_json5(SEED_SAMPLE, "config.json5"))
    reference = json5.loads(SEED_SAMPLE)["access_control"]
    assert acl.config == load_acl_config(reference, "config.json5: access_control")
    return acl


def ident(interface: str | None = None, cn: str | None = None, user: str | None = None) -> Identity:
    return Identity(client_id="c", method="anonymous", interface=interface, cert_cn=cn,
                    username=user)  # fmt: skip


def test_seed_sample_with_stray_comma_is_refused_clearly() -> None:
    broken = SEED_SAMPLE.replace('"zenoh_instance_2",\n    ]', '"zenoh_instance_2",\n    ,]')
    assert broken != SEED_SAMPLE
    with pytest.raises(AclError, match="not valid JSON5"):
        load_acl_json5(broken)


@pytest.mark.parametrize("interface", ["lo", "lo0"])
@pytest.mark.parametrize("flow", ALL_FLOWS)
@pytest.mark.parametrize(
    "message", [AclMessage.PUT, AclMessage.DELETE, AclMessage.DECLARE_SUBSCRIBER]
)
def test_loopback_may_pub_sub_on_test_demo(
    sample: Acl, interface: str, flow: Flow, message: AclMessage
) -> None:
    assert sample.decide(ident(interface), flow, message, "test/demo") == AclDecision(True, RULE)


@pytest.mark.parametrize(
    "message", [AclMessage.QUERY, AclMessage.REPLY, AclMessage.DECLARE_QUERYABLE]
)
def test_other_messages_fall_to_default_deny(sample: Acl, message: AclMessage) -> None:
    assert sample.decide(ident("lo"), Flow.INGRESS, message, "test/demo") == AclDecision(False)


def test_other_interfaces_and_keys_are_denied(sample: Acl) -> None:
    assert not sample.decide(ident("eth0"), Flow.INGRESS, AclMessage.PUT, "test/demo").allowed
    assert not sample.decide(ident("lo"), Flow.INGRESS, AclMessage.PUT, "test/demo/a").allowed
    assert not sample.decide(ident("lo"), Flow.INGRESS, AclMessage.PUT, "test/**").allowed


@pytest.mark.parametrize("user", ["zenoh_instance_1", "zenoh_instance_2"])
def test_listed_usernames_on_any_interface(sample: Acl, user: str) -> None:
    for interface in ("eth0", "wlan0", None):
        decision = sample.decide(
            ident(interface, user=user), Flow.EGRESS, AclMessage.PUT, "test/demo"
        )
        assert decision == AclDecision(True, RULE)
    assert not sample.decide(
        ident("eth0", user="other"), Flow.EGRESS, AclMessage.PUT, "test/demo"
    ).allowed


def test_for_identity_is_reused_per_message(sample: Acl) -> None:
    subject = sample.for_identity(ident("lo", user="zenoh_instance_1"))
    assert subject.allows(Flow.INGRESS, AclMessage.PUT, "test/demo")
    assert not subject.allows(Flow.INGRESS, AclMessage.QUERY, "test/demo")
    assert sample.for_identity(ident("lo", user="zenoh_instance_1")) is subject  # memoised


# --- subject combinations ("example subject" of the seed) -----------------------------------

COMBO_CONFIG: dict[str, Any] = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [{"id": "r", "messages": ["put"], "permission": "allow", "key_exprs": ["k"]}],
    "subjects": [
        {
            "id": "example subject",
            "interfaces": ["lo0", "en0"],
            "cert_common_names": ["example.zenoh.io"],
            "usernames": ["zenoh-example1", "zenoh-example2"],
        }
    ],
    "policies": [{"rules": ["r"], "subjects": ["example subject"]}],
}


def test_subject_is_the_cartesian_product() -> None:
    acl = Acl.load(COMBO_CONFIG)
    assert len(acl.combinations) == 4
    for interface in ("lo0", "en0"):
        for user in ("zenoh-example1", "zenoh-example2"):
            who = ident(interface, "example.zenoh.io", user)
            assert acl.decide(who, Flow.INGRESS, AclMessage.PUT, "k").allowed
    # Each list is an AND with the others: one attribute off or missing -> no match.
    for who in (
        ident("eth0", "example.zenoh.io", "zenoh-example1"),
        ident("lo0", "other.io", "zenoh-example1"),
        ident("lo0", "example.zenoh.io", "zenoh-example3"),
        ident("lo0", None, "zenoh-example1"),
        ident("lo0", "example.zenoh.io", None),
    ):
        assert not acl.decide(who, Flow.INGRESS, AclMessage.PUT, "k").allowed


def test_subject_without_lists_matches_everyone() -> None:
    config = dict(COMBO_CONFIG, subjects=[{"id": "example subject"}])
    acl = Acl.load(config)
    for who in (ident(), ident("x", "y", "z")):
        assert acl.decide(who, Flow.INGRESS, AclMessage.PUT, "k") == AclDecision(True, "r")


def test_or_across_subjects_in_policies() -> None:
    config = dict(
        COMBO_CONFIG,
        subjects=[{"id": "a", "interfaces": ["lo"]}, {"id": "b", "usernames": ["bob"]}],
        policies=[{"rules": ["r"], "subjects": ["a"]}, {"rules": ["r"], "subjects": ["b"]}],
    )
    acl = Acl.load(config)
    assert acl.decide(ident("lo"), Flow.INGRESS, AclMessage.PUT, "k").allowed
    assert acl.decide(ident("eth0", user="bob"), Flow.INGRESS, AclMessage.PUT, "k").allowed
    assert not acl.decide(ident("eth0", user="eve"), Flow.INGRESS, AclMessage.PUT, "k").allowed


# --- priority: explicit deny > explicit allow > default_permission --------------------------


def priority_acl(default: str, deny: list[str], allow: list[str]) -> Acl:
    rules = []
    if deny:
        rules.append({"id": "deny", "messages": ["put"], "permission": "deny", "key_exprs": deny})
    if allow:
        rules.append(
            {"id": "allow", "messages": ["put"], "permission": "allow", "key_exprs": allow}
        )
    return Acl.load(
        {
            "enabled": True,
            "default_permission": default,
            "rules": rules,
            "subjects": [{"id": "all"}],
            "policies": [{"rules": [r["id"] for r in rules], "subjects": ["all"]}],
        }
    )


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_explicit_deny_beats_explicit_allow(default: str) -> None:
    acl = priority_acl(default, deny=["a/b"], allow=["a/**"])
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "a/b") == AclDecision(False, "deny")


def test_default_deny_allows_only_explicit_allows() -> None:
    acl = priority_acl("deny", deny=["a/b"], allow=["a/**"])
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "a/c") == AclDecision(True, "allow")
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "b") == AclDecision(False, None)


def test_default_allow_never_consults_allow_rules() -> None:
    acl = priority_acl("allow", deny=["a/b"], allow=["a/**"])
    # Allowed by default, not by the allow rule: the seed's pseudocode skips the allow tree.
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "a/c") == AclDecision(True, None)
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "zzz") == AclDecision(True, None)


@pytest.mark.parametrize("deny", ["test/demo/a", "test/demo/*", "test/demo/**"])
def test_seed_default_allow_example(deny: str) -> None:
    # "a request on test/demo/a will match ... and be denied. However ... a request on
    # test/** will not match (since it is a superset) and ... will be allowed."
    acl = priority_acl("allow", deny=[deny], allow=[])
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "test/demo/a") == AclDecision(
        False, "deny"
    )
    assert acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "test/**") == AclDecision(True)


@pytest.mark.parametrize("default", ["allow", "deny"])
def test_disabled_acl_allows_everything(default: str) -> None:
    acl = Acl.load({"enabled": False, "default_permission": default})
    decision = acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "anything")
    assert decision.allowed and decision.rule_id is None


@pytest.mark.parametrize(("default", "allowed"), [("allow", True), ("deny", False)])
def test_empty_lists_leave_the_default(default: str, allowed: bool) -> None:
    acl = Acl.load(
        {
            "enabled": True,
            "default_permission": default,
            "rules": [],
            "subjects": [],
            "policies": [],
        }
    )
    for message in AclMessage:
        assert acl.decide(ident("lo"), Flow.EGRESS, message, "a/b").allowed is allowed


def test_absent_default_permission_is_deny() -> None:
    acl = Acl.load({"enabled": True, "rules": [], "subjects": [], "policies": []})
    assert not acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, "a").allowed


def test_absent_flows_mean_both() -> None:
    acl = priority_acl("deny", deny=[], allow=["x"])
    for flow in ALL_FLOWS:
        assert acl.decide(ident(), flow, AclMessage.PUT, "x").allowed


def test_flow_restricted_rule() -> None:
    acl = Acl.load(
        {
            "enabled": True,
            "default_permission": "allow",
            "rules": [
                {
                    "id": "no-egress",
                    "messages": ["put"],
                    "flows": ["egress"],
                    "permission": "deny",
                    "key_exprs": ["secret/**"],
                }
            ],
            "subjects": [{"id": "field", "interfaces": ["wlan0"]}],
            "policies": [{"rules": ["no-egress"], "subjects": ["field"]}],
        }
    )
    field = ident("wlan0")
    assert acl.decide(field, Flow.INGRESS, AclMessage.PUT, "secret/x").allowed
    assert acl.decide(field, Flow.EGRESS, AclMessage.PUT, "secret/x") == AclDecision(
        False, "no-egress"
    )
    assert acl.decide(ident("eth0"), Flow.EGRESS, AclMessage.PUT, "secret/x").allowed


# --- the three matching tables as ACL decisions ---------------------------------------------

TABLE = MATCHING_TABLE


@pytest.mark.parametrize(("request_ke", "rule_ke", "match"), TABLE)
def test_table_rows_under_default_deny(request_ke: str, rule_ke: str, match: bool) -> None:
    acl = priority_acl("deny", deny=[], allow=[rule_ke])
    decision = acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, request_ke)
    assert decision == (AclDecision(True, "allow") if match else AclDecision(False))


@pytest.mark.parametrize(("request_ke", "rule_ke", "match"), TABLE)
def test_table_rows_under_default_allow(request_ke: str, rule_ke: str, match: bool) -> None:
    acl = priority_acl("allow", deny=[rule_ke], allow=[])
    decision = acl.decide(ident(), Flow.INGRESS, AclMessage.PUT, request_ke)
    assert decision == (AclDecision(False, "deny") if match else AclDecision(True))


def test_merged_subject_holds_the_union_of_its_combinations_scopes() -> None:
    acl = Acl.load(
        {
            "enabled": True,
            "rules": [
                {"id": "p", "messages": ["put"], "flows": ["ingress"], "permission": "allow",
                 "key_exprs": ["a/**"]},
                {"id": "q", "messages": ["query"], "flows": ["egress"], "permission": "allow",
                 "key_exprs": ["b"]},
            ],
            "subjects": [{"id": "lo", "interfaces": ["lo"]},
                         {"id": "bob", "usernames": ["bob"]}],
            "policies": [{"rules": ["p"], "subjects": ["lo"]},
                         {"rules": ["q"], "subjects": ["bob"]}],
        }
    )  # fmt: skip
    merged = acl.for_identity(ident("lo", user="bob"))
    assert set(merged.trees) == {(Flow.INGRESS, AclMessage.PUT), (Flow.EGRESS, AclMessage.QUERY)}
    assert len(merged.trees) == 2
    assert merged.trees.get((Flow.EGRESS, AclMessage.PUT)) is None
    assert merged.decide(Flow.INGRESS, AclMessage.PUT, "a/x") == AclDecision(True, "p")
    assert merged.decide(Flow.EGRESS, AclMessage.QUERY, "b") == AclDecision(True, "q")
    assert not merged.decide(Flow.EGRESS, AclMessage.PUT, "a/x").allowed


def test_a_subject_with_many_usernames_compiles_one_set_of_trees() -> None:
    users = [f"device-{i}" for i in range(500)]
    acl = Acl.load(
        {
            "enabled": True,
            "rules": [
                {"id": f"r{i}", "messages": ["put"], "permission": "allow",
                 "key_exprs": [f"site/{i}/**"]}
                for i in range(200)
            ],
            "subjects": [{"id": "fleet", "usernames": users, "interfaces": ["wlan0", "eth0"]}],
            "policies": [{"rules": [f"r{i}" for i in range(200)], "subjects": ["fleet"]}],
        }
    )  # fmt: skip
    assert len(acl.combinations) == 1000 and len(acl.subject_acls) == 1
    device = acl.for_identity(ident("wlan0", user="device-42"))
    assert device is acl.subject_acls[0]
    assert device.decide(Flow.INGRESS, AclMessage.PUT, "site/7/t") == AclDecision(True, "r7")
    assert not acl.decide(ident("wlan0", user="intruder"), Flow.INGRESS, AclMessage.PUT,
                          "site/7/t").allowed  # fmt: skip
