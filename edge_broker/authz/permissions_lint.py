"""``edge-broker lint`` for ``[permissions]`` (AUTHZ.md §4): which permission rules, sets and
assignments can never matter, and which overlaps force per-delivery checks.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from .permissions import overlapping_pairs, shadowed_permissions
from .permissions_config import Assignment, PermissionsConfig

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
                f"permissions.sets.{name}: no [[permissions.assign]] names this set: "
                "it never applies"
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
                f"permissions.sets.{name}: rules {a.id!r} ({a.topic}, {a.type.value}) and "
                f"{b.id!r} ({b.topic}, {b.type.value}) overlap: wildcard subscriptions across "
                "them are checked per delivery"
            )
        for perm in plist.permissions:
            if perm.allow and perm.topic == "#" and perm.activity.value == "ALL":
                findings.append(
                    f"permissions.sets.{name}: rule {perm.id!r} allows everything "
                    "('#', all activities): is this set meant to be a blacklist?"
                )
    for i, assignment in enumerate(config.assignments):
        if not assignment.selectors and i < len(config.assignments) - 1:
            findings.append(
                f"{assignment.label}: matches every client, so the "
                f"{len(config.assignments) - i - 1} assignment(s) after it never apply"
            )
    for j, i in shadowed.items():
        if config.assignments[i].selectors:  # a catch-all is reported once, above
            findings.append(
                f"{config.assignments[j].label}: never applies: {config.assignments[i].label} "
                "comes first and selects every client it selects"
            )
    if config.sets and config.unassigned is None and all(a.selectors for a in config.assignments):
        findings.append(
            "permissions: clients that no assignment selects get no permissions, which the HiveMQ "
            "model treats as ALLOW everything; add a catch-all [[permissions.assign]] or set "
            'permissions.unassigned = "deny"'
        )
    return findings
