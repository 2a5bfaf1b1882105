"""``edge-broker lint`` for the site ACL: rules that can never apply (AUTHZ.md §4, seed 004
"Priority" note).

Findings, each naming the rule or subject and why:

- ``disabled``: the ACL is disabled, so no rule applies at all;
- ``unused-rule`` / ``unused-subject``: named by no policy;
- ``allow-under-default-allow``: with ``default_permission`` allow the seed's matcher never
  consults allow rules ("they will be overlooked by the matcher");
- ``unmapped-message``: a liveliness message, which no MQTT action produces;
- ``never-asked``: a rule none of whose (flow, message) pairs the broker ever asks about
  (e.g. only egress ``declare_subscriber``: an MQTT broker never sends SUBSCRIBE to clients);
- ``shadowed-by-deny``: an allow key expression included, in EVERY scope (subject, flow,
  message) the rule applies to, in a deny key expression that always applies with it (same
  flow and message, same subject or one every such client also matches): explicit deny wins,
  so it can never allow anything;
- ``redundant-deny``: under default deny, a deny key expression that intersects no allow key
  expression a client of its subjects can get (same flow and message, any subject that one
  connection can match together with its own): no request can be included in both, so
  removing it changes no decision (it only names itself instead of the default);
- ``subject-overlap``: a deny rule of one subject while a client can also match another
  subject that would allow such requests: edge-broker denies (deny wins across subjects),
  Zenoh 1.x would allow (any matching subject that allows wins; see authz/acl.py). A
  migration note, not an error;
- ``verbatim-gap``: a deny key expression using ``*``/``**`` under default allow while some
  rule mentions a verbatim ``@`` chunk at that position: wildcards never match verbatim chunks,
  so such keys slip past the deny (a reminder, not an error).

The pairwise questions use indexes (KeTree for inclusion, authz/acl_index.py for intersection),
so a 10k-rule section lints in about a second rather than rules x rules. Every finding that
calls something dead is checked by a property test: removing it changes no decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..matching.ketree import KeTree
from ..matching.keyexpr import ChunkKind, KeyExpr
from .acl_config import UNMAPPED_MESSAGES, AclConfig, AclMessage, AclSubject, Flow, Permission
from .acl_index import IntersectIndex
from .acl_mqtt import PUBLISH_MESSAGES


@dataclass(frozen=True, slots=True)
class AclFinding:
    kind: str
    subject: str  # "rule <id>", "subject <id>" or "access_control"
    message: str
    rule_id: str | None = None  # set for findings about a rule
    key_expr: str | None = None  # set for findings about one key expression of that rule

    def __str__(self) -> str:
        return f"{self.subject}: {self.kind}: {self.message}"


# The (flow, message) pairs the MQTT mapping asks about (authz/acl_mqtt.py).
ASKED = frozenset(
    [(Flow.INGRESS, m) for m in PUBLISH_MESSAGES]
    + [(Flow.INGRESS, AclMessage.DECLARE_SUBSCRIBER), (Flow.INGRESS, AclMessage.DECLARE_QUERYABLE)]
    + [(Flow.EGRESS, m) for m in PUBLISH_MESSAGES]
)


def lint_acl(config: AclConfig) -> list[AclFinding]:
    """Every ACL finding, in a stable order (config order)."""
    if not config.enabled:
        return [AclFinding("disabled", "access_control", "enabled is false: no rule applies")]
    out: list[AclFinding] = []
    used_rules = {r for p in config.policies for r in p.rules if p.subjects}
    used_subjects = {s for p in config.policies for s in p.subjects if p.rules}
    for rule in config.rules:
        if rule.id not in used_rules:
            out.append(
                AclFinding(
                    "unused-rule",
                    f"rule {rule.id!r}",
                    "no policy attaches it to a subject",
                    rule_id=rule.id,
                )
            )
    for subject in config.subjects:
        if subject.id not in used_subjects:
            out.append(
                AclFinding(
                    "unused-subject", f"subject {subject.id!r}", "no policy attaches a rule to it"
                )
            )
    for rule in config.rules:
        dead = sorted(m.value for m in rule.messages if m in UNMAPPED_MESSAGES)
        if dead:
            out.append(
                AclFinding(
                    "unmapped-message",
                    f"rule {rule.id!r}",
                    f"{', '.join(dead)} never occur(s) over MQTT",
                    rule_id=rule.id,
                )
            )
        if not any((f, m) in ASKED for f in rule.flows for m in rule.messages):
            out.append(
                AclFinding(
                    "never-asked",
                    f"rule {rule.id!r}",
                    "none of its (flow, message) pairs occurs over MQTT: it can never apply",
                    rule_id=rule.id,
                )
            )
        if rule.permission is Permission.ALLOW and config.default_permission is Permission.ALLOW:
            out.append(
                AclFinding(
                    "allow-under-default-allow",
                    f"rule {rule.id!r}",
                    "default_permission is allow, so allow rules are never consulted",
                    rule_id=rule.id,
                )
            )
    model = _Model(config)
    if config.default_permission is Permission.DENY:
        out.extend(_shadowed(model))
        out.extend(_redundant_denies(model))
    else:
        out.extend(_verbatim_gaps(config))
    out.extend(_subject_overlaps(model))
    return out


# --- relations between subjects (exact: a subject's combinations are a product of lists) ---

_Lists = tuple[tuple[str, ...] | None, tuple[str, ...] | None, tuple[str, ...] | None]


def _lists(subject: AclSubject) -> _Lists:
    return (subject.interfaces, subject.cert_common_names, subject.usernames)


def _compatible(a: AclSubject, b: AclSubject) -> bool:
    """True when one connection can match both subjects."""
    return all(
        x is None or y is None or bool(set(x) & set(y))
        for x, y in zip(_lists(a), _lists(b), strict=True)
    )


def _generalizes(general: AclSubject, specific: AclSubject) -> bool:
    """True when every connection matching ``specific`` also matches ``general``."""
    return all(
        g is None or (s is not None and set(s) <= set(g))
        for g, s in zip(_lists(general), _lists(specific), strict=True)
    )


# (subject id, flow, message): where a rule applies. Rules reach connections through subjects
# (policies), and identical decisions hold for all combinations of one subject.
Scope = tuple[str, Flow, AclMessage]


class _Model:
    """What the lint checks ask, indexed once: rules per scope, deny trees, allow indexes."""

    def __init__(self, config: AclConfig) -> None:
        self.config = config
        self.subjects = {s.id: s for s in config.subjects}
        self.rule_index = {r.id: i for i, r in enumerate(config.rules)}
        self.applied: dict[str, set[Scope]] = {}  # rule id -> scopes
        for policy in config.policies:
            for sid in policy.subjects:
                for rid in policy.rules:
                    rule = config.rules[self.rule_index[rid]]
                    bucket = self.applied.setdefault(rid, set())
                    bucket.update((sid, f, m) for f in rule.flows for m in rule.messages)
        denies: dict[Scope, list[tuple[KeyExpr, int, str]]] = {}
        allows: dict[tuple[Flow, AclMessage], list[tuple[KeyExpr, str]]] = {}
        allows_by_scope: dict[Scope, list[tuple[KeyExpr, str]]] = {}
        for rule in config.rules:
            for sid, flow, message in self.applied.get(rule.id, ()):
                if rule.permission is Permission.DENY:
                    denies.setdefault((sid, flow, message), []).extend(
                        (k, self.rule_index[rule.id], rule.id) for k in rule.key_exprs
                    )
                else:
                    allows.setdefault((flow, message), []).extend((k, sid) for k in rule.key_exprs)
                    allows_by_scope.setdefault((sid, flow, message), []).extend(
                        (k, rule.id) for k in rule.key_exprs
                    )
        self.deny_trees = {scope: KeTree.build_ranked(m) for scope, m in denies.items()}
        self.allow_index = {fm: IntersectIndex.build(m) for fm, m in allows.items()}
        self.allow_index_by_scope = {
            scope: IntersectIndex.build(m) for scope, m in allows_by_scope.items()
        }
        used = {sid for scopes in self.applied.values() for sid, _, _ in scopes}
        self.generalizing = {
            sid: [g for g in used if _generalizes(self.subjects[g], self.subjects[sid])]
            for sid in used
        }

    def denied_by(self, sid: str, flow: Flow, message: AclMessage, expr: KeyExpr) -> str | None:
        """A deny of ``sid`` itself at this scope that includes ``expr``."""
        tree = self.deny_trees.get((sid, flow, message))
        return None if tree is None else tree.first_including(expr)


def _shadowed(model: _Model) -> list[AclFinding]:
    """Allow key expressions that a deny ALWAYS applied alongside them includes: a deny of the
    same subject or of a more general one (which every such connection also matches, and
    denies win across matched subjects)."""
    out: list[AclFinding] = []
    for rule in model.config.rules:
        mine = model.applied.get(rule.id)
        if rule.permission is not Permission.ALLOW or not mine:
            continue
        for expr in rule.key_exprs:
            by: set[str] = set()
            for sid, flow, message in mine:
                hit = next(
                    (
                        d
                        for g in model.generalizing[sid]
                        if (d := model.denied_by(g, flow, message, expr)) is not None
                    ),
                    None,
                )
                if hit is None:
                    break
                by.add(hit)
            else:
                out.append(
                    AclFinding(
                        "shadowed-by-deny",
                        f"rule {rule.id!r}",
                        f"key expression {expr.text!r} is included in deny rule(s) "
                        f"{', '.join(sorted(repr(b) for b in by))} wherever it applies: it can "
                        "never allow anything",
                        rule_id=rule.id,
                        key_expr=expr.text,
                    )
                )
    return out


def _redundant_denies(model: _Model) -> list[AclFinding]:
    """Deny key expressions that intersect no allow of any subject a connection could match
    together with theirs (so under default deny they never change a decision)."""
    out: list[AclFinding] = []
    for rule in model.config.rules:
        mine = model.applied.get(rule.id)
        if rule.permission is not Permission.DENY or not mine:
            continue
        for expr in rule.key_exprs:
            if not any(
                _compatible(model.subjects[other], model.subjects[sid])
                for sid, flow, message in mine
                if (flow, message) in model.allow_index
                for other in model.allow_index[(flow, message)].intersecting(expr)
            ):
                out.append(
                    AclFinding(
                        "redundant-deny",
                        f"rule {rule.id!r}",
                        f"deny {expr.text!r} overlaps no allow rule a client of its subjects "
                        "can get: under default deny it changes no decision",
                        rule_id=rule.id,
                        key_expr=expr.text,
                    )
                )
    return out


def _subject_overlaps(model: _Model) -> list[AclFinding]:
    config = model.config

    def zenoh_allows(sid: str, flow: Flow, message: AclMessage, expr: KeyExpr) -> bool:
        """Could subject ``sid`` alone allow some request inside ``expr`` (Zenoh's view)?"""
        if model.denied_by(sid, flow, message, expr) is not None:
            return False
        if config.default_permission is Permission.ALLOW:
            return True
        index = model.allow_index_by_scope.get((sid, flow, message))
        return index is not None and next(index.intersecting(expr), None) is not None

    out: list[AclFinding] = []
    attached: dict[str, list[str]] = {}  # subject id -> its deny rules, in rules order
    for rule in config.rules:
        if rule.permission is Permission.DENY:
            for sid in sorted({sid for sid, _, _ in model.applied.get(rule.id, ())}):
                attached.setdefault(sid, []).append(rule.id)
    for sid in sorted(attached, key=lambda x: [s.id for s in config.subjects].index(x)):
        for other in config.subjects:
            if other.id == sid or not _compatible(model.subjects[sid], other):
                continue
            for rid in attached[sid]:
                rule = config.rules[model.rule_index[rid]]
                if any(
                    zenoh_allows(other.id, flow, message, expr)
                    for flow in rule.flows
                    for message in rule.messages
                    if message not in UNMAPPED_MESSAGES
                    for expr in rule.key_exprs
                ):
                    out.append(
                        AclFinding(
                            "subject-overlap",
                            f"rule {rid!r}",
                            f"a client matching both subject {sid!r} and subject {other.id!r} "
                            "is denied here (deny wins across subjects) but Zenoh 1.x would "
                            f"allow it through {other.id!r}",
                            rule_id=rid,
                        )
                    )
    return out


def _verbatim_gaps(config: AclConfig) -> list[AclFinding]:
    verbatims = {
        c.text
        for r in config.rules
        for k in r.key_exprs
        for c in k.chunks
        if c.kind is ChunkKind.VERBATIM
    }
    if not verbatims:
        return []
    out: list[AclFinding] = []
    for rule in config.rules:
        if rule.permission is not Permission.DENY:
            continue
        for expr in rule.key_exprs:
            if any(c.kind in (ChunkKind.STAR, ChunkKind.DOUBLE_STAR) for c in expr.chunks):
                out.append(
                    AclFinding(
                        "verbatim-gap",
                        f"rule {rule.id!r}",
                        f"deny {expr.text!r} uses wildcards, which never match verbatim chunks "
                        f"({', '.join(sorted(verbatims))}); keys containing them are not denied",
                        rule_id=rule.id,
                        key_expr=expr.text,
                    )
                )
    return out
