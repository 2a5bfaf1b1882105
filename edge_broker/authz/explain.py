"""``edge-broker explain`` (AUTHZ.md §4): why a client would be allowed or denied, computed with
the same objects the broker runs.

It takes the broker's :class:`~edge_broker.authz.policy.Policy` (built from the config by
:func:`~edge_broker.authz.policy.build_policy`) and asks each gate on its own (so every gate's
verdict is shown, not only the first denial), then the whole policy (the verdict the broker
would give). A PUBLISH is judged as the :class:`~edge_broker.authz.request.Publication` the
broker builds for it, with an empty payload and no properties.
"""

from __future__ import annotations

from collections.abc import Awaitable
from dataclasses import dataclass

from ..identity import Identity
from ..matching.errors import RuleError
from ..matching.mqtt_topics import parse_shared, validate_topic_name
from ..mqtt.reason_codes import ReasonCode
from .authorizers import PublishRequest, SubscribeRequest
from .decision import Decision, GateName
from .policy import Policy
from .request import NO_PUBLISH_PROPERTIES, Publication, PublishProperties, SubscribeFilter


@dataclass(frozen=True, slots=True)
class GateVerdict:
    gate: str
    verdict: str  # "allow", "deny", "does not apply", "not configured", "next"
    rule: str | None = None
    detail: str | None = None

    def line(self) -> str:
        rule = f' rule "{self.rule}"' if self.rule else ""
        detail = f" — {self.detail}" if self.detail else ""
        return f"  {self.gate:<12} {self.verdict}{rule}{detail}"


def _verdict(gate: str, decision: Decision | None) -> GateVerdict:
    if decision is None:
        return GateVerdict(gate, "does not apply")
    if decision.allowed:
        extra = "deliveries re-checked per topic" if decision.recheck else None
        return GateVerdict(gate, "allow", decision.rule, extra)
    verdict = "disconnect" if decision.disconnect else "deny"
    return GateVerdict(
        gate, verdict, decision.rule, f"0x{int(decision.reason_code):02X} {decision.reason}"
    )


async def _resolve(value: Decision | Awaitable[Decision]) -> Decision:
    return value if isinstance(value, Decision) else await value


