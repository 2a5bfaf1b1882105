"""The one authorization object (AUTHZ.md §2): the broker hangs it off ``Broker.policy``; the
bridge, policy sync, ``edge-broker explain`` and the PySpark what-if replay ask the same object
about :mod:`~edge_broker.identity` values.

Every will (at CONNECT), publish, subscribe (per filter) and delivery is decided here. This
module implements gates 1 (syntax) and 2 (reserved topics); whatever they allow goes on to the
:class:`~edge_broker.authz.gates.GatePipeline` (gates 3–6: authorizers, identity policy, site
ACL, claims) when one is configured, and is allowed otherwise. :func:`build_policy` assembles
both from a parsed configuration.

``check_publish``, ``check_subscribe`` and ``check_will`` return a :class:`Decision`, or an
awaitable of one when an asynchronous gate (authorizers) is configured: the connection then
waits for it, keeping packet order. ``check_deliver`` is synchronous (hot path) and called only
for subscriptions marked ``recheck``, or marked ``egress`` (:meth:`Policy.delivers_need_check`,
decided per subscription) while ``has_delivery_gates`` is set.

Gate 1 for PUBLISH is in the codec (a topic name with wildcards is malformed, MQTT §4.7.3);
for SUBSCRIBE and the will topic it is here.

No import of the broker, the codec's packets or the configuration: a SUBSCRIBE filter is
anything with the MQTT 5 subscription options (:class:`RequestedSubscription`), a delivery's
recipient anything with the identity connected now (:class:`Recipient`), and the settings
anything shaped like the parsed configuration (:class:`PolicySettings`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Protocol

from ..identity import Identity
from ..matching.errors import RuleError
from ..matching.mqtt_topics import validate_topic_filter, validate_topic_name
from ..matching.reserved_topics import NOT_RESERVED, SMOKER_SYSTEM, SYS, SYS_ROOT, ReservedTopics
from ..matching.subscription_patterns import subscription_pattern
from ..mqtt.reason_codes import ReasonCode
from .decision import ALLOW, Decision, GateName, deny
from .gates import GatePipeline
from .request import Publication, SubscribeFilter

if TYPE_CHECKING:
    from ..audit.aggregate import DecisionWindow
    from ..audit.log import AuditLog
    from .acl import Acl
    from .authorizers import AuthorizerSpec
    from .gate import PolicyGate
    from .permissions_config import PermissionsConfig

MaybeDecision = Decision | Awaitable[Decision]


class SubscriptionOptions(Protocol):
    """The options of a subscription (MQTT 5 §3.8.3.1)."""

    @property
    def qos(self) -> int: ...

    @property
    def no_local(self) -> bool: ...

    @property
    def retain_as_published(self) -> bool: ...

    @property
    def retain_handling(self) -> int: ...


class RequestedSubscription(SubscriptionOptions, Protocol):
    """One filter of a SUBSCRIBE with its options: the codec's ``Subscription`` or a
    :class:`SubscribeFilter`."""

    @property
    def topic_filter(self) -> str: ...


class Recipient(Protocol):
    """Who a delivery goes to: the identity connected now (None: nobody has connected as the
    session yet; the broker's ``Session``)."""

    @property
    def identity(self) -> Identity | None: ...


class DeliveryRoute(Protocol):
    """The subscription a delivery goes through, as the permissions judge it per topic (the
    broker's ``SubscriptionEntry``)."""

    @property
    def recheck(self) -> bool: ...

    @property
    def qos(self) -> int: ...

    @property
    def share_group(self) -> str | None: ...


def covering_mqtt_filter(pattern: str, separator: str) -> str:
    """The narrowest MQTT filter matching every channel a seed-001 pattern matches:
    ``*``/``p*`` → ``+``, ``#`` → ``#``, ``p#``/``>`` → ``+/#``, ``p>`` → ``+/+/#``."""
    out: list[str] = []
    for token in pattern.split(separator):
        if token == "#":
            out.append("#")
        elif token in ("*", "+") or token.endswith("*"):
            out.append("+")
        elif token == ">" or token.endswith("#"):
            out += ["+", "#"]
        elif token.endswith(">"):
            out += ["+", "+", "#"]
        else:
            out.append(token)
    return separator.join(out)


class Policy:
    """Gates 1–2 of AUTHZ.md §2, then the pipeline of gates 3–6; see the module docstring."""

    def __init__(self, separator: str = "/", pipeline: GatePipeline | None = None) -> None:
        self.separator = separator
        self.pipeline = pipeline
        self.has_delivery_gates = pipeline is not None and pipeline.has_delivery_gates
        self.reserved_topics = ReservedTopics(separator)  # gate 2: the one definition
        # this policy's identity for what outlives it without holding it (a queued message's
        # ``Outgoing.exempt``): unique while anything refers to it, unlike id(self)
        self.epoch = object()

    def unrecorded(self) -> Policy:
        """This policy judging without a trace (:meth:`GatePipeline.unrecorded`)."""
        pipeline = self.pipeline.unrecorded() if self.pipeline is not None else None
        return Policy(self.separator, pipeline)

    def routable(self, message: Publication) -> bool:
        """SMOKER system topics are never routed to subscribers (AUTHZ.md §2 gate 2); the
        message's fact was computed by :meth:`check_publish` (issue 21: the test runs once)."""
        return message.reservation(self.reserved_topics) != SMOKER_SYSTEM

    def check_publish(self, identity: Identity, message: Publication) -> MaybeDecision:
        """A PUBLISH as the routed message built for it (broker/handle_publish.py): every gate
        judges that one value, the topic resolved and the Topic Alias gone (issue 21)."""
        reservation = message.reservation(self.reserved_topics)  # kept for routing
        if reservation == SYS:
            return deny(GateName.RESERVED, None, f"clients never publish to {SYS_ROOT} topics")
        if reservation == SMOKER_SYSTEM:
            topic = message.topic
            if self.reserved_topics.smoker_may_publish(topic) and identity.smoker_authenticated:
                return ALLOW
            return deny(
                GateName.RESERVED,
                None,
                f"{topic!r} is reserved for SMOKER claims (SMOKER-authenticated clients only)",
            )
        if self.pipeline is not None:
            return self.pipeline.check_publish(identity, message)
        return ALLOW

    def admit(self, identity: Identity) -> Decision:
        """At CONNECT after authentication: may this identity connect at all (gate 4 can refuse
        a client whose identity cannot fill its permissions' placeholders)."""
        return self.pipeline.admit(identity) if self.pipeline is not None else ALLOW

    def check_will(self, identity: Identity, will: Publication) -> MaybeDecision:
        """A will as the message it would be (``message.will_message``): built once at CONNECT
        for this check, and once when it is published, judged and routed as that value."""
        try:
            validate_topic_name(will.topic, self.separator)
        except RuleError as exc:
            return deny(GateName.SYNTAX, None, str(exc), ReasonCode.TOPIC_NAME_INVALID)
        if will.reservation(self.reserved_topics) != NOT_RESERVED:
            return deny(GateName.RESERVED, None, f"the will topic {will.topic!r} is reserved")
        if self.pipeline is not None:
            return self.pipeline.check_will(identity, will)
        return ALLOW

    def check_subscribe(
        self,
        identity: Identity,
        subscription: RequestedSubscription,
        user_properties: tuple[tuple[str, str], ...] = (),
    ) -> MaybeDecision:
        topic_filter = subscription.topic_filter
        try:
            # PATTERNS.md §2: a listener may also accept runtime subscription patterns
            shared, inner, pattern = subscription_pattern(
                topic_filter, self.separator, identity.subscription_patterns
            )
            if pattern is None:
                validate_topic_filter(inner, self.separator)
        except RuleError as exc:
            return deny(GateName.SYNTAX, None, str(exc), ReasonCode.TOPIC_FILTER_INVALID)
        if self.reserved_topics.is_smoker_system(inner):
            return deny(
                GateName.RESERVED,
                None,
                f"nobody may subscribe to {inner!r}: it is a SMOKER system topic",
            )
        if self.pipeline is not None:
            group = shared.group if shared is not None else None
            # Permissions speak MQTT filters: a runtime pattern is checked as the MQTT filter
            # that covers it, and its deliveries per topic (PATTERNS.md §2 vs §4).
            covering = None if pattern is None else covering_mqtt_filter(inner, self.separator)
            request = SubscribeFilter(
                topic_filter,
                subscription.qos,
                subscription.no_local,
                subscription.retain_as_published,
                subscription.retain_handling,
            )
            return self.pipeline.check_subscribe(
                identity, request, inner, group, user_properties, covering
            )
        return ALLOW

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        """Can gates 5-6 deny a delivery through ``topic_filter`` (without ``$share/<group>/``)
        to ``identity``? Decided when the subscription is made or judged again, so deliveries
        through the others take no check (issue 21; ``SubscriptionEntry.egress``)."""
        if not self.has_delivery_gates:
            return False
        pipeline = self.pipeline
        if pipeline is None:  # delivery gates nobody can ask per filter: check every delivery
            return True
        return pipeline.delivers_need_check(identity, topic_filter)

    def check_deliver(
        self, session: Recipient, message: Publication, entry: DeliveryRoute | None = None
    ) -> Decision:
        """A delivery to ``session``; ``entry`` is the subscription it goes through when that
        subscription was marked ``recheck`` (None: no per-topic permission check needed)."""
        if self.pipeline is None or session.identity is None:
            return ALLOW
        if entry is not None and entry.recheck:
            return self.pipeline.check_deliver(
                session.identity, message, entry.qos, entry.share_group, True
            )
        return self.pipeline.check_deliver(session.identity, message)


# -- assembly from the configuration ------------------------------------------------------------


class _Listener(Protocol):
    @property
    def auth_methods(self) -> tuple[str, ...]: ...


class _Limits(Protocol):
    @property
    def decision_cache_bytes(self) -> int: ...

    @property
    def acl_cache_bytes(self) -> int: ...


class _Topics(Protocol):
    @property
    def separator(self) -> str: ...


class PolicySettings(Protocol):
    """What :func:`build_pipeline` reads of the parsed configuration (``config.Config``); a
    protocol, so that ``authz`` stays below the configuration it is part of."""

    @property
    def file(self) -> str: ...

    @property
    def authorizers(self) -> tuple[AuthorizerSpec, ...]: ...

    @property
    def permissions(self) -> PermissionsConfig | None: ...

    @property
    def acl(self) -> Acl | None: ...

    @property
    def listeners(self) -> Sequence[_Listener]: ...

    @property
    def limits(self) -> _Limits: ...

    @property
    def topics(self) -> _Topics: ...


def build_pipeline(
    config: PolicySettings, claims_gate: PolicyGate | None, audit: DecisionWindow | AuditLog | None
) -> GatePipeline | None:
    """Gates 3–6 as configured, or None when nothing beyond gates 1–2 applies. ``claims_gate``
    is the running broker's claims gate (gate 6), None where no claims are kept."""
    authorizers = None
    if config.authorizers:
        from .authorizers import AuthorizerChain, instantiate

        authorizers = AuthorizerChain(
            [
                instantiate(spec, f"{config.file}: authorizers[{i}]")
                for i, spec in enumerate(config.authorizers)
            ]
        )
    permissions = None
    if config.permissions is not None and config.permissions.enabled:
        from .gates import PermissionsGate

        permissions = PermissionsGate(config.permissions, config.limits.decision_cache_bytes)
    token_gate = None
    if any("token" in lc.auth_methods for lc in config.listeners):
        from .token_gate import TokenGate

        token_gate = TokenGate()
    gates: list[PolicyGate] = []
    if config.acl is not None and config.acl.enabled:  # gate 5, before the claims (gate 6)
        from .acl_gate import AclGate

        gates.append(
            AclGate(config.acl, config.topics.separator, cache_bytes=config.limits.acl_cache_bytes)
        )
    if claims_gate is not None:
        gates.append(claims_gate)
    if authorizers is None and permissions is None and token_gate is None and not gates:
        return None
    return GatePipeline(
        authorizers=authorizers,
        permissions=permissions,
        token_gate=token_gate,
        gates=gates,
        audit=audit,
        separator=config.topics.separator,
        memo_bytes=config.limits.decision_cache_bytes,
    )


def build_policy(
    config: PolicySettings,
    claims_gate: PolicyGate | None = None,
    audit: DecisionWindow | AuditLog | None = None,
) -> Policy:
    """The whole policy of ``config``: gates 1–2 for its separator, then :func:`build_pipeline`.
    Authorizer classes are loaded and constructed here, so a bad one raises here."""
    return Policy(config.topics.separator, build_pipeline(config, claims_gate, audit))
