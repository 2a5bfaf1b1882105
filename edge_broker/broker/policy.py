"""The one authorization object the broker consults (AUTHZ.md §2), hanging off ``Broker.policy``.

Every will (at CONNECT), publish, subscribe (per filter) and delivery is decided here. This
module implements gates 1 (syntax) and 2 (reserved topics) and allows everything else; the
authz layer extends :class:`Policy` with gates 3–6.

``check_publish``, ``check_subscribe`` and ``check_will`` return a :class:`Decision`, or an
awaitable of one when an asynchronous gate (authorizers) is configured: the connection then
waits for it, keeping packet order. ``check_deliver`` is synchronous (hot path) and called only
when ``has_delivery_gates`` is set or the subscription was marked ``recheck``.

Gate 1 for PUBLISH is in the codec (a topic name with wildcards is malformed, MQTT §4.7.3);
for SUBSCRIBE and the will topic it is here.
"""

from __future__ import annotations

from collections.abc import Awaitable

from ..auth.identity import Identity
from ..authz.decision import ALLOW, Decision, Gate, deny
from ..matching.errors import RuleError
from ..matching.mqtt_topics import validate_topic_filter, validate_topic_name
from ..mqtt.packets import Publish, Subscription, Will
from ..mqtt.reason_codes import ReasonCode
from .message import Message
from .pattern_subscriptions import subscription_pattern
from .session import Session

CLAIM_TOPICS = ("access/claim", "access/unclaim")  # SMOKER.md "System topics"
CLAIMS_PREFIX = "access/claims/"
SYS_PREFIX = "$SYS"

MaybeDecision = Decision | Awaitable[Decision]


class Policy:
    """Gates 1–2 of AUTHZ.md §2; see the module docstring."""

    has_delivery_gates = False

    def __init__(self, separator: str = "/") -> None:
        self.separator = separator
        self.sys_prefix = SYS_PREFIX + separator
        self.claim_topics = tuple(t.replace("/", separator) for t in CLAIM_TOPICS)
        self.claims_prefix = CLAIMS_PREFIX.replace("/", separator)

    def reserved(self, topic: str) -> bool:
        """Topics that belong to SMOKER (``access/claim``, ``access/unclaim``, ``access/claims/…``)."""
        return topic in self.claim_topics or topic.startswith(self.claims_prefix)

    def routable(self, topic: str) -> bool:
        """Reserved topics are never routed to subscribers (AUTHZ.md §2 gate 2)."""
        return not (topic[:7] == "access" + self.separator and self.reserved(topic))

    def check_publish(self, identity: Identity, topic: str, packet: Publish) -> MaybeDecision:
        if topic == SYS_PREFIX or topic.startswith(self.sys_prefix):
            return deny(Gate.RESERVED, None, f"clients never publish to {SYS_PREFIX} topics")
        if topic[:7] == "access" + self.separator and self.reserved(topic):
            if topic in self.claim_topics and identity.smoker_authenticated:
                return ALLOW
            return deny(
                Gate.RESERVED, None,
                f"{topic!r} is reserved for SMOKER claims (SMOKER-authenticated clients only)",
            )
        return ALLOW

    def check_will(self, identity: Identity, will: Will) -> MaybeDecision:
        try:
            validate_topic_name(will.topic, self.separator)
        except RuleError as exc:
            return deny(Gate.SYNTAX, None, str(exc), ReasonCode.TOPIC_NAME_INVALID)
        if will.topic == SYS_PREFIX or will.topic.startswith(self.sys_prefix) or self.reserved(
            will.topic
        ):
            return deny(Gate.RESERVED, None, f"the will topic {will.topic!r} is reserved")
        return ALLOW

    def check_subscribe(self, identity: Identity, subscription: Subscription) -> MaybeDecision:
        topic_filter = subscription.topic_filter
        try:
            # PATTERNS.md §2: a listener may also accept runtime subscription patterns
            _, inner, pattern = subscription_pattern(
                topic_filter, self.separator, identity.subscription_patterns)
            if pattern is None:
                validate_topic_filter(inner, self.separator)
        except RuleError as exc:
            return deny(Gate.SYNTAX, None, str(exc), ReasonCode.TOPIC_FILTER_INVALID)
        for reserved in self.claim_topics:
            if inner == reserved:
                return deny(Gate.RESERVED, None, f"nobody may subscribe to {reserved!r}")
        if inner.startswith(self.claims_prefix):
            return deny(Gate.RESERVED, None, f"{self.claims_prefix}… is reserved for SMOKER")
        return ALLOW

    def check_deliver(self, session: Session, message: Message) -> Decision:
        return ALLOW
