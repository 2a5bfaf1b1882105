"""Validation of the ``access_control`` section (authz/acl_config.py): every error names the
entry and what to change, every problem is reported at once, nothing is half-loaded."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from edge_broker.authz.acl_config import (
    AclConfig,
    AclError,
    AclMessage,
    AclSubject,
    Flow,
    Permission,
    SubjectCombination,
    load_acl_config,
    load_acl_json5,
)

GOOD: dict[str, Any] = {
    "enabled": True,
    "default_permission": "deny",
    "rules": [
        {
            "id": "r1",
            "messages": ["put", "delete"],
            "flows": ["ingress"],
            "permission": "allow",
            "key_exprs": ["a/**", "b/*"],
        },
        {"id": "r2", "messages": ["query"], "permission": "deny", "key_exprs": ["x"]},
    ],
    "subjects": [{"id": "s1", "interfaces": ["lo"]}, {"id": "s2"}],
    "policies": [{"id": "p1", "rules": ["r1", "r2"], "subjects": ["s1", "s2"]}],
}


def with_(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    data.update(changes)
    return data


def problems(data: Any) -> tuple[str, ...]:
    with pytest.raises(AclError) as info:
        load_acl_config(data)
    return info.value.problems


def test_good_config_loads_into_frozen_values() -> None:
    config = load_acl_config(GOOD)
    assert isinstance(config, AclConfig)
    assert config.enabled and config.default_permission is Permission.DENY
    r1, r2 = config.rules
    assert r1.messages == (AclMessage.PUT, AclMessage.DELETE)
    assert r1.flows == (Flow.INGRESS,)
    assert [k.text for k in r1.key_exprs] == ["a/**", "b/*"]
    assert set(r2.flows) == {Flow.INGRESS, Flow.EGRESS}  # absent -> both
    assert config.subjects[1] == AclSubject("s2")
    assert config.policies[0].id == "p1"
    with pytest.raises(AttributeError):
        config.enabled = False  # type: ignore[misc]


def test_whole_zenoh_config_in_json5() -> None:
    text = """{
      mode: "router",  // other Zenoh keys are not ours to judge
      access_control: { enabled: true, default_permission: 'allow',
        rules: [], subjects: [], policies: [] },
    }"""
    config = load_acl_json5(text)
    assert config.default_permission is Permission.ALLOW


def test_combinations() -> None:
    subject = AclSubject("s", interfaces=("lo", "en0"), usernames=("u",))
    assert subject.combinations() == (
        SubjectCombination("lo", None, "u"),
        SubjectCombination("en0", None, "u"),
    )
    assert AclSubject("any").combinations() == (SubjectCombination(),)
    assert SubjectCombination().describe() == "anyone"


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (with_(enabled="yes"), "enabled: is required and must be true or false"),
        ({k: v for k, v in GOOD.items() if k != "enabled"}, "enabled: is required"),
        (with_(default_permission="maybe"), "'maybe' is not one of allow, deny"),
        (with_(extra=1), "unknown key 'extra'"),
        (with_(rules="r1"), "rules: must be a list"),
        (with_(rules=[1]), "rules[0]: must be an object"),
        ({"enabled": True, "rules": []}, "config lists must be provided when enabled: add"),
    ],
)
def test_top_level_errors(data: Any, needle: str) -> None:
    assert any(needle in p for p in problems(data)), problems(data)


def rule_with(**changes: Any) -> dict[str, Any]:
    rule = dict(GOOD["rules"][0], **changes)
    return with_(rules=[rule, GOOD["rules"][1]])


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (rule_with(id=""), "rules[0]: 'id' must be a non-empty string"),
        (rule_with(messages=["push"]), "rules[0] (id 'r1'): messages: 'push' is not one of put"),
        (rule_with(messages=[]), "'messages' must not be empty"),
        (rule_with(flows=["sideways"]), "flows: 'sideways' is not one of ingress, egress"),
        (rule_with(flows=[]), "'flows' must not be empty"),
        (rule_with(permission="perhaps"), "permission 'perhaps' is not one of allow, deny"),
        (rule_with(key_exprs=["a//b"]), "key_exprs: invalid key expression a//b: "),
        (rule_with(key_exprs=["a/#"]), "MQTT '#' is written '**'"),
        (rule_with(key_exprs=["**/**"]), "write a single '**'"),
        (rule_with(key_exprs=[3]), "key_exprs[0]: each item must be a non-empty string"),
        (rule_with(key_exprs="a"), "'key_exprs' must be a list of strings"),
        (rule_with(colour="red"), "unknown key 'colour'"),
    ],
)
def test_rule_errors_name_the_rule(data: Any, needle: str) -> None:
    found = problems(data)
    assert any(needle in p for p in found), found


def test_missing_rule_fields() -> None:
    found = problems(with_(rules=[{"id": "r1"}, GOOD["rules"][1]]))
    text = "\n".join(found)
    for key in ("messages", "permission", "key_exprs"):
        assert f"'{key}' is required" in text


@pytest.mark.parametrize(
    ("subject", "needle"),
    [
        ({"id": "s1", "interfaces": []}, "'interfaces' must not be empty"),
        ({"id": "s1", "usernames": [""]}, "usernames[0]: each item must be a non-empty string"),
        ({"id": "s1", "link_protocols": ["tcp"]}, "'link_protocols' is not supported"),
        ({"id": "s1", "zids": ["aa"]}, "'zids' is not supported"),
        ({"id": "s1", "roles": ["x"]}, "unknown key 'roles'"),
    ],
)
def test_subject_errors(subject: dict[str, Any], needle: str) -> None:
    found = problems(with_(subjects=[subject, {"id": "s2"}]))
    assert any(needle in p and "subjects[0] (id 's1')" in p for p in found), found


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (with_(rules=GOOD["rules"] + [GOOD["rules"][0]]), "Rule id must be unique: 'r1'"),
        (with_(subjects=[{"id": "s1"}, {"id": "s1"}, {"id": "s2"}]), "Subject id must be unique"),
        (
            with_(policies=[GOOD["policies"][0], GOOD["policies"][0]]),
            "Policy id must be unique: 'p1'",
        ),
        (
            with_(policies=[{"rules": ["nope"], "subjects": ["s1"]}]),
            "policies[0]: rule 'nope' does not exist in rules list",
        ),
        (
            with_(policies=[{"rules": ["r1"], "subjects": ["ghost"]}]),
            "subject 'ghost' does not exist in subjects list",
        ),
        (with_(policies=[{"rules": ["r1"]}]), "'subjects' is required"),
        (with_(policies=[{"rules": ["r1"], "subjects": [], "when": 1}]), "unknown key 'when'"),
    ],
)
def test_cross_reference_errors(data: Any, needle: str) -> None:
    found = problems(data)
    assert any(needle in p for p in found), found


def test_every_problem_is_reported_at_once() -> None:
    data = with_(
        default_permission="maybe",
        rules=[rule_with(messages=["push"])["rules"][0], {"id": "r1", "messages": ["put"]}],
        policies=[{"rules": ["r9"], "subjects": ["s9"]}],
    )
    found = problems(data)
    assert len(found) >= 6
    text = "\n".join(found)
    for needle in ("maybe", "push", "'permission' is required", "Rule id must be unique",
                   "'r9'", "'s9'"):  # fmt: skip
        assert needle in text
    message = str(AclError(found))
    assert message.startswith(f"access_control: {len(found)} problem(s):")


def test_disabled_section_checks_shape_but_not_references() -> None:
    # Zenoh ignores the rest of a disabled section; its shape must still be valid.
    config = load_acl_config(
        {"enabled": False, "policies": [{"rules": ["ghost"], "subjects": ["nobody"]}]}
    )
    assert not config.enabled
    assert any("not one of" in p for p in problems({"enabled": False, "default_permission": 1}))


@pytest.mark.parametrize("data", [None, [], "enabled"])
def test_section_must_be_an_object(data: Any) -> None:
    assert "must be an object" in problems(data)[0]


def test_liveliness_messages_are_accepted() -> None:
    config = load_acl_config(rule_with(messages=["liveliness_token", "liveliness_query"]))
    assert config.rules[0].messages == (AclMessage.LIVELINESS_TOKEN, AclMessage.LIVELINESS_QUERY)


def test_invalid_json5() -> None:
    with pytest.raises(AclError, match="config.json5: 1 problem"):
        load_acl_json5("{ access_control: { enabled: true, ")


def test_same_structure_from_toml() -> None:
    import tomllib

    data = tomllib.loads(
        """
        enabled = true
        default_permission = "deny"

        [[rules]]
        id = "allow pub/sub on test/demo"
        messages = ["put", "delete", "declare_subscriber"]
        flows = ["egress", "ingress"]
        permission = "allow"
        key_exprs = ["test/demo"]

        [[subjects]]
        id = "loopback interface"
        interfaces = ["lo0", "lo"]

        [[policies]]
        rules = ["allow pub/sub on test/demo"]
        subjects = ["loopback interface"]
        """
    )
    config = load_acl_config(data, "edge-broker.toml: acl")
    assert config.rules[0].key_exprs[0].text == "test/demo"
    with pytest.raises(AclError, match=r"^edge-broker.toml: acl: 1 problem"):
        load_acl_config(dict(data, enabled="true"), "edge-broker.toml: acl")
