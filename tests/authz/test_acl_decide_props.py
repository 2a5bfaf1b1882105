"""The compiled ACL (KeTrees per subject combination, merged per identity) against a direct,
rule-by-rule evaluation of seed 004's pseudocode on random configurations."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl import Acl, AclDecision
from edge_broker.authz.acl_config import AclMessage, Flow
from edge_broker.matching.keyexpr import includes, is_valid

CHUNKS = ["a", "b", "*", "**", "a$*", "$*b", "@a"]
keys = st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=3).map("/".join).filter(is_valid)
FLOWS = ["ingress", "egress"]
MESSAGES = ["put", "delete", "query"]
INTERFACES = ["lo", "eth0"]
CNS = ["A", "B"]
USERS = ["u", "v"]


def optional_list(values: list[str]) -> st.SearchStrategy[list[str] | None]:
    return st.one_of(st.none(), st.lists(st.sampled_from(values), min_size=1, max_size=2))


@st.composite
def configs(draw: st.DrawFn) -> dict[str, Any]:
    n_rules = draw(st.integers(0, 6))
    rules = []
    for i in range(n_rules):
        rule: dict[str, Any] = {
            "id": f"r{i}",
            "messages": draw(st.lists(st.sampled_from(MESSAGES), min_size=1, max_size=2)),
            "permission": draw(st.sampled_from(["allow", "deny"])),
            "key_exprs": draw(st.lists(keys, min_size=1, max_size=3)),
        }
        flows = draw(optional_list(FLOWS))
        if flows is not None:
            rule["flows"] = flows
        rules.append(rule)
    subjects = []
    for i in range(draw(st.integers(1, 4))):
        subject: dict[str, Any] = {"id": f"s{i}"}
        for key, values in (("interfaces", INTERFACES), ("cert_common_names", CNS),
                            ("usernames", USERS)):  # fmt: skip
            chosen = draw(optional_list(values))
            if chosen is not None:
                subject[key] = chosen
        subjects.append(subject)
    policies = []
    for _ in range(draw(st.integers(0, 4))):
        policies.append(
            {
                "rules": draw(
                    st.lists(st.sampled_from([r["id"] for r in rules] or ["x"]), max_size=3)
                )
                if rules
                else [],  # fmt: skip
                "subjects": draw(
                    st.lists(st.sampled_from([s["id"] for s in subjects]), max_size=2)
                ),  # fmt: skip
            }
        )
    return {
        "enabled": True,  # a disabled ACL is covered in test_acl_seed.py
        "default_permission": draw(st.sampled_from(["allow", "deny"])),
        "rules": rules,
        "subjects": subjects,
        "policies": policies,
    }


def direct(config: dict[str, Any], attrs: tuple[Any, Any, Any], flow: str, message: str,
           key: str) -> AclDecision:  # fmt: skip
    """Seed 004 pseudocode, evaluated rule by rule with pairwise inclusion."""
    interface, cn, user = attrs
    subjects = {s["id"]: s for s in config["subjects"]}

    def subject_matches(s: dict[str, Any]) -> bool:
        return all(
            s.get(field) is None or value in s[field]
            for field, value in (
                ("interfaces", interface),
                ("cert_common_names", cn),
                ("usernames", user),
            )  # fmt: skip
        )

    applicable: set[str] = set()
    for policy in config["policies"]:
        if any(subject_matches(subjects[sid]) for sid in policy["subjects"]):
            applicable.update(policy["rules"])

    def first(permission: str) -> str | None:
        for rule in config["rules"]:
            if (
                rule["id"] in applicable
                and rule["permission"] == permission
                and flow in rule.get("flows", FLOWS)
                and message in rule["messages"]
                and any(includes(k, key) for k in rule["key_exprs"])
            ):
                return str(rule["id"])
        return None

    denied_by = first("deny")
    if denied_by is not None:
        return AclDecision(False, denied_by)
    if config["default_permission"] == "allow":
        return AclDecision(True)
    allowed_by = first("allow")
    return AclDecision(allowed_by is not None, allowed_by)


attrs = st.tuples(
    st.sampled_from([None, *INTERFACES, "wlan0"]),
    st.sampled_from([None, *CNS]),
    st.sampled_from([None, *USERS]),
)


@settings(max_examples=200, deadline=None)
@given(
    configs(),
    st.lists(
        st.tuples(attrs, st.sampled_from(FLOWS), st.sampled_from(MESSAGES), keys),
        min_size=1,
        max_size=12,
    ),  # fmt: skip
)
def test_compiled_acl_equals_direct_pseudocode(
    config: dict[str, Any], requests: list[tuple[Any, str, str, str]]
) -> None:
    acl = Acl.load(config)
    for who, flow, message, key in requests:
        got = acl.decide(who, Flow(flow), AclMessage(message), key)
        assert got == direct(config, who, flow, message, key), (who, flow, message, key)
        # The per-identity SubjectAcl (what the broker keeps) gives the same answer.
        assert acl.for_subject(*who).decide(Flow(flow), AclMessage(message), key) == got
