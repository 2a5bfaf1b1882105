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
- ``shadowed-by-deny``: an allow key expression included, in EVERY scope (subject combination,
  flow, message) the rule applies to, in a deny key expression of that same scope: explicit
  deny wins, so it can never allow anything;
- ``redundant-deny``: under default deny, a deny key expression that intersects no allow key
  expression of any scope it applies to: no request can be included in both, so removing it
  changes no decision (it only names itself instead of the default);
- ``subject-overlap``: a deny rule of one subject while a client can also match another
  subject that would allow such requests: edge-broker denies (deny wins across subjects),
  Zenoh 1.x would allow (any matching subject that allows wins; see authz/acl.py). A
  migration note, not an error;
- ``verbatim-gap``: a deny key expression using ``*``/``**`` under default allow while some
  rule mentions a verbatim ``@`` chunk at that position: wildcards never match verbatim chunks,
  so such keys slip past the deny (a reminder, not an error).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..matching.keyexpr import ChunkKind, KeyExpr
from .acl_config import UNMAPPED_MESSAGES, AclConfig, Flow, Message, Permission, SubjectCombination


@dataclass(frozen=True, slots=True)
class AclFinding:
    kind: str
    subject: str  # "rule <id>", "subject <id>" or "access_control"
    message: str
    rule_id: str | None = None  # set for findings about a rule
    key_expr: str | None = None  # set for findings about one key expression of that rule

    def __str__(self) -> str:
        return f"{self.subject}: {self.kind}: {self.message}"


Scope = tuple[SubjectCombination, Flow, Message]

