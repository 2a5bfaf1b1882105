"""``lint`` for the site ACL (authz/acl_lint.py): rules that can never apply."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl import Acl
from edge_broker.authz.acl_config import AclMessage, Flow, load_acl_config
from edge_broker.authz.acl_lint import AclFinding, lint_acl
from edge_broker.matching.keyexpr import is_valid


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
    assert acl.decide((None, None, None), Flow.INGRESS, AclMessage.PUT, "a/b/c").rule_id == "block"
    assert acl.decide((None, None, None), Flow.INGRESS, AclMessage.PUT, "x/y").rule_id == "ok"


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
    # Not shadowed (eth0 clients get a/b); but a lo client matches both subjects, where
    # edge-broker's deny wins and Zenoh would allow: the migration note.
    assert kinds(data) == [("subject-overlap", "rule 'block'")]


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


def test_redundant_deny_under_default_deny() -> None:
    data = config(
        "deny",
        [
            rule("ok", "allow", ["a/**"]),
            rule("useful", "deny", ["a/secret"]),
            rule("noop", "deny", ["b/**"]),
            rule("other-message", "deny", ["a/**"], messages=["query"]),
        ],
        [{"id": "s"}],
        [{"rules": ["ok", "useful", "noop", "other-message"], "subjects": ["s"]}],
    )
    assert kinds(data) == [
        ("redundant-deny", "rule 'noop'"),
        ("redundant-deny", "rule 'other-message'"),
    ]
    # Removing them indeed changes no decision.
    kept = dict(data, rules=data["rules"][:2],
                policies=[{"rules": ["ok", "useful"], "subjects": ["s"]}])  # fmt: skip
    full, reduced = Acl.load(data), Acl.load(kept)
    for key in ("a/secret", "a/x", "b/y", "b/**", "a/**", "c"):
        for message in (AclMessage.PUT, AclMessage.QUERY):
            got = full.decide((None, None, None), Flow.INGRESS, message, key).allowed
            assert got == reduced.decide((None, None, None), Flow.INGRESS, message, key).allowed


# --- soundness: removing everything lint calls dead changes no decision ----------------------

CHUNKS = ["a", "b", "*", "**", "a$*", "@a"]
key_strategy = st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=3).map("/".join)
keys = key_strategy.filter(is_valid)


@st.composite
def lint_configs(draw: st.DrawFn) -> dict[str, Any]:
    rules = []
    for i in range(draw(st.integers(1, 6))):
        r = rule(
            f"r{i}",
            draw(st.sampled_from(["allow", "deny"])),
            draw(st.lists(keys, min_size=1, max_size=3, unique=True)),
            messages=draw(st.lists(st.sampled_from(["put", "query"]), min_size=1, unique=True)),
        )
        if draw(st.booleans()):
            r["flows"] = [draw(st.sampled_from(["ingress", "egress"]))]
        rules.append(r)
    subjects: list[dict[str, Any]] = [
        {"id": "any"},
        {"id": "lo", "interfaces": ["lo"]},
        {"id": "eth", "interfaces": ["eth0"]},
    ]
    policies = [
        {
            "rules": draw(st.lists(st.sampled_from([r["id"] for r in rules]), max_size=4)),
            "subjects": draw(st.lists(st.sampled_from(["any", "lo", "eth"]), max_size=2)),
        }
        for _ in range(draw(st.integers(0, 3)))
    ]
    return config(draw(st.sampled_from(["allow", "deny"])), rules, subjects, policies)


def without_dead(data: dict[str, Any], findings: list[AclFinding]) -> dict[str, Any]:
    whole = {
        f.rule_id
        for f in findings
        if f.kind in ("unused-rule", "allow-under-default-allow", "never-asked")
    }
    exprs = {(f.rule_id, f.key_expr) for f in findings
             if f.kind in ("shadowed-by-deny", "redundant-deny")}  # fmt: skip
    rules = []
    for r in data["rules"]:
        kept = [k for k in r["key_exprs"] if (r["id"], k) not in exprs]
        if r["id"] not in whole and kept:
            rules.append(dict(r, key_exprs=kept))
    ids = {r["id"] for r in rules}
    policies = [dict(p, rules=[x for x in p["rules"] if x in ids]) for p in data["policies"]]
    return dict(data, rules=rules, policies=policies)


@settings(max_examples=200, deadline=None)
@given(lint_configs(), st.lists(keys, min_size=1, max_size=6))
def test_removing_what_lint_calls_dead_changes_no_decision(
    data: dict[str, Any], requests: list[str]
) -> None:
    findings = lint_acl(load_acl_config(data))
    full, reduced = Acl.load(data), Acl.load(without_dead(data, findings))
    for who in ((None, None, None), ("lo", None, None), ("eth0", None, None)):
        for flow in (Flow.INGRESS, Flow.EGRESS):
            for message in (AclMessage.PUT, AclMessage.QUERY):
                for key in requests:
                    before = full.decide(who, flow, message, key).allowed
                    assert reduced.decide(who, flow, message, key).allowed == before, (
                        who, flow, message, key, [str(f) for f in findings])  # fmt: skip


def test_subject_overlap_note_matches_the_zenoh_divergence() -> None:
    # The configuration of test_acl_zenoh_router.py's divergence test: "lo" denies
    # k/secret, "anyone" allows k/**.
    data = config(
        "allow",
        [rule("deny-secret", "deny", ["k/secret"]), rule("allow-all", "allow", ["k/**"])],
        [{"id": "lo", "interfaces": ["lo"]}, {"id": "anyone"}],
        [{"rules": ["deny-secret", "allow-all"], "subjects": ["lo"]},
         {"rules": ["allow-all"], "subjects": ["anyone"]}],
    )  # fmt: skip
    findings = [f for f in lint_acl(load_acl_config(data)) if f.kind == "subject-overlap"]
    assert [(f.rule_id, f.subject) for f in findings] == [("deny-secret", "rule 'deny-secret'")]
    assert "'lo'" in findings[0].message and "'anyone'" in findings[0].message


def test_no_overlap_note_when_the_other_subject_denies_too_or_cannot_match() -> None:
    same_rules = config(
        "allow",
        [rule("d", "deny", ["k/secret"])],
        [{"id": "lo", "interfaces": ["lo"]}, {"id": "anyone"}],
        [{"rules": ["d"], "subjects": ["lo", "anyone"]}],
    )
    assert kinds(same_rules) == []
    disjoint = config(
        "allow",
        [rule("d", "deny", ["k/secret"])],
        [{"id": "lo", "interfaces": ["lo"]}, {"id": "eth", "interfaces": ["eth0"]}],
        [{"rules": ["d"], "subjects": ["lo"]}],
    )
    assert kinds(disjoint) == [("unused-subject", "subject 'eth'")]


def test_unused_catch_all_subject_still_overlaps_in_zenoh() -> None:
    # Zenoh 1.10 matches subjects named by no policy too (their verdict is the default), so
    # under default allow a declared catch-all voids the "lo" deny there; edge-broker ignores
    # subjects without policies.
    data = config(
        "allow",
        [rule("d", "deny", ["k/secret"])],
        [{"id": "lo", "interfaces": ["lo"]}, {"id": "anyone"}],
        [{"rules": ["d"], "subjects": ["lo"]}],
    )
    assert kinds(data) == [("unused-subject", "subject 'anyone'"), ("subject-overlap", "rule 'd'")]
    assert not Acl.load(data).decide(("lo", None, None), Flow.INGRESS, AclMessage.PUT,
                                     "k/secret").allowed  # fmt: skip


def test_never_asked_rules() -> None:
    data = config(
        "deny",
        [
            rule("egress-subs", "allow", ["a"], messages=["declare_subscriber"], flows=["egress"]),
            rule("both-flows", "allow", ["a"], messages=["declare_subscriber"]),
            rule("live", "allow", ["a"], messages=["liveliness_query"]),
        ],
        [{"id": "s"}],
        [{"rules": ["egress-subs", "both-flows", "live"], "subjects": ["s"]}],
    )
    assert kinds(data) == [
        ("never-asked", "rule 'egress-subs'"),
        ("unmapped-message", "rule 'live'"),
        ("never-asked", "rule 'live'"),
    ]


def test_deny_of_a_co_matching_subject_is_not_redundant() -> None:
    # Found by the soundness property: a loopback client matches "any" and "lo", so the "lo"
    # deny overrides the "any" allow and is not redundant.
    data = config(
        "deny",
        [rule("r0", "allow", ["a"]), rule("r1", "deny", ["a"])],
        [{"id": "any"}, {"id": "lo", "interfaces": ["lo"]}],
        [{"rules": ["r0"], "subjects": ["any"]}, {"rules": ["r1"], "subjects": ["lo"]}],
    )
    assert ("redundant-deny", "rule 'r1'") not in kinds(data)


def test_deny_of_a_more_general_subject_shadows() -> None:
    data = config(
        "deny",
        [rule("lo-allow", "allow", ["a/b"]), rule("global-deny", "deny", ["a/**"])],
        [{"id": "lo", "interfaces": ["lo"]}, {"id": "anyone"}],
        [{"rules": ["lo-allow"], "subjects": ["lo"]},
         {"rules": ["global-deny"], "subjects": ["anyone"]}],
    )  # fmt: skip
    assert ("shadowed-by-deny", "rule 'lo-allow'") in kinds(data)
    assert (
        not Acl.load(data).decide(("lo", None, None), Flow.INGRESS, AclMessage.PUT, "a/b").allowed
    )
