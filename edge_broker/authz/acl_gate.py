"""Gate 5 of AUTHZ.md §2 in the live broker: the site ACL (seed 004) as a
:class:`~edge_broker.authz.gate.PolicyGate`.

- Ingress: every PUBLISH and will is checked as ``put``/``delete``/``query``/``reply`` (the
  mapping table of AUTHZ.md §2, authz/acl_mqtt.py) on the concrete topic, every SUBSCRIBE
  filter as ``declare_subscriber``, or ``declare_queryable`` when the SUBSCRIBE carries the user
  property ``queryable=true``. On a listener accepting seed-001 runtime patterns a pattern is
  mapped exactly (``p*`` -> ``p$*``, ``>`` -> ``*/**``: :func:`pattern_to_keyexpr`).
- Egress: deliveries (retained and queued messages included) are checked for the RECEIVING
  client's subject with the message kind of the PUBLISH being delivered, through the
  subscriptions where one can be denied (:meth:`AclGate.delivers_need_check`, decided per
  subscription; none at all when no delivery can be denied: :func:`egress_can_deny`).
- Subjects: the connection's interface, TLS certificate CN and username
  (:meth:`Acl.for_subject`), resolved once per distinct triple and kept.
- Decisions are cached per (subject triple, flow, message, topic), bounded; the gate is rebuilt
  with the policy on every reload, so a reload never sees an older ACL's verdicts.

Denials name the rule: Reason String ``publish to 'a/b': denied by acl rule "no-admin"``, or
``... denied by acl default_permission`` when no rule matched under ``default_permission``
deny, or the reason a topic has no key expression (AUTHZ.md §3, §4).
"""

from __future__ import annotations

from ..identity import Identity
from ..matching.decision_cache import entry_bytes
from ..matching.errors import RuleError
from ..matching.keyexpr import KeyExpr
from ..matching.names import shown
from ..matching.pattern_tokens import TokenKind
from ..matching.subscription_patterns import is_runtime_pattern, parse_pattern
from .acl import Acl, AclDecision, SubjectAcl
from .acl_config import AclMessage, Flow, Permission
from .acl_mqtt import PUBLISH_MESSAGES, filter_to_keyexpr, subscribe_message, topic_to_keyexpr
from .decision import Decision, GateName, deny
from .request import Publication, SubscribeFilter

# Cached decisions per flow and message kind, emptied when full (the hot set refills it): at
# most ~8 x 8192 small entries, a few MB, since a gateway's hot topics are far fewer.
_CACHE_LIMIT = 8192
_CACHE_BYTES = 4 * 1024 * 1024  # all of one gate's decision caches together (issue 16)
_SUBJECT_LIMIT = 4096  # distinct (interface, cert CN, username) triples kept

SubjectKey = tuple[str | None, str | None, str | None]


_Cache = dict[tuple[str | None, str | None, str | None, str], Decision]


_PATTERN_TAILS = {
    TokenKind.HASH: "**",
    TokenKind.GT: "*/**",
    TokenKind.PREFIX_HASH: "$*/**",
    TokenKind.PREFIX_GT: "$*/*/**",
}


def pattern_to_keyexpr(text: str, separator: str, verbatims: frozenset[str]) -> KeyExpr:
    """The key expression of a seed-001 runtime pattern (PATTERNS.md §2), exactly: ``*`` ->
    ``*``, ``p*`` -> ``p$*``, and as the tail ``#`` -> ``**``, ``>`` -> ``*/**``, ``p#`` ->
    ``p$*/**``, ``p>`` -> ``p$*/*/**``. Literals and prefixes follow the topic-level rules of
    authz/acl_mqtt.py (no ``$``, ``@`` only when a rule names it, ...); :class:`RuleError` else."""
    pattern = parse_pattern(text, separator)
    chunks: list[str] = []

    def literal(level: str) -> str:
        return topic_to_keyexpr(level, separator, verbatims).text

    for token in pattern.body:
        if token.kind is TokenKind.STAR:
            chunks.append("*")
        elif token.kind is TokenKind.PREFIX_STAR:
            if token.text.startswith("@"):
                raise RuleError(text, token.text, "a verbatim chunk cannot be a prefix")
            chunks.append(literal(token.text) + "$*")
        else:
            chunks.append(literal(token.text))
    tail = pattern.tail
    if tail is not None:
        prefix = ""
        if tail.kind in (TokenKind.PREFIX_HASH, TokenKind.PREFIX_GT):
            if tail.text.startswith("@"):
                raise RuleError(text, tail.text, "a verbatim chunk cannot be a prefix")
            prefix = literal(tail.text)
        chunks.append(prefix + _PATTERN_TAILS[tail.kind])
    return KeyExpr.parse("/".join(chunks))


