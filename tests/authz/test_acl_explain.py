"""The ACL's verdict as ``explain`` text and as the pipeline's Decision (AUTHZ.md §3, §4)."""

from __future__ import annotations

import pytest

from edge_broker.authz.acl import Acl, AclDecision
from edge_broker.authz.acl_config import AclMessage, Flow
from edge_broker.authz.acl_gate import acl_decision
from edge_broker.authz.decision import GateName
from edge_broker.identity import Identity
from edge_broker.matching.errors import RuleError
from edge_broker.mqtt.reason_codes import ReasonCode

ACL = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [
        {"id": "no-admin", "messages": ["put"], "permission": "deny", "key_exprs": ["admin/**"]},
        {"id": "open", "messages": ["put"], "permission": "allow", "key_exprs": ["**"]},
    ],
    "subjects": [{"id": "all"}],
    "policies": [{"rules": ["no-admin", "open"], "subjects": ["all"]}],
}


def test_denial_by_rule_names_gate_and_rule() -> None:
    decision = Acl.load(ACL).decide((None, None, None), Flow.INGRESS, AclMessage.PUT, "admin/x")
    assert decision == AclDecision(False, "no-admin")
    assert decision.explain() == 'denied by acl rule "no-admin"'
    pipeline = acl_decision(decision, "publish to admin/x (put)")
    assert pipeline.denied and pipeline.gate is GateName.ACL and pipeline.rule == "no-admin"
    assert pipeline.reason_code is ReasonCode.NOT_AUTHORIZED
    assert pipeline.reason == 'publish to admin/x (put): denied by acl rule "no-admin"'


def test_allow_and_default_texts() -> None:
    acl = Acl.load(ACL)
    allowed = acl.decide((None, None, None), Flow.INGRESS, AclMessage.PUT, "a/b")
    assert allowed.explain() == 'allowed by acl rule "open"'
    assert acl_decision(allowed, "").allowed and acl_decision(allowed, "").rule == "open"
    default = acl.decide((None, None, None), Flow.INGRESS, AclMessage.QUERY, "a/b")
    assert default.explain() == "denied by acl default_permission"
    assert acl_decision(default, "").rule is None
    disabled = Acl.load({"enabled": False}).decide((None, None, None), Flow.EGRESS,
                                                    AclMessage.PUT, "x")  # fmt: skip
    assert disabled.explain() == "allowed by acl: access control is disabled"


def test_unrepresentable_reason_is_explained() -> None:
    decision = AclDecision(False, None, "topic not representable as a key expression: a//b")
    assert decision.explain().startswith("denied by acl: topic not representable")


def test_decide_refuses_an_invalid_key_expression() -> None:
    # The ACL API takes key expressions; MQTT callers go through acl_mqtt, which denies.
    with pytest.raises(RuleError):
        Acl.load(ACL).decide((None, None, None), Flow.INGRESS, AclMessage.PUT, "a//b")


def test_matching_subjects_for_explain() -> None:
    acl = Acl.load(
        {
            "enabled": True,
            "rules": [{"id": "r", "messages": ["put"], "permission": "allow", "key_exprs": ["x"]}],
            "subjects": [
                {"id": "lo", "interfaces": ["lo"]},
                {"id": "bob-tls", "usernames": ["bob"], "cert_common_names": ["dev1"]},
                {"id": "anyone"},
                {"id": "unused", "interfaces": ["lo"]},
            ],
            "policies": [{"rules": ["r"], "subjects": ["lo", "bob-tls", "anyone"]}],
        }
    )
    who = Identity(client_id="c", method="certificate", interface="lo", cert_cn="dev1",
                   username="bob")  # fmt: skip
    assert acl.matching_subjects(who) == ("lo", "bob-tls", "anyone")
    other = Identity(client_id="c", method="anonymous", interface="eth0")
    assert acl.matching_subjects(other) == ("anyone",)
