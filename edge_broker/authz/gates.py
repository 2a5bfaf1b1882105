"""Gates 3–6 of AUTHZ.md §2 in one object: authorizers, identity policy, site ACL, claims.

The broker's :class:`~edge_broker.authz.policy.Policy` runs gates 1–2 (syntax, reserved
topics) and hands every request they allow to a :class:`GatePipeline`:

3. authorizers (async, only when configured): ``allow``/``deny`` decide gate 4, ``disconnect``
   denies and disconnects, ``next`` passes on;
4. identity policy: the token gate for clients with token grants, default permissions
   (:mod:`.permissions`) for everyone else;
5.–6. the extra :class:`~edge_broker.authz.gate.PolicyGate` objects in order (site ACL, claims).

The first denial decides; allowing decisions combine their ``recheck`` flags. Every decision
is counted per (gate, rule) for ``$SYS/broker/authz/...`` and the metrics endpoint, and every
denial goes to the audit log.

Adding a gate: write a PolicyGate (``authz/gate.py``) and pass it in ``gates`` where the broker
builds its policy (``Broker.build_policy``); it then runs after the identity policy, in order.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Awaitable, Sequence
from typing import Any

from ..audit import events as audit_events
from ..identity import Identity
from ..matching.decision_cache import DEFAULT_MAX_BYTES, DecisionCache, entry_bytes
from ..matching.names import shown
from .acl_mqtt import PUBLISH_MESSAGES, subscribe_message
from .authorizers import AuthorizerChain, PublishRequest, SubscribeRequest
from .decision import ALLOW, Decision, GateName, deny
from .gate import PolicyGate
from .permissions import PermissionBindError, PermissionList, PermissionVerdict
from .permissions_config import PermissionsConfig
from .request import Publication, SubscribeFilter

MaybeDecision = Decision | Awaitable[Decision]
_MAX_BOUND_LISTS = 10_000
_MAX_CACHED_DECISIONS = 65_536
_MAX_PENDING_HITS = 1024  # distinct allowing decisions counted before they are folded


def _token_client(identity: Identity) -> bool:
    """Token clients are judged by their grants, never by default permissions — also a session
    restored from disk, whose grants come back only when the client presents its token again."""
    return identity.grants is not None or identity.method == "token"


def _combine(first: Decision, second: Decision | None) -> Decision:
    """``first`` allowed so far; fold in the next gate's answer."""
    if second is None:
        return first
    if first is ALLOW:
        return second
    if second.denied:
        return second
    if second.recheck and not first.recheck:
        return Decision(True, first.gate, first.rule, first.reason_code, first.reason, False, True)
    if first.gate is None and second.gate is not None:
        return Decision(True, second.gate, second.rule, recheck=first.recheck or second.recheck)
    return first