def egress_can_deny(acl: Acl) -> bool:
    """Whether any delivery can be denied: with ``default_permission`` deny every delivery
    needs an egress allow; with allow, only egress deny rules can refuse one. Without them the
    per-delivery check is skipped (every delivered message already passed the ingress check,
    which also refuses topics without a key expression; ``$`` topics cannot be subscribed)."""
    if not acl.enabled:
        return False
    if acl.default_permission is Permission.DENY:
        return True
    return any(
        rule.permission is Permission.DENY and Flow.EGRESS in rule.flows
        for rule in acl.config.rules
    )


def egress_deny_exprs(acl: Acl, identity: Identity) -> tuple[KeyExpr, ...]:
    """The key expressions of every egress deny rule that a policy attaches to a subject this
    client matches (any message kind): what can refuse it a delivery under default allow."""
    subjects = set(acl.matching_subjects(identity))
    if not subjects:
        return ()
    attached = {
        rule_id
        for policy in acl.config.policies
        if subjects.intersection(policy.subjects)
        for rule_id in policy.rules
    }
    return tuple(
        expr
        for rule in acl.config.rules
        if rule.id in attached and rule.permission is Permission.DENY and Flow.EGRESS in rule.flows
        for expr in rule.key_exprs
    )


def acl_decision(verdict: AclDecision, what: str) -> Decision:
    """The pipeline's Decision for gate 5, the Reason String naming the action and the rule."""
    if verdict.allowed:
        return Decision(True, GateName.ACL, verdict.rule_id)
    return deny(GateName.ACL, verdict.rule_id, f"{what}: {verdict.explain()}")


