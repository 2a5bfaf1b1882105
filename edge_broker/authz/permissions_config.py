"""``[permissions]``: named permission sets and which clients get which (AUTHZ.md §2 gate 4).

::

    [permissions]
    # What a client that no assignment selects gets: unset = seed 003 (no permissions, so
    # ALLOW); "deny" makes unassigned clients deny-all.
    unassigned = "deny"

    [permissions.sets.sensors]
    default_behaviour = "deny"          # optional; seed 003 default: ALLOW if empty, else DENY
    rules = [
      { id = "own-data", topic = "sensors/${clientid}/#", activity = "PUBLISH", qos = "ZERO_ONE" },
      { id = "commands", topic = "commands/${clientid}", activity = "SUBSCRIBE" },
    ]

    [[permissions.assign]]              # tried in order, the first that matches decides
    role = "sensor"                     # any of: username, client_id, cert_cn, role, method, tenant
    sets = ["sensors"]                  # concatenated in this order into the client's list

Values in an assignment are exact strings or shell-style patterns (``dev-*``); every key given
must match (AND); an assignment with no keys matches every client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from ..identity import Identity
from .permissions import PermissionConfigError, PermissionList, parse_permission_list

SELECTOR_KEYS = ("username", "client_id", "cert_cn", "role", "method", "tenant")


@dataclass(frozen=True, slots=True)
class Assignment:
    selectors: tuple[tuple[str, str], ...]
    sets: tuple[str, ...]
    label: str

    def matches(self, identity: Identity) -> bool:
        for key, pattern in self.selectors:
            if key == "role":
                if not any(fnmatchcase(role, pattern) for role in identity.roles):
                    return False
                continue
            value = {
                "username": identity.username,
                "client_id": identity.client_id,
                "cert_cn": identity.cert_cn,
                "method": identity.method,
                "tenant": identity.tenant,
            }[key]
            if value is None or not fnmatchcase(value, pattern):
                return False
        return True


@dataclass(frozen=True, slots=True)
class PermissionsConfig:
    sets: Mapping[str, PermissionList]
    assignments: tuple[Assignment, ...]
    unassigned: str | None = None  # None | "allow" | "deny"
    separator: str = "/"

    @property
    def enabled(self) -> bool:
        return bool(self.assignments) or self.unassigned is not None

    def assignment_for(self, identity: Identity) -> Assignment | None:
        """The first assignment matching ``identity`` (None: unassigned)."""
        for assignment in self.assignments:
            if assignment.matches(identity):
                return assignment
        return None

    def assigned_list(self, assignment: Assignment) -> PermissionList:
        """The list ``assignment`` gives (its sets merged in order), before placeholders."""
        lists = [self.sets[name] for name in assignment.sets]
        if len(lists) == 1:
            return lists[0]
        merged = tuple(p for plist in lists for p in plist.permissions)
        defaults = [plist.default_allow for plist in lists if plist.default_allow is not None]
        return PermissionList(merged, defaults[0] if defaults else None, self.separator)

    def select(self, identity: Identity) -> tuple[PermissionList, str]:
        """The client's list (before placeholders are bound) and a label saying why."""
        assignment = self.assignment_for(identity)
        if assignment is not None:
            return self.assigned_list(assignment), assignment.label
        default = None if self.unassigned is None else self.unassigned == "allow"
        return PermissionList((), default, self.separator), "unassigned"


def parse_permissions_config(table: Mapping[str, Any], separator: str = "/") -> PermissionsConfig:
    """Raise PermissionConfigError naming ``permissions.<...>`` and what to write; its
    ``problems`` hold every problem of the section, not only the first (issue 20)."""
    problems: list[str] = []
    unknown = sorted(set(table) - {"unassigned", "sets", "assign"})
    if unknown:
        problems.append(
            f"permissions: unknown key(s) {', '.join(unknown)}; allowed: unassigned, sets, assign"
        )
    unassigned = table.get("unassigned")
    if unassigned not in (None, "allow", "deny"):
        problems.append(
            f'permissions.unassigned: {unassigned!r} is not valid: write "allow" or "deny"'
        )
        unassigned = None
    raw_sets = table.get("sets", {})
    if not isinstance(raw_sets, Mapping):
        problems.append("permissions.sets: must be a table of named sets ([permissions.sets.NAME])")
        raw_sets = {}
    sets: dict[str, PermissionList] = {}
    broken: set[str] = set()  # defined, but with problems: assignments naming them are fine
    for name, body in raw_sets.items():
        broken.add(name)
        if not isinstance(body, Mapping):
            problems.append(f"permissions.sets.{name}: must be a table with rules = [...]")
            continue
        extra = sorted(set(body) - {"rules", "default_behaviour"})
        if extra:
            problems.append(
                f"permissions.sets.{name}: unknown key(s) {', '.join(extra)}; allowed: rules, "
                "default_behaviour"
            )
        rules = body.get("rules", [])
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            problems.append(f"permissions.sets.{name}.rules: must be an array of tables")
            continue
        default = body.get("default_behaviour")
        try:
            sets[name] = parse_permission_list(rules, name, default, separator)
        except PermissionConfigError as exc:
            problems.extend(f"permissions.sets.{name}: {problem}" for problem in exc.problems)
            continue
        if not extra:
            broken.discard(name)
    raw_assign = table.get("assign", [])
    if not isinstance(raw_assign, Sequence) or isinstance(raw_assign, str):
        problems.append("permissions.assign: must be an array of tables ([[permissions.assign]])")
        raw_assign = []
    assignments = []
    for i, entry in enumerate(raw_assign):
        where = f"permissions.assign[{i}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be a table")
            continue
        extra = sorted(set(entry) - set(SELECTOR_KEYS) - {"sets"})
        if extra:
            problems.append(
                f"{where}: unknown key(s) {', '.join(extra)}; select with "
                f"{', '.join(SELECTOR_KEYS)} and name sets = [...]"
            )
        names = entry.get("sets")
        if not isinstance(names, Sequence) or isinstance(names, str) or not names:
            problems.append(f'{where}.sets: name one or more sets, e.g. sets = ["sensors"]')
            continue
        for set_name in names:
            if set_name not in sets and set_name not in broken:
                known = ", ".join(sorted(raw_sets)) or "none defined"
                problems.append(f"{where}.sets: no permission set {set_name!r} (defined: {known})")
        selectors = []
        for key in SELECTOR_KEYS:
            if key in entry:
                value = entry[key]
                if not isinstance(value, str) or not value:
                    problems.append(
                        f"{where}.{key}: must be a non-empty string (a name or a pattern)"
                    )
                    continue
                selectors.append((key, value))
        label = ", ".join(f"{k}={v}" for k, v in selectors) or "everyone"
        assignments.append(Assignment(tuple(selectors), tuple(names), f"{where} ({label})"))
    if problems:
        raise PermissionConfigError(problems[0], problems)
    return PermissionsConfig(sets, tuple(assignments), unassigned, separator)
