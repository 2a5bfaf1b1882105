"""Judging a logged request again (pipeline/judge.py): every attribute a gate reads comes from
the record, or the request is reported as "cannot judge" naming the attribute and the rules;
never a guess. Pure Python: the broker's own gate code, no Spark."""

from __future__ import annotations

from typing import Any

from edge_broker.pipeline.judge import judge, witnesses
from edge_broker.pipeline.replay import policy_from_sections

SENSOR_SETS = {
    "sensor": {
        "rules": [
            {
                "id": "own-data",
                "topic": "sensors/${clientid}/#",
                "activity": "PUBLISH",
                "qos": "ZERO",
            },
            {"id": "status", "topic": "status/${clientid}", "retain": "RETAINED"},
        ]
    },
    "ops": {"rules": [{"id": "all", "topic": "#"}]},
}


def _policy(assign: list[dict[str, Any]], **extra: Any) -> tuple[Any, Any]:
    sections = {
        "permissions": {"unassigned": "deny", "sets": SENSOR_SETS, "assign": assign},
        **extra,
    }
    return policy_from_sections(sections), witnesses(sections)


PUB = {"action": "publish", "client": "a", "user": "u", "method": "password", "tenant": "~"}


def test_qos_condition_is_replayed_from_the_record() -> None:
    policy, seen = _policy([{"client_id": "*", "sets": ["sensor"]}])
    at = dict(PUB, topic="sensors/a/temp", retain=False)
    assert judge(policy, {**at, "qos": 0}, seen).verdict.outcome == "allow"  # type: ignore[union-attr]
    refused = judge(policy, {**at, "qos": 1}, seen).verdict
    assert refused is not None and refused.outcome == "deny"
    # the case: an older record without qos was replayed as QoS 0 (allowed)
    old = judge(policy, {k: v for k, v in at.items() if k != "retain"}, seen)
    assert old.verdict is None and old.missing == ("qos",) and "own-data" in old.rules


def test_retain_condition_is_replayed_and_unknown_retain_cannot_be_judged() -> None:
    policy, seen = _policy([{"client_id": "*", "sets": ["sensor"]}])
    at = dict(PUB, topic="status/a", qos=0)
    assert judge(policy, {**at, "retain": True}, seen).verdict.rule == "status"  # type: ignore[union-attr]
    plain = judge(policy, {**at, "retain": False}, seen).verdict
    assert plain is not None and plain.outcome == "deny"
    unknown = judge(policy, {**at, "qos": None}, seen)
    assert unknown.verdict is None and set(unknown.missing) == {"retain"}


def test_a_request_judged_alike_under_every_missing_value_is_judged() -> None:
    policy, seen = _policy([{"client_id": "*", "sets": ["ops"]}])
    old = judge(policy, dict(PUB, topic="anything/here"), seen)
    assert old.verdict is not None and old.verdict.outcome == "allow" and old.missing == ()


def test_roles_are_replayed_and_old_records_cannot_be_judged_by_role() -> None:
    policy, seen = _policy(
        [{"username": "ops", "sets": ["ops"]}, {"role": "sensor*", "sets": ["sensor"]}]
    )
    assert seen.roles == ("sensor",)
    at = dict(PUB, topic="sensors/a/temp", qos=0, retain=False)
    assert judge(policy, {**at, "roles": ["sensor-v2"]}, seen).verdict.outcome == "allow"  # type: ignore[union-attr]
    # a current record without roles: the client had none, so it is unassigned (denied)
    none = judge(policy, at, seen).verdict
    assert none is not None and none.outcome == "deny"
    # an older record (no qos) cannot say: the silent mis-replay
    old = judge(policy, {k: v for k, v in at.items() if k not in ("qos", "retain")}, seen)
    assert old.verdict is None and "roles" in old.missing
    # ... unless the assignment does not hinge on roles for this client (matched before)
    ops = judge(policy, dict(PUB, user="ops", topic="x/y"), seen)
    assert ops.verdict is not None and ops.verdict.outcome == "allow"


ACL = {
    "enabled": True,
    "default_permission": "allow",
    "rules": [
        {
            "id": "no-cmd",
            "permission": "deny",
            "messages": ["put", "delete", "query", "reply"],
            "key_exprs": ["cmd/**"],
        },
        {"id": "no-put", "permission": "deny", "messages": ["put"], "key_exprs": ["data/**"]},
    ],
    "subjects": [
        {"id": "wan", "interfaces": ["eth1"]},
        {"id": "plc", "cert_common_names": ["plc-1"]},
    ],
    "policies": [
        {"rules": ["no-cmd"], "subjects": ["wan"]},
        {"rules": ["no-put"], "subjects": ["plc"]},
    ],
}


def test_interface_and_certificate_cn_are_replayed() -> None:
    policy, seen = _policy([{"client_id": "*", "sets": ["ops"]}], acl=ACL)
    assert seen.ifaces == ("eth1",) and seen.cns == ("plc-1",)
    at = dict(PUB, topic="cmd/reboot", qos=0, retain=False)
    wan = judge(policy, {**at, "iface": "eth1"}, seen).verdict
    assert wan is not None and (wan.outcome, wan.rule) == ("deny", "no-cmd")
    assert judge(policy, {**at, "iface": "eth0"}, seen).verdict.outcome == "allow"  # type: ignore[union-attr]
    old = judge(policy, {k: v for k, v in at.items() if k not in ("qos", "retain")}, seen)
    assert old.verdict is None and old.missing == ("iface",) and "no-cmd" in old.rules


def test_the_acl_message_kind_is_never_guessed() -> None:
    """``no-put`` refuses puts but not queries; a record does not say which it was."""
    policy, seen = _policy([{"client_id": "*", "sets": ["ops"]}], acl=ACL)
    at = dict(PUB, topic="data/x", qos=0, retain=False, cn="plc-1")
    unknown = judge(policy, at, seen)
    assert unknown.verdict is None and unknown.missing == ("message",)
    put = judge(policy, {**at, "msg": "put"}, seen).verdict
    assert put is not None and put.rule == "no-put"
    assert judge(policy, {**at, "msg": "query"}, seen).verdict.outcome == "allow"  # type: ignore[union-attr]


def test_token_clients_keep_their_grants_verdict() -> None:
    policy, seen = _policy([{"client_id": "*", "sets": ["ops"]}], acl=ACL)
    token = dict(PUB, method="token", grants="ab12", qos=0, retain=False)
    denied = {**token, "topic": "x", "outcome": "deny", "gate": "token", "rc": 0x87}
    verdict = judge(policy, denied, seen).verdict
    assert verdict is not None and (verdict.outcome, verdict.gate) == ("deny", "token")
    # allowed by its grants: the candidate's ACL still applies
    allowed = {**token, "topic": "cmd/x", "iface": "eth1", "outcome": "allow", "gate": "token"}
    assert judge(policy, allowed, seen).verdict.rule == "no-cmd"  # type: ignore[union-attr]
    early = {**token, "topic": "x", "outcome": "deny", "gate": "authorizer"}
    assert judge(policy, early, seen).missing == ("grants",)
