"""The broker's policy with the claims gate after it (AUTHZ.md §2: claims are gate 6, last).

``WithClaims(inner, gate)`` answers what ``inner`` (the broker's ``Policy``: gates 1–5) answers,
then, when ``inner`` allows, what the :class:`~edge_broker.claims.gate.ClaimsGate` says. A
subscription either marks ``recheck`` is checked again on every delivery, through both. It keeps
``inner``'s interface (``check_publish`` / ``check_will`` / ``check_subscribe`` may return an
awaitable, ``check_deliver`` is synchronous) so the broker's handlers call it unchanged, and it
passes every other attribute through to ``inner``.

``Broker.start`` wraps ``broker.policy`` with it when claims are enabled. Once the authorization
pipeline (``authz/pipeline.py``) takes PolicyGate objects, the ``ClaimsGate`` belongs in its gate
list instead and this wrapper goes; until then a component that replaces ``broker.policy`` at
run time must wrap the new policy again (``WithClaims(new, broker.claims.gate)``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..auth.identity import Identity
from ..authz.decision import Decision
from ..matching.errors import RuleError
from ..matching.mqtt_topics import parse_shared
from ..mqtt.packets import Publish, Subscription, Will
from .gate import ClaimsGate

MaybeDecision = Decision | Awaitable[Decision]


def _combine(first: Decision, second: Decision | None) -> Decision:
    """Both gates allow → allowed, ``recheck`` if either asks for it; else the first denial."""
    if first.denied or second is None:
        return first
    if second.denied:
        return second
    if second.recheck and not first.recheck:
        return Decision(True, first.gate, first.rule, first.reason_code, first.reason,
                        first.disconnect, True)
    return first


def _then(verdict: MaybeDecision, after: Callable[[], Decision | None]) -> MaybeDecision:
    if isinstance(verdict, Decision):
        return _combine(verdict, after()) if verdict.allowed else verdict
    return _later(verdict, after)


async def _later(verdict: Awaitable[Decision], after: Callable[[], Decision | None]) -> Decision:
    decision = await verdict
    return _combine(decision, after()) if decision.allowed else decision


class WithClaims:
    """``inner`` then the claims gate (module docstring)."""

    def __init__(self, inner: Any, gate: ClaimsGate) -> None:
        self.inner = inner
        self.gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @property
    def has_delivery_gates(self) -> bool:
        return bool(self.inner.has_delivery_gates)

    def check_publish(self, identity: Identity, topic: str, packet: Publish) -> MaybeDecision:
        verdict: MaybeDecision = self.inner.check_publish(identity, topic, packet)
        return _then(verdict, lambda: self.gate.check_publish(identity, topic, packet))

    def check_will(self, identity: Identity, will: Will) -> MaybeDecision:
        verdict: MaybeDecision = self.inner.check_will(identity, will)
        return _then(verdict, lambda: self.gate.check_will(identity, will))

    def check_subscribe(self, identity: Identity, subscription: Subscription) -> MaybeDecision:
        verdict: MaybeDecision = self.inner.check_subscribe(identity, subscription)

        def claims() -> Decision | None:
            separator: str = self.inner.separator
            try:
                shared = parse_shared(subscription.topic_filter, separator)
            except RuleError:
                return None  # gate 1 of ``inner`` has refused it already
            inner_filter = shared.filter if shared is not None else subscription.topic_filter
            group = shared.group if shared is not None else None
            return self.gate.check_subscribe(identity, subscription, inner_filter, group)

        return _then(verdict, claims)

    def check_deliver(self, session: Any, message: Any) -> Decision:
        decision: Decision = self.inner.check_deliver(session, message)
        if decision.denied:
            return decision
        identity: Identity = session.identity
        return _combine(decision, self.gate.check_deliver(identity, message))