class AclGate:
    """The site ACL as a pipeline gate (module docstring). Build one per policy."""

    # a PUBLISH's decision depends only on the identity, topic and message kind (the pipeline
    # may remember it: authz/gates.py)
    publish_decisions_stable = True

    __slots__ = (
        "acl",
        "separator",
        "_subjects",
        "_ingress",
        "_egress",
        "_cache_limit",
        "_cache_bytes",
        "_max_cache_bytes",
        "_allowed",
        "_denies",
        "checks_every_delivery",
    )

    def __init__(
        self,
        acl: Acl,
        separator: str = "/",
        cache_limit: int = _CACHE_LIMIT,
        cache_bytes: int = _CACHE_BYTES,  # [limits] acl_cache_bytes
    ) -> None:
        self.acl = acl
        self.separator = separator
        self.checks_every_delivery = egress_can_deny(acl)
        self._subjects: dict[SubjectKey, SubjectAcl] = {}
        # Decisions per flow and message kind (index into PUBLISH_MESSAGES), keyed by plain tuples
        # (interface, cert CN, username, topic): hashing enum members costs more than the rest
        # of a cache hit. Each emptied when it reaches cache_limit.
        self._ingress: tuple[_Cache, ...] = tuple({} for _ in PUBLISH_MESSAGES)
        self._egress: tuple[_Cache, ...] = tuple({} for _ in PUBLISH_MESSAGES)
        self._cache_limit = cache_limit
        self._cache_bytes = 0  # estimate over every cache (matching.decision_cache.entry_bytes)
        self._max_cache_bytes = cache_bytes
        self._allowed: dict[str | None, Decision] = {}
        self._denies: dict[SubjectKey, tuple[KeyExpr, ...]] = {}  # egress_deny_exprs per subject

    @property
    def gate(self) -> GateName:
        return GateName.ACL

    # -- subjects ---------------------------------------------------------------------------

    def subject(self, identity: Identity) -> SubjectAcl:
        """The merged :class:`SubjectAcl` of a client (its interface, certificate CN, username)."""
        key = (identity.interface, identity.cert_cn, identity.username)
        found = self._subjects.get(key)
        if found is None:
            if len(self._subjects) >= _SUBJECT_LIMIT:
                self._subjects.clear()
            found = self._subjects[key] = self.acl.for_subject(*key)
        return found

    def matching_subjects(self, identity: Identity) -> tuple[str, ...]:
        return self.acl.matching_subjects(identity)

    def describe_subject(self, identity: Identity) -> str:
        """For ``explain``: the connection attributes, the ACL subjects they match and the
        default permission (AUTHZ.md §4)."""
        subjects = ", ".join(repr(s) for s in self.matching_subjects(identity)) or "none"
        return (
            f"interface {identity.interface or '-'}, cert CN {identity.cert_cn or '-'}, "
            f"username {identity.username or '-'} match subjects: {subjects}; "
            f"default_permission {self.acl.default_permission.value}"
        )

    # -- decisions --------------------------------------------------------------------------

    def _topic_verdict(
        self, subject: SubjectAcl, flow: Flow, message: AclMessage, topic: str
    ) -> AclDecision:
        try:
            key = topic_to_keyexpr(topic, self.separator, subject.verbatims)
        except RuleError as exc:
            return AclDecision(False, None, f"topic not representable as a key expression: {exc}")
        return subject.decide(flow, message, key)

    def _decide(
        self, cache: _Cache, identity: Identity, flow: Flow, message: AclMessage, topic: str
    ) -> Decision:
        key = (identity.interface, identity.cert_cn, identity.username, topic)
        found = cache.get(key)
        if found is not None:
            return found
        verdict = self._topic_verdict(self.subject(identity), flow, message, topic)
        if verdict.allowed:  # one shared object per allowing rule
            decision = self._allowed.get(verdict.rule_id)
            if decision is None:
                decision = self._allowed[verdict.rule_id] = acl_decision(verdict, "")
        else:
            action = "publish to" if flow is Flow.INGRESS else "deliver"
            decision = acl_decision(verdict, f"{action} {shown(topic)} ({message.value})")
        cost = entry_bytes(key, decision)
        if self._cache_bytes + cost > self._max_cache_bytes:
            for each in (*self._ingress, *self._egress):
                each.clear()
            self._cache_bytes = 0
        elif len(cache) >= self._cache_limit:
            cache.clear()  # its bytes stay counted: an over-estimate, reset at the next clear
        self._cache_bytes += cost
        cache[key] = decision
        return decision

    def decide_filter(
        self,
        identity: Identity,
        topic_filter: str,
        user_properties: tuple[tuple[str, str], ...] = (),
    ) -> Decision:
        """Ingress ``declare_subscriber`` (or ``declare_queryable``) for one filter."""
        message = subscribe_message(user_properties)
        subject = self.subject(identity)
        try:
            if identity.subscription_patterns and is_runtime_pattern(topic_filter, self.separator):
                key = pattern_to_keyexpr(topic_filter, self.separator, subject.verbatims)
            else:
                key = filter_to_keyexpr(topic_filter, self.separator, subject.verbatims)
        except RuleError as exc:
            verdict = AclDecision(
                False, None, f"filter not representable as a key expression: {exc}"
            )
        else:
            verdict = subject.decide(Flow.INGRESS, message, key)
        return acl_decision(verdict, f"subscribe to {shown(topic_filter)} ({message.value})")

    # -- PolicyGate -------------------------------------------------------------------------

    def check_publish(self, identity: Identity, message: Publication) -> Decision | None:
        kind = message.kind  # computed once per PUBLISH (authz/request.py)
        return self._decide(
            self._ingress[kind], identity, Flow.INGRESS, PUBLISH_MESSAGES[kind], message.topic
        )

    def check_will(self, identity: Identity, will: Publication) -> Decision | None:
        kind = will.kind  # the will as the message it would be (authz/request.py)
        return self._decide(
            self._ingress[kind], identity, Flow.INGRESS, PUBLISH_MESSAGES[kind], will.topic
        )

    def check_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        share_group: str | None,
    ) -> Decision | None:
        return self.decide_filter(identity, topic_filter)

    def check_subscribe_with_properties(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        share_group: str | None,
        user_properties: tuple[tuple[str, str], ...],
    ) -> Decision | None:
        """As :meth:`check_subscribe`, with the SUBSCRIBE's user properties (``queryable``)."""
        return self.decide_filter(identity, topic_filter, user_properties)

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        """Can a delivery through ``topic_filter`` (without ``$share/<group>/``) be denied for
        this client? As NATS keeps deny state only where a subscription meets a deny rule
        (issue 21): under default allow, only when an egress deny rule of the client's subjects
        intersects the filter. Errs towards True: under default deny, for a filter without a
        key expression, and for a wildcard filter when the rules name verbatim chunks (Zenoh's
        wildcards never match ``@x``, MQTT's do). Like :func:`egress_can_deny`, it relies on
        every delivered topic having passed the ingress check, which refuses topics without a
        key expression."""
        if not self.checks_every_delivery:
            return False
        acl = self.acl
        if acl.default_permission is Permission.DENY:
            return True
        subject_key = (identity.interface, identity.cert_cn, identity.username)
        denies = self._denies.get(subject_key)
        if denies is None:
            if len(self._denies) >= _SUBJECT_LIMIT:
                self._denies.clear()
            denies = self._denies[subject_key] = egress_deny_exprs(acl, identity)
        if not denies:
            return False
        verbatims = self.subject(identity).verbatims
        try:
            if identity.subscription_patterns and is_runtime_pattern(topic_filter, self.separator):
                key = pattern_to_keyexpr(topic_filter, self.separator, verbatims)
            else:
                key = filter_to_keyexpr(topic_filter, self.separator, verbatims)
        except RuleError:
            return True
        if verbatims and key.is_wild:
            return True
        return any(deny.intersects(key) for deny in denies)

    def check_deliver(self, identity: Identity, message: Publication) -> Decision | None:
        """The hot path: one cache lookup per delivery once the (subject, topic) was seen; the
        message kind was computed when the message was built, not per delivery."""
        kind = message.kind
        cache = self._egress[kind]
        topic = message.topic
        found = cache.get((identity.interface, identity.cert_cn, identity.username, topic))
        if found is not None:
            return found
        return self._decide(cache, identity, Flow.EGRESS, PUBLISH_MESSAGES[kind], topic)
