"""``edge-broker lint``: where ``${clientid}`` names an identifier nobody verified (issue 15).

The client chooses its Client Identifier. ``${clientid}`` in a permission therefore binds
something only when the method that accepted the client proves the identifier:

- ``smoker``: always (the signature over the broker's nonce is made with the key the id names);
- ``token``: when ``[tokens] require_client_id_binding = true`` (the token's ``client_id``
  claim must equal it); a token without the claim binds nothing;
- ``password``: for entries that list ``clientids`` (globs) in the password file;
- ``anonymous`` and ``certificate``: never.

For every assignment whose sets use ``${clientid}`` this reports each method that can reach it
(the listeners' ``auth_methods``, narrowed by the assignment's ``method`` selector and by the
selectors the method's clients never match, ``NEVER_SET``) and does not bind ids, and for
``password`` the entries (narrowed by ``username``/``role`` selectors) without ``clientids``.
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Protocol

from .settings import AuthSections

if TYPE_CHECKING:
    from ..authz.permissions_config import Assignment, PermissionsConfig
    from .settings import ListenerAuth

PLACEHOLDER = "${clientid}"
NEVER_BINDS = {
    "anonymous": "anonymous clients prove nothing",
    "certificate": "a certificate proves its CN, not the client id",
}
MAX_NAMED = 5  # entries named in one finding; the rest are counted
# The selectors an identity accepted by a method never has a value for, so an assignment
# selecting on one of them never reaches that method's clients: only ``password`` entries give
# roles, and an anonymous client has no username (the one it sent was not verified).
NEVER_SET = {
    "anonymous": frozenset({"username", "role"}),
    "certificate": frozenset({"role"}),
    "token": frozenset({"role"}),
    "smoker": frozenset({"role"}),
}


class LintedConfig(AuthSections, Protocol):
    """What the lint reads of the assembled configuration (``config.Config`` is one)."""

    @property
    def permissions(self) -> PermissionsConfig | None: ...
    @property
    def listeners(self) -> Sequence[ListenerAuth]: ...


def _uses_client_id(permissions: PermissionsConfig, assignment: Assignment) -> list[str]:
    """Ids of the rules of the assignment's sets whose topic contains ``${clientid}``."""
    return [
        p.id
        for name in assignment.sets
        for p in permissions.sets[name].permissions
        if PLACEHOLDER in p.topic
    ]


def _selector(assignment: Assignment, key: str) -> str | None:
    return next((pattern for k, pattern in assignment.selectors if k == key), None)


def lint_client_id_binding(config: LintedConfig) -> list[str]:
    """One finding per (assignment, method) where ``${clientid}`` is not a verified id."""
    permissions = config.permissions
    if permissions is None:
        return []
    methods = sorted({m for lc in config.listeners for m in lc.auth_methods})
    findings: list[str] = []
    for assignment in permissions.assignments:
        rules = _uses_client_id(permissions, assignment)
        if not rules:
            continue
        wanted = _selector(assignment, "method")
        selected = {key for key, _ in assignment.selectors}
        reaching = [
            m
            for m in methods
            if (wanted is None or fnmatchcase(m, wanted))
            and not selected & NEVER_SET.get(m, frozenset())
        ]
        where = f"{assignment.label} (rules {', '.join(rules)})"
        for method in reaching:
            problem = _unbound(config, assignment, method)
            if problem is not None:
                findings.append(
                    f"{where}: {PLACEHOLDER} is chosen by the client for method {method!r}: "
                    f"{problem}"
                )
    return findings


def _unbound(config: LintedConfig, assignment: Assignment, method: str) -> str | None:
    """Why ``method`` does not bind the client id for ``assignment``, or None when it does."""
    if method in NEVER_BINDS:
        return (
            f"{NEVER_BINDS[method]}; select another method for these sets "
            f"(method = ...) or drop {PLACEHOLDER}"
        )
    if method == "token":
        if config.tokens.require_client_id_binding:
            return None
        return (
            "tokens without a 'client_id' claim are accepted; set [tokens] "
            "require_client_id_binding = true"
        )
    if method == "password":
        return _unbound_passwords(config, assignment)
    return None  # smoker: the id is the proven key


def _unbound_passwords(config: LintedConfig, assignment: Assignment) -> str | None:
    if config.passwords.file is None:
        return None
    entries = config.passwords.entries  # as load_config read and validated it
    user = _selector(assignment, "username")
    role = _selector(assignment, "role")
    loose = sorted(
        e.username
        for e in entries.values()
        if not e.clientids
        and (user is None or fnmatchcase(e.username, user))
        and (role is None or any(fnmatchcase(r, role) for r in e.roles))
    )
    if not loose:
        return None
    named = ", ".join(loose[:MAX_NAMED]) + (
        f" and {len(loose) - MAX_NAMED} more" if len(loose) > MAX_NAMED else ""
    )
    return (
        f"password entries without clientids: {named}; give them the ids they may use "
        "(edge-broker passwd add FILE USER --clientids 'sensor-*')"
    )
