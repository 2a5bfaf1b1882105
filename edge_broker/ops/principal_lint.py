"""``lint`` and ``check``: configured principals that default permissions leave with nothing.

Under ``[permissions] unassigned = "deny"`` a principal that no assignment selects, or whose
sets hold no rule and deny by default, is refused every publish and subscribe. For a bridge
that means one denial per bridged message (at telemetry rates a steady stream of audit records
and log lines); for a password user, a device that logs in and can do nothing. Both are almost
always a forgotten ``[[permissions.assign]]``, so both are reported with the assignment to add.

A bridge's principal is known exactly (``method = "bridge"``, client id and username = the
bridge's name, per tenant of its topic mappings). A password user's client id, certificate CN
and (unless the entry names tenants) tenant are chosen at CONNECT, so an assignment selecting
on them counts as one that may apply: only users no assignment can reach are reported.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING

from ..identity import Identity
from ..matching.names import DEFAULT_TENANT

if TYPE_CHECKING:
    from ..authz.permissions import PermissionList
    from ..authz.permissions_config import Assignment, PermissionsConfig
    from ..config import Config

MAX_NAMED = 5  # users named in one finding; the rest are counted


def _nothing(plist: PermissionList) -> bool:
    return not plist.permissions and plist.default_allow is False


def _bridge_findings(config: Config, permissions: PermissionsConfig) -> list[str]:
    findings = []
    for bridge in config.bridges:
        for tenant in sorted({m.tenant for m in bridge.topics}) or [DEFAULT_TENANT]:
            identity = Identity(
                client_id=bridge.name,
                method="bridge",
                tenant=tenant,
                username=bridge.name,
                interface=bridge.principal,
            )
            plist, label = permissions.select(identity)
            if not _nothing(plist):
                continue
            why = (
                'no [[permissions.assign]] selects it and unassigned = "deny"'
                if label == "unassigned"
                else f"{label} gives it no permission and denies by default"
            )
            where = "" if tenant == DEFAULT_TENANT else f" in tenant {tenant!r}"
            findings.append(
                f'bridges.{bridge.name}: the bridge\'s principal (method "bridge", username '
                f'"{bridge.name}"){where} has no permissions: {why}; every message it bridges '
                f"in or out is denied. Add [[permissions.assign]] with "
                f'method = "bridge" and username = "{bridge.name}" and a set allowing its topics'
            )
    return findings


def _may_match(assignment: Assignment, username: str, roles: tuple[str, ...]) -> bool:
    for key, pattern in assignment.selectors:
        if key == "username" and not fnmatchcase(username, pattern):
            return False
        if key == "method" and not fnmatchcase("password", pattern):
            return False
        if key == "role" and not any(fnmatchcase(role, pattern) for role in roles):
            return False
        # client_id, cert_cn, tenant: chosen at CONNECT, so the assignment may apply
    return True


def _password_findings(config: Config, permissions: PermissionsConfig) -> list[str]:
    if not any("password" in lc.auth_methods for lc in config.listeners):
        return []
    stranded = []
    for entry in config.passwords.entries.values():
        reachable = [
            a for a in permissions.assignments if _may_match(a, entry.username, entry.roles)
        ]
        if reachable:
            if all(_nothing(permissions.assigned_list(a)) for a in reachable):
                stranded.append(entry.username)
        elif permissions.unassigned == "deny":
            stranded.append(entry.username)
    if not stranded:
        return []
    named = ", ".join(repr(u) for u in sorted(stranded)[:MAX_NAMED])
    more = f" and {len(stranded) - MAX_NAMED} more" if len(stranded) > MAX_NAMED else ""
    return [
        f"passwords: user(s) {named}{more} can log in but have no permissions (no "
        '[[permissions.assign]] can select them, unassigned = "deny", or their sets deny '
        "everything): every publish and subscribe is denied. Assign them a set by username "
        "or role, or remove them from the password file"
    ]


def lint_unpermitted_principals(config: Config) -> list[str]:
    """One finding per bridge principal (and tenant), and one for the password users, that
    default permissions deny everything."""
    permissions = config.permissions
    if permissions is None or not permissions.enabled:
        return []
    return _bridge_findings(config, permissions) + _password_findings(config, permissions)