# The (flow, message) pairs the MQTT mapping asks about (authz/acl_mqtt.py).
_PUBLISH_MESSAGES = (Message.PUT, Message.DELETE, Message.QUERY, Message.REPLY)
ASKED = frozenset(
    [(Flow.INGRESS, m) for m in _PUBLISH_MESSAGES]
    + [(Flow.INGRESS, Message.DECLARE_SUBSCRIBER), (Flow.INGRESS, Message.DECLARE_QUERYABLE)]
    + [(Flow.EGRESS, m) for m in _PUBLISH_MESSAGES]
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
    if config.default_permission is Permission.DENY:
        out.extend(_shadowed(config))
        out.extend(_redundant_denies(config))
    else:
        out.extend(_verbatim_gaps(config))
    out.extend(_subject_overlaps(config))
    return out


def _compatible(a: SubjectCombination, b: SubjectCombination) -> bool:
    """True when one connection can match both combinations."""
    return all(
        x is None or y is None or x == y
        for x, y in (
            (a.interface, b.interface),
            (a.cert_common_name, b.cert_common_name),
            (a.username, b.username),
        )
    )


def _subject_overlaps(config: AclConfig) -> list[AclFinding]:
    subjects = {s.id: s for s in config.subjects}
    rules = {r.id: r for r in config.rules}
    attached: dict[str, list[str]] = {}  # subject id -> rule ids, in policy order
    for policy in config.policies:
        for sid in policy.subjects:
            bucket = attached.setdefault(sid, [])
            bucket.extend(r for r in policy.rules if r not in bucket)

    def zenoh_allows(sid: str, flow: Flow, message: Message, expr: KeyExpr) -> bool:
        """Could subject ``sid`` alone allow some request inside ``expr`` (Zenoh's view)?"""
        mine = [rules[r] for r in attached.get(sid, ())]
        scoped = [r for r in mine if flow in r.flows and message in r.messages]
        if any(
            r.permission is Permission.DENY and k.includes(expr)
            for r in scoped
            for k in r.key_exprs
        ):
            return False
        if config.default_permission is Permission.ALLOW:
            return True
        return any(
            r.permission is Permission.ALLOW and k.intersects(expr)
            for r in scoped
            for k in r.key_exprs
        )

    out: list[AclFinding] = []
    seen: set[tuple[str, str, str]] = set()
    for sid, rule_ids in attached.items():
        for other in attached.keys() | subjects.keys():
            if other == sid or other not in subjects or sid not in subjects:
                continue
            if not any(
                _compatible(a, b)
                for a in subjects[sid].combinations()
                for b in subjects[other].combinations()
            ):
                continue
            for rid in rule_ids:
                rule = rules[rid]
                if rule.permission is not Permission.DENY or (rid, sid, other) in seen:
                    continue
                if any(
                    zenoh_allows(other, flow, message, expr)
                    for flow in rule.flows
                    for message in rule.messages
                    if message not in UNMAPPED_MESSAGES
                    for expr in rule.key_exprs
                ):
                    seen.add((rid, sid, other))
                    out.append(
                        AclFinding(
                            "subject-overlap",
                            f"rule {rid!r}",
                            f"a client matching both subject {sid!r} and subject {other!r} is "
                            "denied here (deny wins across subjects) but Zenoh 1.x would allow "
                            f"it through {other!r}",
                            rule_id=rid,
                        )
                    )
    return out


def _scopes(config: AclConfig) -> dict[str, set[Scope]]:
    """rule id -> every (combination, flow, message) it applies to."""
    subjects = {s.id: s for s in config.subjects}
    rules = {r.id: r for r in config.rules}
    scopes: dict[str, set[Scope]] = {}
    for policy in config.policies:
        for sid in policy.subjects:
            for combo in subjects[sid].combinations():
                for rid in policy.rules:
                    rule = rules[rid]
                    bucket = scopes.setdefault(rid, set())
                    for flow in rule.flows:
                        for message in rule.messages:
                            bucket.add((combo, flow, message))
    return scopes


def _generalizes(general: SubjectCombination, specific: SubjectCombination) -> bool:
    """True when every connection matching ``specific`` also matches ``general``."""
    return all(
        g is None or g == s
        for g, s in (
            (general.interface, specific.interface),
            (general.cert_common_name, specific.cert_common_name),
            (general.username, specific.username),
        )
    )


def _by_scope(
    config: AclConfig, scopes: dict[str, set[Scope]], permission: Permission
) -> dict[Scope, list[tuple[str, KeyExpr]]]:
    out: dict[Scope, list[tuple[str, KeyExpr]]] = {}
    for rule in config.rules:
        if rule.permission is permission:
            for scope in scopes.get(rule.id, ()):
                out.setdefault(scope, []).extend((rule.id, k) for k in rule.key_exprs)
    return out


def _shadowed(config: AclConfig) -> list[AclFinding]:
    """Allow key expressions that a deny ALWAYS applied alongside them includes: a deny of the
    same combination or of a more general one (which every such connection also matches, and
    denies win across matched combinations)."""
    scopes = _scopes(config)
    denies = _by_scope(config, scopes, Permission.DENY)
    out: list[AclFinding] = []
    for rule in config.rules:
        mine = scopes.get(rule.id)
        if rule.permission is not Permission.ALLOW or not mine:
            continue
        for expr in rule.key_exprs:
            by: set[str] = set()
            for combo, flow, message in mine:
                hit = next(
                    (
                        d
                        for (c, f, m), entries in denies.items()
                        if f is flow and m is message and _generalizes(c, combo)
                        for d, k in entries
                        if k.includes(expr)
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


def _redundant_denies(config: AclConfig) -> list[AclFinding]:
    """Deny key expressions that intersect no allow of any combination a connection could
    match together with theirs (so under default deny they never change a decision)."""
    scopes = _scopes(config)
    allows = _by_scope(config, scopes, Permission.ALLOW)
    out: list[AclFinding] = []
    for rule in config.rules:
        mine = scopes.get(rule.id)
        if rule.permission is not Permission.DENY or not mine:
            continue
        for expr in rule.key_exprs:
            if not any(
                k.intersects(expr)
                for combo, flow, message in mine
                for (c, f, m), entries in allows.items()
                if f is flow and m is message and _compatible(c, combo)
                for _, k in entries
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
