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

from ..auth.identity import Identity
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

    def select(self, identity: Identity) -> tuple[PermissionList, str]:
        """The client's list (before placeholders are bound) and a label saying why."""
        for assignment in self.assignments:
            if assignment.matches(identity):
                lists = [self.sets[name] for name in assignment.sets]
                if len(lists) == 1:
                    return lists[0], assignment.label
                merged = tuple(p for plist in lists for p in plist.permissions)
                defaults = [plist.default_allow for plist in lists if plist.default_allow is not None]
                return PermissionList(merged, defaults[0] if defaults else None, self.separator), assignment.label
        default = None if self.unassigned is None else self.unassigned == "allow"
        return PermissionList((), default, self.separator), "unassigned"


def parse_permissions_config(table: Mapping[str, Any], separator: str = "/") -> PermissionsConfig:
    """Raise PermissionConfigError naming ``permissions.<...>`` and what to write."""
    unknown = sorted(set(table) - {"unassigned", "sets", "assign"})
    if unknown:
        raise PermissionConfigError(
            f"permissions: unknown key(s) {', '.join(unknown)}; allowed: unassigned, sets, assign"
        )
    unassigned = table.get("unassigned")
    if unassigned not in (None, "allow", "deny"):
        raise PermissionConfigError('permissions.unassigned: write "allow" or "deny"')
    raw_sets = table.get("sets", {})
    if not isinstance(raw_sets, Mapping):
        raise PermissionConfigError("permissions.sets: must be a table of named sets ([permissions.sets.NAME])")
    sets: dict[str, PermissionList] = {}
    for name, body in raw_sets.items():
        if not isinstance(body, Mapping):
            raise PermissionConfigError(f"permissions.sets.{name}: must be a table with rules = [...]")
        extra = sorted(set(body) - {"rules", "default_behaviour"})
        if extra:
            raise PermissionConfigError(
                f"permissions.sets.{name}: unknown key(s) {', '.join(extra)}; allowed: rules, default_behaviour"
            )
        rules = body.get("rules", [])
        if not isinstance(rules, Sequence) or isinstance(rules, str):
            raise PermissionConfigError(f"permissions.sets.{name}.rules: must be an array of tables")
        default = body.get("default_behaviour")
        try:
            sets[name] = parse_permission_list(rules, name, default, separator)
        except PermissionConfigError as exc:
            raise PermissionConfigError(f"permissions.sets.{name}: {exc}") from None
    raw_assign = table.get("assign", [])
    if not isinstance(raw_assign, Sequence) or isinstance(raw_assign, str):
        raise PermissionConfigError("permissions.assign: must be an array of tables ([[permissions.assign]])")
    assignments = []
    for i, entry in enumerate(raw_assign):
        where = f"permissions.assign[{i}]"
        if not isinstance(entry, Mapping):
            raise PermissionConfigError(f"{where}: must be a table")
        extra = sorted(set(entry) - set(SELECTOR_KEYS) - {"sets"})
        if extra:
            raise PermissionConfigError(
                f"{where}: unknown key(s) {', '.join(extra)}; select with {', '.join(SELECTOR_KEYS)} and name sets = [...]"
            )
        names = entry.get("sets")
        if not isinstance(names, Sequence) or isinstance(names, str) or not names:
            raise PermissionConfigError(f'{where}.sets: name one or more sets, e.g. sets = ["sensors"]')
        for set_name in names:
            if set_name not in sets:
                known = ", ".join(sorted(sets)) or "none defined"
                raise PermissionConfigError(f"{where}.sets: no permission set {set_name!r} (defined: {known})")
        selectors = []
        for key in SELECTOR_KEYS:
            if key in entry:
                value = entry[key]
                if not isinstance(value, str) or not value:
                    raise PermissionConfigError(f"{where}.{key}: must be a non-empty string (a name or a pattern)")
                selectors.append((key, value))
        label = ", ".join(f"{k}={v}" for k, v in selectors) or "everyone"
        assignments.append(Assignment(tuple(selectors), tuple(names), f"{where} ({label})"))
    return PermissionsConfig(sets, tuple(assignments), unassigned, separator)
