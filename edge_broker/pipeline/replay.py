"""Deciding logged requests again with the broker's own gate code (the what-if job's core).

:func:`policy_from_sections` builds :class:`~edge_broker.authz.policy.Policy` from a bundle's
policy sections exactly as ``edge-broker explain`` does (``parse_config`` then
``build_policy(config)``); :func:`decide` asks it about one
logged publish or subscribe. Pure Python: the Spark job calls it per partition, the tests call
it directly.

The identity is rebuilt from the record's ``client``, ``user``, ``tenant``, ``method``,
``roles``, ``cn`` and ``iface``; the publish from ``topic``, ``qos``, ``retain`` and the ACL
message kind ``message`` (``put``/``delete``/``query``/``reply``: a payload and the properties
that make it that kind), the subscribe from ``topic``, ``qos`` and ``message``
(``declare_queryable``: the user property ``queryable=true``). What a record lacks is not
guessed here: :mod:`.judge` decides every value it could take. Token grants are not in any
bundle (:mod:`.judge` uses the logged decision), and SMOKER claims (gate 6) are not consulted
(they live on the gateway, not in the bundle).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..authz.decision import Decision
from ..authz.request import Publication
from ..identity import Identity
from ..matching.names import DEFAULT_TENANT
from ..mqtt.packets import NO_PROPERTIES, Properties, Subscription

REPLAYED_ACTIONS = ("publish", "subscribe")


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: str  # allow | deny | disconnect
    gate: str | None
    rule: str | None
    rc: int


def policy_from_sections(sections: Mapping[str, Any], separator: str = "/") -> Any:
    """The broker's Policy for a bundle's policy sections (raises ConfigError if refused)."""
    from ..authz.policy import build_policy
    from ..config import parse_config

    config = parse_config({**sections, "topics": {"separator": separator}}, "<bundle>")
    return build_policy(config)


_POLICIES: dict[tuple[str, str], Any] = {}


def cached_policy(sections_json: str, separator: str = "/") -> Any:
    """:func:`policy_from_sections` of a JSON policy, built once per process: Spark reuses its
    Python workers, so each executor core builds a bundle's policy once, not once per partition."""
    key = (sections_json, separator)
    if key not in _POLICIES:
        if len(_POLICIES) >= 8:  # a job uses one or two policies; never grow without bound
            _POLICIES.clear()
        import json

        _POLICIES[key] = policy_from_sections(json.loads(sections_json), separator)
    return _POLICIES[key]


def _resolve(value: Any) -> Decision:
    if inspect.isawaitable(value):

        async def wait() -> Decision:
            result: Decision = await value
            return result

        return asyncio.run(wait())
    assert isinstance(value, Decision)
    return value


def identity_of(record: Mapping[str, Any]) -> Identity:
    roles = record.get("roles") or ()
    if isinstance(roles, str):
        roles = [r for r in roles.split(",") if r]
    return Identity(
        client_id=record.get("client") or "",
        method=record.get("method") or "anonymous",
        tenant=record.get("tenant") or DEFAULT_TENANT,
        username=record.get("user"),
        cert_cn=record.get("cn"),
        interface=record.get("iface"),
        roles=tuple(sorted(str(r) for r in roles)),
    )


_KIND_PROPERTIES = {
    "query": Properties(response_topic="reply/to"),
    "reply": Properties(correlation_data=b"c"),
}


def verdict_of(decision: Decision) -> Verdict:
    outcome = "allow" if decision.allowed else ("disconnect" if decision.disconnect else "deny")
    gate = decision.gate.value if decision.gate is not None else None
    return Verdict(outcome, gate, decision.rule, int(decision.reason_code))


def decide(policy: Any, record: Mapping[str, Any]) -> Verdict:
    """The policy's verdict on a logged publish or subscribe (``action``, ``topic``, ``qos``,
    ``retain``, ``message``); a client the policy would not admit at CONNECT gets the
    admission's refusal."""
    identity = identity_of(record)
    admitted = policy.admit(identity)
    if not admitted.allowed:
        return verdict_of(admitted)
    topic = record.get("topic") or ""
    qos = int(record.get("qos") or 0)
    kind = record.get("message") or record.get("msg")
    if record.get("action") == "publish":
        retain = bool(record.get("retain"))
        payload = b"" if kind == "delete" and retain else b"x"
        properties = _KIND_PROPERTIES.get(str(kind))
        message = Publication(
            topic, payload, qos, retain, NO_PROPERTIES if properties is None else properties
        )
        return verdict_of(_resolve(policy.check_publish(identity, message)))
    if record.get("action") == "subscribe":
        queryable = (("queryable", "true"),) if kind == "declare_queryable" else ()
        return verdict_of(
            _resolve(policy.check_subscribe(identity, Subscription(topic, qos), queryable))
        )
    raise ValueError(
        f"cannot replay action {record.get('action')!r}; only {', '.join(REPLAYED_ACTIONS)}"
    )