class PermissionsGate:
    """Gate 4 for clients without token grants: their seed-003 permission list."""

    def __init__(self, config: PermissionsConfig, cache_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.config = config
        self._bound: dict[tuple[Any, ...], tuple[PermissionList, str] | PermissionBindError] = {}
        # Hot path: the last identity's list (bursts come from one client), and decisions per
        # (list, topic, qos, retain). The gate is rebuilt on every policy change, so neither
        # cache can outlive the policy it was computed from.
        self._last: tuple[
            Identity | None, tuple[PermissionList, str] | PermissionBindError | None
        ] = (None, None)
        self._last_sets: tuple[Identity | None, str] = (None, "")
        self._publish_cache: DecisionCache[tuple[int, str, int, bool], Decision] = DecisionCache(
            _MAX_CACHED_DECISIONS,
            cache_bytes,  # [limits] decision_cache_bytes
        )

    @property
    def gate(self) -> GateName:
        return GateName.PERMISSIONS

    def set_names(self, identity: Identity) -> str:
        """The permission set(s) ``identity``'s assignment chose (comma-separated, in the
        assignment's order), or ``unassigned``: written in audit records, so that default-deny
        denials are told apart per set."""
        last, names = self._last_sets
        if last is not identity:
            assignment = self.config.assignment_for(identity)
            names = ",".join(assignment.sets) if assignment is not None else "unassigned"
            self._last_sets = (identity, names)
        return names

    def list_for(self, identity: Identity) -> tuple[PermissionList, str]:
        """The client's bound list and the assignment that chose it; raises PermissionBindError."""
        last, found = self._last
        if last is identity and found is not None:
            if isinstance(found, PermissionBindError):
                raise found
            return found
        key = (
            identity.client_id,
            identity.username,
            identity.cert_cn,
            identity.roles,
            identity.method,
            identity.tenant,
        )
        found = self._bound.get(key)
        if found is None:
            plist, label = self.config.select(identity)
            try:
                found = (plist.bind(identity.client_id, identity.username, identity.tenant), label)
            except PermissionBindError as exc:
                found = exc
            if len(self._bound) >= _MAX_BOUND_LISTS:
                self._bound.clear()
                self._publish_cache.clear()  # keyed by id() of lists that may now be freed
            self._bound[key] = found
        self._last = (identity, found)
        if isinstance(found, PermissionBindError):
            raise found
        return found

    def _decision(self, verdict: PermissionVerdict, what: str) -> Decision:
        perm = verdict.permission
        rule = perm.id if perm is not None else None
        if verdict.allowed:
            return Decision(True, GateName.PERMISSIONS, rule, recheck=verdict.recheck)
        if perm is None:
            return deny(
                GateName.PERMISSIONS,
                None,
                f"{what}: no permission matches and the default behaviour is DENY",
            )
        return deny(GateName.PERMISSIONS, rule, f'{what}: denied by permissions rule "{rule}"')

    def admit(self, identity: Identity) -> Decision | None:
        try:
            self.list_for(identity)
        except PermissionBindError as exc:
            return deny(GateName.PERMISSIONS, None, str(exc))
        return None

    def check_publish(self, identity: Identity, topic: str, qos: int, retain: bool) -> Decision:
        try:
            plist, _ = self.list_for(identity)
        except PermissionBindError as exc:
            return deny(GateName.PERMISSIONS, None, str(exc))
        key = (id(plist), topic, qos, retain)
        cached = self._publish_cache.get(key)
        if cached is None:
            cached = self._decision(
                plist.check_publish(topic, qos, retain), f"publish to {shown(topic)}"
            )
            self._publish_cache.put(key, cached)
        return cached

    def check_subscribe(
        self, identity: Identity, topic_filter: str, qos: int, group: str | None
    ) -> Decision:
        try:
            plist, _ = self.list_for(identity)
        except PermissionBindError as exc:
            return deny(GateName.PERMISSIONS, None, str(exc))
        return self._decision(
            plist.check_subscribe(topic_filter, qos, group), f"subscribe to {shown(topic_filter)}"
        )

    def check_delivery(
        self, identity: Identity, topic: str, qos: int, group: str | None
    ) -> Decision:
        try:
            plist, _ = self.list_for(identity)
        except PermissionBindError as exc:
            return deny(GateName.PERMISSIONS, None, str(exc))
        return self._decision(plist.check_delivery(topic, qos, group), f"deliver {shown(topic)}")


class GatePipeline:
    """Gates 3–6 (module docstring). ``token_gate`` decides gate 4 for clients with grants."""

    def __init__(
        self,
        *,
        authorizers: AuthorizerChain | None = None,
        permissions: PermissionsGate | None = None,
        token_gate: PolicyGate | None = None,
        gates: Sequence[PolicyGate] = (),
        audit: Any = None,
        separator: str = "/",
        memo_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.authorizers = (
            authorizers if authorizers is not None and authorizers.authorizers else None
        )
        self.permissions = permissions
        self.token_gate = token_gate
        self.gates: tuple[PolicyGate, ...] = tuple(gates)
        # The gates that must see deliveries (egress ACL, claims), found once: a pipeline is
        # built anew whenever the policy changes (reload, bundle), never changed in place.
        self.delivery_gates: tuple[PolicyGate, ...] = tuple(
            g for g in self.gates if getattr(g, "checks_every_delivery", False)
        )
        self.has_delivery_gates = bool(self.delivery_gates)
        self.audit = audit
        self.separator = separator
        self._hits: Counter[tuple[str, str]] = Counter()
        # allowing decisions counted by object (id -> [decision, count]) and folded into
        # ``hits`` when someone reads it: the (gate, rule) key costs more than the check
        self._pending_hits: dict[int, list[Any]] = {}
        self.denials: Counter[tuple[str, str]] = Counter()
        self.recorded = True  # False: explain's copy (unrecorded)
        # Allowed PUBLISH decisions per (identity object, topic, qos, retain, ACL kind), when
        # every gate's publish decision is a function of those alone for this pipeline's life
        # (it is rebuilt on every policy change): a repeated PUBLISH skips gates 4-5. Not with
        # authorizers (asked every time), claims (they change under it: no
        # ``publish_decisions_stable``), token clients, or audited allowed decisions.
        self._memo: dict[tuple[int, str, int, bool, int], Decision] | None = (
            {}
            if self.authorizers is None
            and all(getattr(g, "publish_decisions_stable", False) for g in self.gates)
            else None
        )
        self._memo_holders: dict[int, Identity] = {}  # keeps each keyed id() unique
        self._memo_bytes = 0
        self._memo_max_bytes = memo_bytes  # [limits] decision_cache_bytes

    @property
    def hits(self) -> Counter[tuple[str, str]]:
        """Allowed decisions per (gate, rule) ($SYS and the metrics endpoint read it)."""
        pending = self._pending_hits
        if pending:
            hits = self._hits
            for decision, count in pending.values():
                gate = decision.gate.value if decision.gate is not None else "none"
                hits[(gate, decision.rule or "-")] += count
            pending.clear()
        return self._hits

    @hits.setter
    def hits(self, value: Counter[tuple[str, str]]) -> None:
        """A reload carries the counts over to the new pipeline."""
        self._pending_hits.clear()
        self._hits = value

    def _count_allowed(self, decision: Decision) -> None:
        cell = self._pending_hits.get(id(decision))
        if cell is not None:
            cell[1] += 1
            return
        if len(self._pending_hits) >= _MAX_PENDING_HITS:
            self.hits  # noqa: B018 -- folds the pending counts
        self._pending_hits[id(decision)] = [decision, 1]  # holds it: the id stays its own

    def unrecorded(self) -> GatePipeline:
        """The same gates, judging without a trace: no audit record, no log line, no count.
        ``explain`` asks through it, so that explaining a denial (the admin API explains every
        one it shows) is not itself a denial in the audit log, the counters or the denial ring."""
        quiet = copy.copy(self)
        quiet.recorded = False
        quiet._memo = None  # a remembered decision would be counted in the shared counters
        return quiet

    # -- bookkeeping ----------------------------------------------------------------------

    def delivers_need_check(self, identity: Identity, topic_filter: str) -> bool:
        """Whether some gate that checks deliveries can deny one through ``topic_filter``
        (without ``$share/<group>/``) to ``identity``: asked per subscription when it is made
        and whenever it is judged again (broker/rejudge.py), never per message (issue 21)."""
        return any(g.delivers_need_check(identity, topic_filter) for g in self.delivery_gates)

    def _count(
        self,
        decision: Decision,
        action: str,
        identity: Identity,
        topic: str,
        origin: str | None = None,
        qos: int | None = None,
        retain: bool | None = None,
        message: Publication | None = None,
        user_properties: tuple[tuple[str, str], ...] | None = None,
    ) -> Decision:
        if not self.recorded:
            return decision
        if decision.allowed:
            self._count_allowed(decision)
            if self.audit is None or not self.audit.log_allowed:
                return decision
        else:
            gate = decision.gate.value if decision.gate is not None else "none"
            self.denials[(gate, decision.rule or "-")] += 1
        # the INFO line and the audit record, aggregated: edge_broker/audit/events.py
        audit_events.decision(
            self.audit,
            action,
            identity,
            topic,
            decision,
            origin,
            qos,
            retain,
            self._permission_set(identity),
            _acl_kind(message, user_properties),
        )
        return decision

    def _count_subscribe(
        self,
        decision: Decision,
        identity: Identity,
        subscription: SubscribeFilter,
        user_properties: tuple[tuple[str, str], ...],
    ) -> Decision:
        return self._count(
            decision,
            "subscribe",
            identity,
            subscription.topic_filter,
            None,
            subscription.qos,
            user_properties=user_properties,
        )

    def _permission_set(self, identity: Identity) -> str | None:
        """The set(s) default permissions judged ``identity`` by, for the audit record."""
        if self.permissions is None or _token_client(identity):
            return None
        return self.permissions.set_names(identity)

    def admit(self, identity: Identity) -> Decision:
        """At CONNECT, before the will: a client whose permissions cannot be bound is refused."""
        if not _token_client(identity) and self.permissions is not None:
            refused = self.permissions.admit(identity)
            if refused is not None:
                return self._count(refused, "connect", identity, "")
        return ALLOW

    # -- publish and will -----------------------------------------------------------------

    def _after_authorizers_publish(
        self, identity: Identity, message: Publication, will: bool, decided: Decision | None
    ) -> Decision:
        decision = ALLOW if decided is None else decided
        if decided is None:
            if _token_client(identity):
                if self.token_gate is not None:
                    if will:
                        answer = self.token_gate.check_will(identity, message)
                    else:
                        answer = self.token_gate.check_publish(identity, message)
                    decision = _combine(decision, answer)
            elif self.permissions is not None:
                decision = _combine(
                    decision,
                    self.permissions.check_publish(
                        identity, message.topic, message.qos, message.retain
                    ),
                )
            if decision.denied:
                return decision
        for gate in self.gates:
            if will:
                answer = gate.check_will(identity, message)
            else:
                answer = gate.check_publish(identity, message)
            decision = _combine(decision, answer)
            if decision.denied:
                return decision
        return decision

    def check_publish(self, identity: Identity, message: Publication) -> MaybeDecision:
        """A PUBLISH as the one value built for it (topic resolved, no Topic Alias)."""
        memo = self._memo
        if memo is not None:
            key = (id(identity), message.topic, message.qos, message.retain, message.kind)
            known = memo.get(key)
            if known is not None:
                self._count_allowed(known)
                return known
        if self.authorizers is not None and self.authorizers.has_publish:
            return self._publish_async(identity, message, False)
        decision = self._after_authorizers_publish(identity, message, False, None)
        if (
            memo is not None
            and decision.allowed
            and not _token_client(identity)
            and (self.audit is None or not self.audit.log_allowed)
        ):
            self._remember(memo, key, identity, decision)
        return self._count(
            decision, "publish", identity, message.topic, None, message.qos, message.retain, message
        )

    def _remember(
        self,
        memo: dict[tuple[int, str, int, bool, int], Decision],
        key: tuple[int, str, int, bool, int],
        identity: Identity,
        decision: Decision,
    ) -> None:
        """Bounded like every decision cache: emptied when full (entries or bytes)."""
        cost = entry_bytes(key, decision)
        if len(memo) >= _MAX_CACHED_DECISIONS or self._memo_bytes + cost > self._memo_max_bytes:
            memo.clear()
            self._memo_holders.clear()
            self._memo_bytes = 0
            if cost > self._memo_max_bytes:
                return
        self._memo_bytes += cost
        self._memo_holders[key[0]] = identity
        memo[key] = decision

    def check_will(self, identity: Identity, will: Publication) -> MaybeDecision:
        """A will as the message it would be (built from the CONNECT's will)."""
        if self.authorizers is not None and self.authorizers.has_publish:
            return self._publish_async(identity, will, True)
        decision = self._after_authorizers_publish(identity, will, True, None)
        return self._count(
            decision, "will", identity, will.topic, None, will.qos, will.retain, will
        )

    async def _publish_async(
        self, identity: Identity, message: Publication, will: bool
    ) -> Decision:
        assert self.authorizers is not None
        topic = message.topic
        # the authorizer sees the resolved topic and the message's properties, never the
        # PUBLISH packet's Topic Alias (issue 21)
        request = PublishRequest(
            identity,
            topic,
            message.payload,
            message.qos,
            message.retain,
            will,
            message.properties,
        )
        decided = await self.authorizers.authorize_publish(request)
        action = "will" if will else "publish"
        qos, retain = message.qos, message.retain
        if decided is not None and decided.denied:
            return self._count(decided, action, identity, topic, None, qos, retain, message)
        decision = self._after_authorizers_publish(identity, message, will, decided)
        return self._count(decision, action, identity, topic, None, qos, retain, message)

    # -- subscribe ------------------------------------------------------------------------

    def _after_authorizers_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        group: str | None,
        decided: Decision | None,
        covering: str | None = None,
        user_properties: tuple[tuple[str, str], ...] = (),
    ) -> Decision:
        decision = ALLOW if decided is None else decided
        if decided is None:
            if _token_client(identity):
                if self.token_gate is not None:
                    decision = _combine(
                        decision,
                        self.token_gate.check_subscribe(
                            identity, subscription, topic_filter, group
                        ),
                    )
            elif self.permissions is not None:
                verdict = self.permissions.check_subscribe(
                    identity, covering or topic_filter, subscription.qos, group
                )
                if covering is not None and verdict.allowed and not verdict.recheck:
                    verdict = Decision(True, verdict.gate, verdict.rule, recheck=True)
                decision = _combine(decision, verdict)
            if decision.denied:
                return decision
        for gate in self.gates:
            # a gate that reads the SUBSCRIBE's user properties (the ACL: queryable=true)
            with_properties = getattr(gate, "check_subscribe_with_properties", None)
            if with_properties is not None:
                answer = with_properties(
                    identity, subscription, topic_filter, group, user_properties
                )
            else:
                answer = gate.check_subscribe(identity, subscription, topic_filter, group)
            decision = _combine(decision, answer)
            if decision.denied:
                return decision
        return decision

    def check_subscribe(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        group: str | None,
        user_properties: tuple[tuple[str, str], ...] = (),
        covering: str | None = None,
    ) -> MaybeDecision:
        """One filter (without ``$share/<group>/``). ``covering``: for a runtime pattern, the MQTT
        filter covering it, which the permissions decide on (deliveries then checked per topic)."""
        if self.authorizers is not None and self.authorizers.has_subscribe:
            return self._subscribe_async(
                identity, subscription, topic_filter, group, user_properties, covering
            )
        decision = self._after_authorizers_subscribe(
            identity, subscription, topic_filter, group, None, covering, user_properties
        )
        return self._count_subscribe(decision, identity, subscription, user_properties)

    async def _subscribe_async(
        self,
        identity: Identity,
        subscription: SubscribeFilter,
        topic_filter: str,
        group: str | None,
        user_properties: tuple[tuple[str, str], ...],
        covering: str | None,
    ) -> Decision:
        assert self.authorizers is not None
        request = SubscribeRequest(
            identity,
            topic_filter,
            subscription.qos,
            group,
            subscription.no_local,
            subscription.retain_as_published,
            subscription.retain_handling,
            user_properties,
        )
        decided = await self.authorizers.authorize_subscribe(request)
        if decided is not None and decided.denied:
            return self._count_subscribe(decided, identity, subscription, user_properties)
        decision = self._after_authorizers_subscribe(
            identity, subscription, topic_filter, group, decided, covering, user_properties
        )
        return self._count_subscribe(decision, identity, subscription, user_properties)

    # -- deliver (synchronous, hot path) ----------------------------------------------------

    def check_deliver(
        self,
        identity: Identity,
        message: Publication,
        qos: int = 0,
        group: str | None = None,
        recheck: bool = False,
    ) -> Decision:
        """A delivery to ``identity``. ``recheck``: the subscription was marked by gate 4, so the
        permissions decide the concrete topic as for an exact subscription at ``qos``/``group``."""
        decision = ALLOW
        if recheck and not _token_client(identity) and self.permissions is not None:
            decision = self.permissions.check_delivery(identity, message.topic, qos, group)
            if decision.denied:
                return self._deliver_denied(decision, identity, message)
        for gate in self.gates:
            answer = gate.check_deliver(identity, message)
            if answer is not None and answer.denied:
                return self._deliver_denied(answer, identity, message)
        return decision

    def _deliver_denied(
        self, decision: Decision, identity: Identity, message: Publication
    ) -> Decision:
        origin = getattr(message, "origin", None)
        return self._count(
            decision, "deliver", identity, message.topic, origin, message.qos, message.retain
        )


def _acl_kind(
    message: Publication | None, user_properties: tuple[tuple[str, str], ...] | None
) -> str | None:
    """The site ACL's message kind of a request, for the audit record (``msg``): what-if needs
    it to replay ACL rules that tell the kinds apart. Asked only when a record is written."""
    if message is not None:
        return PUBLISH_MESSAGES[message.kind].value
    if user_properties is not None:
        return subscribe_message(user_properties).value
    return None
