"""The site ACL compiled for the hot path (seed 004, AUTHZ.md §2 gate 5).

Compilation follows the seed: for every (subject combination, flow, message) an *allow* and a *deny*
:class:`~edge_broker.matching.ketree.KeTree` holding the key expressions of the rules that policies
attach to that subject (the trees are built per subject and shared by all of its combinations; a
combination listed by several subjects gets the union of theirs). A decision is EXACTLY the seed's
pseudocode, with requests matched by INCLUSION (a superset or a partial overlap does not match)::

    default deny : allowed iff not deny.match(k) and allow.match(k)
    default allow: allowed iff not deny.match(k)      (the allow tree is not consulted)

so explicit deny > explicit allow > ``default_permission``. When several rules match, the one
reported is the first in the ``rules`` list. A disabled ACL allows everything.

Identities: a connection matches a subject combination when each of its interface, certificate
CN and username is either unconstrained by the combination or equal to it (OR inside a list,
AND across lists, OR across subjects). :meth:`Acl.for_identity` merges the trees of every
combination the identity matches into one :class:`SubjectAcl`, so the broker does one or two
tree lookups per publish and per delivery; merged results are memoised per set of matched
combinations (bounded) on the :class:`Acl` object.

Deliberate divergence from Zenoh 1.x: when a connection matches SEVERAL subject combinations,
Zenoh runs the pseudocode per combination and allows when ANY of them allows (so a deny given
to subject "field" is void for a field client that also matches a catch-all subject; checked
against a real Zenoh 1.10 router in tests/authz/test_acl_zenoh_router.py). edge-broker applies
the pseudocode to the UNION of the matched combinations' rules: an explicit deny from any
matched subject wins (AUTHZ.md §2 gate 5, issue 7 "deny rules that nothing can override"). The
result is never more permissive than Zenoh's; ``lint`` reports the configurations where the two
differ (``subject-overlap``). With a single matched combination both are identical.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..identity import Identity
from ..matching.ketree import KeTree
from ..matching.keyexpr import ChunkKind, KeyExpr, as_keyexpr
from .acl_config import (
    AclConfig,
    AclMessage,
    AclRule,
    Flow,
    Permission,
    SubjectCombination,
    load_acl_config,
)

_EMPTY_TREE = KeTree.build(())
_CACHE_LIMIT = 1024  # merged SubjectAcls memoised per Acl (one per set of matched subjects)

Scope = tuple[Flow, AclMessage]
# (rule position in the rules list, rule id, key expression)
_Entry = tuple[int, str, KeyExpr]


@dataclass(frozen=True, slots=True)
class AclDecision:
    """The ACL's verdict; ``rule_id`` is the deciding rule, ``None`` for the default permission
    (or a disabled ACL). ``reason`` explains denials that no rule gave (unrepresentable topic)."""

    allowed: bool
    rule_id: str | None = None
    reason: str | None = None

    def explain(self) -> str:
        """One line for ``explain`` and Reason Strings (AUTHZ.md §3: names the gate and rule)."""
        verdict = "allowed" if self.allowed else "denied"
        if self.rule_id is not None:
            return f'{verdict} by acl rule "{self.rule_id}"'
        if self.reason is not None:
            return f"{verdict} by acl: {self.reason}"
        return f"{verdict} by acl default_permission"


ALLOWED_DISABLED = AclDecision(True, None, "access control is disabled")


@dataclass(frozen=True, slots=True)
class TreePair:
    allow: KeTree
    deny: KeTree


@dataclass(frozen=True, slots=True)
class SubjectAcl:
    """Everything the ACL says about one subject (an identity's merged combinations).

    ``verbatims`` are the verbatim chunks (``@x``) that the rules name anywhere in the section;
    the MQTT mapping refuses any other ``@`` level (authz/acl_mqtt.py)."""

    enabled: bool
    default_permission: Permission
    trees: Mapping[Scope, TreePair]
    verbatims: frozenset[str] = frozenset()

    def decide(self, flow: Flow, message: AclMessage, key: KeyExpr | str) -> AclDecision:
        """The seed's ``is_allowed`` for ``key`` (a key or key expression)."""
        if not self.enabled:
            return ALLOWED_DISABLED
        request = as_keyexpr(key)  # an invalid key expression is an error, never a verdict
        pair = self.trees.get((flow, message))
        if pair is None:
            return AclDecision(self.default_permission is Permission.ALLOW)
        denied_by = pair.deny.first_including(request)
        if denied_by is not None:
            return AclDecision(False, denied_by)
        if self.default_permission is Permission.ALLOW:
            return AclDecision(True)
        allowed_by = pair.allow.first_including(request)
        return AclDecision(allowed_by is not None, allowed_by)

    def allows(self, flow: Flow, message: AclMessage, key: KeyExpr | str) -> bool:
        return self.decide(flow, message, key).allowed


@dataclass(frozen=True, slots=True)
class Acl:
    """A compiled ``access_control`` section. Build with :meth:`compile` or :meth:`load`.

    Trees are compiled once per SUBJECT (``subject_acls[k]`` for ``subject_ids[k]``, the
    subjects some policy names), not per combination: a subject listing a thousand usernames
    has a thousand combinations but one set of trees. ``combinations[i]`` (every combination
    of every such subject, deduplicated) leads to the subjects it belongs to,
    ``combination_subjects[i]``. A connection matching several subjects gets their trees
    united per (flow, message) on first use (:meth:`KeTree.union` shares subtrees, so this
    costs the overlap between subjects, not the number of rules)."""

    config: AclConfig
    subject_ids: tuple[str, ...]
    subject_acls: tuple[SubjectAcl, ...]
    combinations: tuple[SubjectCombination, ...]
    combination_subjects: tuple[tuple[int, ...], ...]
    verbatims: frozenset[str]
    combination_index: Mapping[SubjectCombination, int] = field(compare=False, repr=False)
    _merged: dict[tuple[int, ...], SubjectAcl] = field(
        default_factory=dict, compare=False, repr=False
    )

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    @property
    def default_permission(self) -> Permission:
        return self.config.default_permission

    @classmethod
    def load(cls, data: Any, source: str = "access_control") -> Acl:
        """From the section as a mapping (e.g. a TOML table); :class:`AclError` if invalid."""
        return cls.compile(load_acl_config(data, source))

    @classmethod
    def compile(cls, config: AclConfig) -> Acl:
        rules = {rule.id: (i, rule) for i, rule in enumerate(config.rules)}
        attached: dict[str, dict[str, None]] = {}  # subject id -> rule ids (ordered set)
        if config.enabled:
            for policy in config.policies:
                for subject_id in policy.subjects:
                    attached.setdefault(subject_id, {}).update(dict.fromkeys(policy.rules))
        subject_ids = tuple(s.id for s in config.subjects if s.id in attached)
        verbatims = frozenset(
            chunk.text
            for rule in config.rules
            for expr in rule.key_exprs
            for chunk in expr.chunks
            if chunk.kind is ChunkKind.VERBATIM
        )
        # Subjects given the same rules share one compiled tree (and unions skip it).
        built: dict[tuple[_Entry, ...], KeTree] = {}

        def tree(entries: list[_Entry]) -> KeTree:
            key = tuple(sorted(entries, key=lambda e: (e[0], e[2].text)))
            if key not in built:
                built[key] = _tree(entries)
            return built[key]

        subject_acls = []
        for subject_id in subject_ids:
            scopes: dict[Scope, tuple[list[_Entry], list[_Entry]]] = {}
            for rule_id in attached[subject_id]:
                index, rule = rules[rule_id]
                _add_rule(scopes, index, rule)
            trees = {scope: TreePair(tree(a), tree(d)) for scope, (a, d) in scopes.items()}
            subject_acls.append(
                SubjectAcl(config.enabled, config.default_permission, trees, verbatims)
            )
        by_subject = {s.id: s for s in config.subjects}
        combos: dict[SubjectCombination, list[int]] = {}
        for k, subject_id in enumerate(subject_ids):
            for combo in by_subject[subject_id].combinations():
                owners = combos.setdefault(combo, [])
                if k not in owners:
                    owners.append(k)
        return cls(
            config,
            subject_ids,
            tuple(subject_acls),
            tuple(combos),
            tuple(tuple(owners) for owners in combos.values()),
            verbatims,
            {combo: i for i, combo in enumerate(combos)},
        )

    def matching_combinations(
        self, interface: str | None, cert_cn: str | None, username: str | None
    ) -> tuple[int, ...]:
        """A combination matches when each attribute is unconstrained (None) or equal, so the
        candidates are the at most 8 triples mixing each attribute with None: dict lookups,
        whatever the number of combinations."""
        found = {
            self.combination_index[candidate]
            for i in {interface, None}
            for c in {cert_cn, None}
            for u in {username, None}
            if (candidate := SubjectCombination(i, c, u)) in self.combination_index
        }
        return tuple(sorted(found))

    def _matched(
        self, interface: str | None, cert_cn: str | None, username: str | None
    ) -> tuple[int, ...]:
        """Indices (into ``subject_ids``) of the subjects these attributes match, sorted."""
        found: set[int] = set()
        for i in self.matching_combinations(interface, cert_cn, username):
            found.update(self.combination_subjects[i])
        return tuple(sorted(found))

    def matching_subjects(self, identity: Identity) -> tuple[str, ...]:
        """Ids of the subjects (named by a policy) the identity matches, in config order:
        what ``explain`` shows beside the verdict."""
        matched = self._matched(identity.interface, identity.cert_cn, identity.username)
        return tuple(self.subject_ids[k] for k in matched)

    def for_subject(
        self, interface: str | None, cert_cn: str | None, username: str | None
    ) -> SubjectAcl:
        """The merged :class:`SubjectAcl` for these connection attributes (trees of several
        subjects are united per scope on first use, then kept)."""
        matched = self._matched(interface, cert_cn, username)
        if len(matched) == 1:
            return self.subject_acls[matched[0]]
        cached = self._merged.get(matched)
        if cached is not None:
            return cached
        merged = _LazyUnion(tuple(self.subject_acls[k].trees for k in matched))
        result = SubjectAcl(
            self.config.enabled, self.config.default_permission, merged, self.verbatims
        )
        if len(self._merged) >= _CACHE_LIMIT:
            self._merged.clear()
        self._merged[matched] = result
        return result

    def for_identity(self, identity: Identity) -> SubjectAcl:
        """The :class:`SubjectAcl` of a connected client (interface, certificate CN, username)."""
        return self.for_subject(identity.interface, identity.cert_cn, identity.username)

    def decide(
        self,
        subject_attrs: Identity | tuple[str | None, str | None, str | None],
        flow: Flow,
        message: AclMessage,
        key: KeyExpr | str,
    ) -> AclDecision:
        """One-shot decision; the broker should keep :meth:`for_identity`'s result instead."""
        if isinstance(subject_attrs, Identity):
            subject = self.for_identity(subject_attrs)
        else:
            subject = self.for_subject(*subject_attrs)
        return subject.decide(flow, message, key)


class _LazyUnion(Mapping[Scope, TreePair]):
    """The union of several combinations' trees, built per scope on first use: a connection
    pays only for the (flow, message) pairs its traffic actually asks about."""

    __slots__ = ("_parts", "_scopes", "_built")

    def __init__(self, parts: tuple[Mapping[Scope, TreePair], ...]) -> None:
        self._parts = parts
        self._scopes = frozenset(scope for trees in parts for scope in trees)
        self._built: dict[Scope, TreePair] = {}

    def __getitem__(self, scope: Scope) -> TreePair:
        pair = self._built.get(scope)
        if pair is None:
            if scope not in self._scopes:
                raise KeyError(scope)
            present = [trees[scope] for trees in self._parts if scope in trees]
            pair = TreePair(
                KeTree.union(p.allow for p in present), KeTree.union(p.deny for p in present)
            )
            self._built[scope] = pair
        return pair

    def __iter__(self) -> Iterator[Scope]:
        return iter(self._scopes)

    def __len__(self) -> int:
        return len(self._scopes)


def _add_rule(
    scopes: dict[Scope, tuple[list[_Entry], list[_Entry]]], index: int, rule: AclRule
) -> None:
    for flow in rule.flows:
        for message in rule.messages:
            allow, deny = scopes.setdefault((flow, message), ([], []))
            target = allow if rule.permission is Permission.ALLOW else deny
            target.extend((index, rule.id, expr) for expr in rule.key_exprs)


def _tree(entries: list[_Entry]) -> KeTree:
    """Ranked by the rule's position, so the first matching rule in the list is reported."""
    if not entries:
        return _EMPTY_TREE
    return KeTree.build_ranked((expr, index, rule_id) for index, rule_id, expr in entries)