async def explain(
    policy: Policy,
    identity: Identity,
    action: str,
    topic: str,
    qos: int = 0,
    retain: bool = False,
    properties: PublishProperties = NO_PUBLISH_PROPERTIES,
) -> tuple[list[GateVerdict], Decision]:
    """Every gate's verdict for one request, and the policy's overall decision. ``properties``
    are the PUBLISH's (the command line passes the codec's empty ``Properties``, as the broker
    would for a PUBLISH without any, so an authorizer reads every MQTT 5 field)."""
    policy = policy.unrecorded()  # explaining a request is not a request: no audit, no count
    pipeline = policy.pipeline
    verdicts: list[GateVerdict] = []
    base = Policy(policy.separator)  # gates 1-2 alone
    # what the gates judge of a PUBLISH (the broker's Message is this Publication)
    message = Publication(topic, b"", qos, retain, properties)
    if action == "publish":
        malformed = _topic_name_problem(topic, policy.separator)
        if malformed is not None:  # the broker's decoder stops it before any gate: no other verdict
            return [_verdict("syntax+reserved", malformed)], malformed
        first = await _resolve(base.check_publish(identity, message))
    else:
        subscription = SubscribeFilter(topic, qos)
        first = await _resolve(base.check_subscribe(identity, subscription))
    verdicts.append(_verdict("syntax+reserved", first))
    if pipeline is not None:
        inner = topic
        group = None
        shared = (
            parse_shared(topic, policy.separator)
            if action == "subscribe" and first.allowed
            else None
        )
        if shared is not None:
            group, inner = shared.group, shared.filter
        if pipeline.authorizers is None:
            verdicts.append(GateVerdict("authorizers", "not configured"))
        else:
            if action == "publish":
                decided = await pipeline.authorizers.authorize_publish(
                    PublishRequest(identity, topic, b"", qos, retain, False, properties)
                )
            else:
                decided = await pipeline.authorizers.authorize_subscribe(
                    SubscribeRequest(identity, inner, qos, group)
                )
            verdicts.append(
                _verdict("authorizers", decided) if decided else GateVerdict("authorizers", "next")
            )
        if identity.grants is not None and pipeline.token_gate is not None:
            gate = pipeline.token_gate
            answer = (
                gate.check_publish(identity, message)
                if action == "publish"
                else gate.check_subscribe(identity, SubscribeFilter(topic, qos), inner, group)
            )
            verdicts.append(_verdict("token", answer))
        elif pipeline.permissions is not None:
            try:
                _, label = pipeline.permissions.list_for(identity)
            except Exception as exc:  # a placeholder the identity cannot fill
                label = f"cannot bind: {exc}"
            answer = (
                pipeline.permissions.check_publish(identity, topic, qos, retain)
                if action == "publish"
                else pipeline.permissions.check_subscribe(identity, inner, qos, group)
            )
            v = _verdict("permissions", answer)
            verdicts.append(
                GateVerdict(
                    v.gate,
                    v.verdict,
                    v.rule,
                    f"{v.detail + '; ' if v.detail else ''}set from {label}",
                )
            )
        else:
            verdicts.append(GateVerdict("permissions", "not configured"))
        for gate in pipeline.gates:
            name = getattr(gate, "gate", None)
            label = name.value if name is not None else type(gate).__name__
            answer = (
                gate.check_publish(identity, message)
                if action == "publish"
                else gate.check_subscribe(identity, SubscribeFilter(topic, qos), inner, group)
            )
            verdict = _verdict(label, answer)
            describe = getattr(gate, "describe_subject", None)  # the site ACL: who it sees
            if describe is not None:
                detail = "; ".join(d for d in (verdict.detail, describe(identity)) if d)
                verdict = GateVerdict(verdict.gate, verdict.verdict, verdict.rule, detail)
            verdicts.append(verdict)
    if action == "publish":
        final = await _resolve(policy.check_publish(identity, message))
    else:
        final = await _resolve(policy.check_subscribe(identity, SubscribeFilter(topic, qos)))
    return verdicts, final


def _topic_name_problem(topic: str, separator: str) -> Decision | None:
    """Gate 1 for a PUBLISH as the broker applies it: a topic name with a wildcard (or empty,
    or with U+0000) is a malformed packet — DISCONNECT 0x90 (MQTT 5 §3.3.2.1, §4.7.3)."""
    try:
        validate_topic_name(topic, separator)
    except RuleError as exc:
        return Decision(
            False, GateName.SYNTAX, None, ReasonCode.TOPIC_NAME_INVALID, str(exc), disconnect=True
        )
    return None


def explanation_text(
    identity: Identity,
    action: str,
    topic: str,
    qos: int,
    verdicts: list[GateVerdict],
    final: Decision,
) -> str:
    """What ``edge-broker explain`` prints for one request (the admin API shows the same)."""
    who = f"client {identity.client_id!r} (method {identity.method}, tenant {identity.tenant}"
    who += f", username {identity.username!r}" if identity.username else ""
    who += f", roles {','.join(identity.roles)}" if identity.roles else ""
    lines = [f"{action} {topic!r} QoS {qos} by {who}):"]
    lines += [verdict.line() for verdict in verdicts]
    if final.allowed:
        note = " (deliveries checked per topic)" if final.recheck else ""
        lines.append(f"=> ALLOWED{note}")
    else:
        gate = final.gate.value if final.gate else "policy"
        rule = f' rule "{final.rule}"' if final.rule else ""
        lines.append(f"=> DENIED by {gate}{rule}: 0x{int(final.reason_code):02X} {final.reason}")
    return "\n".join(lines)
