"""``lint`` for the site ACL (authz/acl_lint.py): rules that can never apply."""

from __future__ import annotations

from typing import Any

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_config import Flow, Message, load_acl_config
from edge_broker.authz.acl_lint import AclFinding, lint_acl


def config(default: str, rules: list[dict[str, Any]], subjects: list[dict[str, Any]],
           policies: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    return {"enabled": True, "default_permission": default, "rules": rules,
            "subjects": subjects, "policies": policies}  # fmt: skip


def rule(ident: str, permission: str, keys: list[str], messages: list[str] | None = None,
         flows: list[str] | None = None) -> dict[str, Any]:  # fmt: skip
    out: dict[str, Any] = {"id": ident, "messages": messages or ["put"],
                           "permission": permission, "key_exprs": keys}  # fmt: skip
    if flows is not None:
        out["flows"] = flows
    return out


def kinds(data: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.kind, f.subject) for f in lint_acl(load_acl_config(data))]


def test_clean_config_has_no_findings() -> None:
    data = config("deny", [rule("r", "allow", ["a/**"]), rule("d", "deny", ["a/secret"])],
                  [{"id": "s"}], [{"rules": ["r", "d"], "subjects": ["s"]}])  # fmt: skip
    assert lint_acl(load_acl_config(data)) == []


def test_disabled() -> None:
    findings = lint_acl(load_acl_config({"enabled": False}))
    assert [f.kind for f in findings] == ["disabled"]


def test_unused_rules_and_subjects() -> None:
    data = config(
        "deny",
        [rule("used", "allow", ["a"]), rule("orphan", "allow", ["b"])],
        [{"id": "s"}, {"id": "lonely"}, {"id": "empty-policy"}],
        [{"rules": ["used"], "subjects": ["s"]}, {"rules": [], "subjects": ["empty-policy"]}],
    )
    assert kinds(data) == [
        ("unused-rule", "rule 'orphan'"),
        ("unused-subject", "subject 'lonely'"),
        ("unused-subject", "subject 'empty-policy'"),
    ]


def test_allow_rules_under_default_allow() -> None:
    data = config("allow", [rule("pointless", "allow", ["a"]), rule("d", "deny", ["b"])],
                  [{"id": "s"}], [{"rules": ["pointless", "d"], "subjects": ["s"]}])  # fmt: skip
    assert kinds(data) == [("allow-under-default-allow", "rule 'pointless'")]


def test_liveliness_messages_never_occur() -> None:
    data = config("deny", [rule("l", "allow", ["a"], messages=["put", "liveliness_token"])],
                  [{"id": "s"}], [{"rules": ["l"], "subjects": ["s"]}])  # fmt: skip
    findings = lint_acl(load_acl_config(data))
    assert [(f.kind, f.subject) for f in findings] == [("unmapped-message", "rule 'l'")]
    assert "liveliness_token" in findings[0].message


def test_allow_included_in_deny_of_same_scope_is_shadowed() -> None:
    data = config(
        "deny",
        [rule("ok", "allow", ["a/b/c", "x/y"]), rule("block", "deny", ["a/**"])],
        [{"id": "s"}],
        [{"rules": ["ok", "block"], "subjects": ["s"]}],
    )
    findings = lint_acl(load_acl_config(data))
    assert len(findings) == 1
    finding = findings[0]
    assert (finding.kind, finding.subject) == ("shadowed-by-deny", "rule 'ok'")
    assert "'a/b/c'" in finding.message and "'block'" in finding.message
    assert str(finding).startswith("rule 'ok': shadowed-by-deny:")
    # Cross-check with the compiled ACL: the shadowed key is denied, the other allowed.
    acl = Acl.load(data)
    assert acl.decide((None, None, None), Flow.INGRESS, Message.PUT, "a/b/c").rule_id == "block"
    assert acl.decide((None, None, None), Flow.INGRESS, Message.PUT, "x/y").rule_id == "ok"


def test_deny_in_another_scope_does_not_shadow() -> None:
    # The deny covers only egress, or only another subject: the allow still applies elsewhere.
    data = config(
        "deny",
        [rule("ok", "allow", ["a/b"]), rule("block", "deny", ["a/**"], flows=["egress"])],
        [{"id": "s"}],
        [{"rules": ["ok", "block"], "subjects": ["s"]}],
    )
    assert kinds(data) == []
    data = config(
        "deny",
        [rule("ok", "allow", ["a/b"]), rule("block", "deny", ["a/**"])],
        [{"id": "s", "interfaces": ["lo", "eth0"]}, {"id": "t", "interfaces": ["lo"]}],
        [{"rules": ["ok"], "subjects": ["s"]}, {"rules": ["block"], "subjects": ["t"]}],
    )
    assert kinds(data) == []


def test_partial_overlap_is_not_shadowing() -> None:
    data = config("deny", [rule("ok", "allow", ["a/*"]), rule("block", "deny", ["a/b"])],
                  [{"id": "s"}], [{"rules": ["ok", "block"], "subjects": ["s"]}])  # fmt: skip
    assert kinds(data) == []


def test_verbatim_gap_reminder_under_default_allow() -> None:
    data = config(
        "allow",
        [rule("d", "deny", ["dev/**"]), rule("v", "deny", ["dev/@raw"])],
        [{"id": "s"}],
        [{"rules": ["d", "v"], "subjects": ["s"]}],
    )
    findings = lint_acl(load_acl_config(data))
    assert [(f.kind, f.subject) for f in findings] == [("verbatim-gap", "rule 'd'")]
    assert isinstance(findings[0], AclFinding) and "@raw" in findings[0].message
