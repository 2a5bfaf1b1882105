"""The token gate: gate 4 of AUTHZ.md §2 for token-authenticated clients (seed 000).

The token's grants for the connection's tenant (``Identity.grants``, a
:class:`~edge_broker.authz.grants.CompiledTenantGrants` set by the ``token`` method) decide, as an
allow-list:

- publish (and the will at CONNECT): allowed when some ``allow_channels_pub`` rule matches the
  concrete channel (PATTERNS.md §3 publish rules);
- subscribe: allowed when some ``allow_channels_sub`` rule accepts the subscription pattern the
  client sent, segment by segment (PATTERNS.md §3 subscribe rules); ``$share/<group>/`` is not
  part of the pattern.

No matching rule → deny 0x87 with a Reason String saying that no rule of the token matches (the
Decision's rule is ``None``). Strict names apply under the token model (PATTERNS.md §1): a topic
that is not a valid channel is refused as Topic Name invalid (0x90), a filter that is not a valid
subscription pattern as Topic Filter invalid (0x8F). Deliveries are never re-checked: what a
client may receive is exactly what its accepted patterns select.

The gate does not apply (answers ``None``) to clients without token grants.
"""

from __future__ import annotations

from ..identity import Identity
from ..matching.errors import RuleError
from ..matching.names import shown
from ..mqtt.reason_codes import ReasonCode
from .decision import Decision, GateName, deny
from .grants import CompiledTenantGrants
from .request import Publication, SubscribeFilter


def _grants(identity: Identity) -> CompiledTenantGrants | None:
    grants = identity.grants
    return grants if isinstance(grants, CompiledTenantGrants) else None


ALLOW_CACHE_SIZE = 4096  # distinct allowing rules whose Decision is kept (frozen, shareable)


class TokenGate:
    """A :class:`~edge_broker.authz.gate.PolicyGate` over ``Identity.grants`` (module docstring).

    Allowing decisions are shared per rule text: building a Decision costs more than the rule
    lookup itself on the publish hot path.
    """

    __slots__ = ("_allow",)

    def __init__(self) -> None:
        self._allow: dict[str, Decision] = {}

    def _allowed(self, rule: str) -> Decision:
        decision = self._allow.get(rule)
        if decision is None:
            if len(self._allow) >= ALLOW_CACHE_SIZE:
                self._allow.clear()
            decision = self._allow[rule] = Decision(True, GateName.TOKEN, rule)
        return decision

    @property
    def gate(self) -> GateName:
        return GateName.TOKEN

    def applies(self, identity: Identity) -> bool:
        """True for clients whose identity carries token grants."""
        return _grants(identity) is not None

    def check_publish(self, identity: Identity, message: Publication) -> Decision | None:
        return self._publish(identity, message.topic, "publish to")

    def check_will(self, identity: Identity, will: Publication) -> Decision | None:
        return self._publish(identity, will.topic, "use the will topic")

    def _publish(self, identity: Identity, topic: str, what: str) -> Decision | None:
        grants = _grants(identity)
        if grants is None:
            return None
        try:
            rule = grants.can_publish(topic)
        except RuleError as exc:
            return deny(
                GateName.TOKEN,
                None,
                f"{shown(topic)} is not a valid channel name: {exc}",
                ReasonCode.TOPIC_NAME_INVALID,
            )
        if rule is None:
            return deny(
                GateName.TOKEN,
                None,
                f"no allow_channels_pub rule of the token for tenant "
                f"{identity.tenant!r} lets the client {what} {shown(topic)}",
            )
        return self._allowed(rule)

    def check_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        share_group: str | None,
    ) -> Decision | None:
        grants = _grants(identity)
        if grants is None:
            return None
        try:
            rule = grants.can_subscribe(topic_filter)
        except RuleError as exc:
            return deny(
                GateName.TOKEN,
                None,
                f"{shown(topic_filter)} is not a valid subscription pattern: {exc}",
                ReasonCode.TOPIC_FILTER_INVALID,
            )
        if rule is None:
            return deny(
                GateName.TOKEN,
                None,
                f"no allow_channels_sub rule of the token for tenant "
                f"{identity.tenant!r} accepts the subscription {shown(topic_filter)}",
            )
        return self._allowed(rule)

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        return False

    def check_deliver(self, identity: Identity, message: Publication) -> Decision | None:
        return None
