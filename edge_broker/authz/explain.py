"""``edge-broker explain`` and ``edge-broker lint`` (AUTHZ.md §4): why a client would be allowed or
denied, and which rules can never matter — computed with the same objects the broker runs.

``explain`` builds the broker's :class:`~edge_broker.broker.policy.Policy` from the config and
asks each gate on its own (so every gate's verdict is shown, not only the first denial), then
the whole policy (the verdict the broker would give). ``lint`` looks at the permission sets,
their assignments, the authorizers and the site ACL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from ..auth.identity import Identity
from ..matching.errors import RuleError
from ..matching.mqtt_topics import parse_shared, validate_topic_name
from ..mqtt.packets import Subscription
from ..mqtt.reason_codes import ReasonCode
from .authorizers import PublishRequest, SubscribeRequest
from .decision import Decision, Gate
from .permissions import overlapping_pairs, shadowed_permissions
from .permissions_config import Assignment, PermissionsConfig


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
    policy: object, identity: Identity, action: str, topic: str, qos: int = 0, retain: bool = False
) -> tuple[list[GateVerdict], Decision]:
    """Every gate's verdict for one request, and the policy's overall decision."""
    from ..broker.message import Message
    from ..broker.policy import Policy

    assert isinstance(policy, Policy)
    pipeline = policy.pipeline
    verdicts: list[GateVerdict] = []
    base = Policy(policy.separator)  # gates 1-2 alone
    message = Message(topic, b"", qos, retain)  # what the gates judge of a PUBLISH
    if action == "publish":
        malformed = _topic_name_problem(topic, policy.separator)
        if malformed is not None:  # the broker's decoder stops it before any gate: no other verdict
            return [_verdict("syntax+reserved", malformed)], malformed
        first = await _resolve(base.check_publish(identity, message))
    else:
        subscription = Subscription(topic, qos)
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
                    PublishRequest(identity, topic, b"", qos, retain)
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
                else gate.check_subscribe(identity, Subscription(topic, qos), inner, group)
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
                else gate.check_subscribe(identity, Subscription(topic, qos), inner, group)
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
        final = await _resolve(policy.check_subscribe(identity, Subscription(topic, qos)))
    return verdicts, final


def _topic_name_problem(topic: str, separator: str) -> Decision | None:
    """Gate 1 for a PUBLISH as the broker applies it: a topic name with a wildcard (or empty,
    or with U+0000) is a malformed packet — DISCONNECT 0x90 (MQTT 5 §3.3.2.1, §4.7.3)."""
    try:
        validate_topic_name(topic, separator)
    except RuleError as exc:
        return Decision(
            False, Gate.SYNTAX, None, ReasonCode.TOPIC_NAME_INVALID, str(exc), disconnect=True
        )
    return None


def explain_sync(
    policy: object, identity: Identity, action: str, topic: str, qos: int = 0, retain: bool = False
) -> tuple[list[GateVerdict], Decision]:
    return asyncio.run(explain(policy, identity, action, topic, qos, retain))


_GLOB = frozenset("*?[")


def _pattern_covers(outer: str, inner: str) -> bool:
    """True when every string the shell pattern ``inner`` matches, ``outer`` matches too.
    Decided for the cases that occur (equal, ``*``, a literal, ``prefix*`` over a pattern with
    that literal prefix); anything else counts as not covered, so lint never reports a false
    shadow."""
    if outer == inner or outer == "*":
        return True
    if not _GLOB & set(inner):
        return fnmatchcase(inner, outer)
    if outer.endswith("*") and not _GLOB & set(outer[:-1]):
        literal = inner[: min((inner.index(c) for c in _GLOB & set(inner)), default=len(inner))]
        return literal.startswith(outer[:-1])
    return False


def _shadows(earlier: Assignment, later: Assignment) -> bool:
    """``earlier`` selects every client ``later`` selects: assignments are tried in order and
    the first that matches decides, so ``later`` never applies."""
    mine = dict(later.selectors)
    return all(
        key in mine and _pattern_covers(pattern, mine[key]) for key, pattern in earlier.selectors
    )


def shadowed_assignments(config: PermissionsConfig) -> dict[int, int]:
    """Index of each assignment that never applies → the index of the earlier one that always
    takes its clients first."""
    found: dict[int, int] = {}
    for j, later in enumerate(config.assignments):
        for i, earlier in enumerate(config.assignments[:j]):
            if _shadows(earlier, later):
                found[j] = i
                break
    return found


def lint_permissions(config: PermissionsConfig) -> list[str]:
    """Findings for ``[permissions]``: shadowed rules, overlaps that force per-delivery checks,
    sets nobody gets (not named, or named only by assignments an earlier one shadows), shadowed
    assignments, broad grants, and what unassigned clients get."""
    findings: list[str] = []
    shadowed = shadowed_assignments(config)
    named = {name for a in config.assignments for name in a.sets}
    used = {name for j, a in enumerate(config.assignments) if j not in shadowed for name in a.sets}
    for name, plist in config.sets.items():
        if name not in named:
            findings.append(
                f"permissions.sets.{name}: no [[permissions.assign]] names this set: it never applies"
            )
        elif name not in used:
            via = ", ".join(
                f"{config.assignments[j].label} (shadowed by {config.assignments[i].label})"
                for j, i in shadowed.items()
                if name in config.assignments[j].sets
            )
            findings.append(
                f"permissions.sets.{name}: nobody gets this set: only assignments that never "
                f"apply name it: {via}"
            )
        for later, earlier in shadowed_permissions(plist):
            findings.append(
                f"permissions.sets.{name}: rule {later.id!r} ({later.topic}) can never match: "
                f"rule {earlier.id!r} ({earlier.topic}) comes first and covers it"
            )
        for a, b in overlapping_pairs(plist):
            findings.append(
                f"permissions.sets.{name}: rules {a.id!r} ({a.topic}, {a.type.value}) and {b.id!r} "
                f"({b.topic}, {b.type.value}) overlap: wildcard subscriptions across them are checked per delivery"
            )
        for perm in plist.permissions:
            if perm.allow and perm.topic == "#" and perm.activity.value == "ALL":
                findings.append(
                    f"permissions.sets.{name}: rule {perm.id!r} allows everything ('#', all activities): "
                    "is this set meant to be a blacklist?"
                )
    for i, assignment in enumerate(config.assignments):
        if not assignment.selectors and i < len(config.assignments) - 1:
            findings.append(
                f"{assignment.label}: matches every client, so the {len(config.assignments) - i - 1} "
                "assignment(s) after it never apply"
            )
    for j, i in shadowed.items():
        if config.assignments[i].selectors:  # a catch-all is reported once, above
            findings.append(
                f"{config.assignments[j].label}: never applies: {config.assignments[i].label} "
                "comes first and selects every client it selects"
            )
    if config.sets and config.unassigned is None and all(a.selectors for a in config.assignments):
        findings.append(
            "permissions: clients that no assignment selects get no permissions, which seed 003 treats as "
            'ALLOW everything; add a catch-all [[permissions.assign]] or set permissions.unassigned = "deny"'
        )
    return findings
