"""Row checks for the compile job, done with the broker's own parsers (never reimplemented).

Every function takes one input row's fields and returns ``None`` (valid) or the reason it is
invalid, in the broker's own words. They are plain Python so that the Spark job can call them
inside pandas UDFs (``edge_broker.pipeline.compile``) and the tests can call them directly.

Parsers used: permissions ``authz.permissions_config.parse_permissions_config`` (seed 003),
site ACL ``authz.acl_config.load_acl_config`` (seed 004, key expressions by ``matching.keyexpr``),
token grants ``matching.token_rules.PubRule/SubRule`` (seed 001), tenants
``matching.names.normalize_tenant``, SMOKER IDs ``claims.smoker_id.check_smoker_id``.
"""

from __future__ import annotations

from typing import Any

GLOB_CHARACTERS = frozenset("*?[]")
LIST_SEPARATOR = " "


def split_list(value: str | None) -> list[str]:
    """List-valued columns (``sets``, ``flows``, ``key_exprs``...) are whitespace-separated
    strings so that CSV, JSON and Parquet inputs all carry them the same way."""
    return [] if value is None else value.split()


# the columns of a permissions row that are fields of its rule (beside ``set`` and ``seq``)
RULE_COLUMNS = (
    "id",
    "topic",
    "activity",
    "type",
    "qos",
    "retain",
    "shared_subscription",
    "shared_group",
)


def permission_rule(row: dict[str, Any]) -> dict[str, Any]:
    """The ``[permissions.sets.X] rules`` entry of a permissions row (absent columns left out)."""
    rule: dict[str, Any] = {}
    for key in RULE_COLUMNS:
        value = row.get(key)
        if value is not None:
            rule[key] = value
    return rule


def check_permission(row: dict[str, Any], separator: str = "/") -> str | None:
    """A permissions row, parsed as a one-rule set by the broker's ``[permissions]`` loader."""
    from ..authz.permissions import PermissionConfigError
    from ..authz.permissions_config import parse_permissions_config

    name = row.get("set")
    if not name:
        return "set: missing; name the permission set this rule belongs to"
    try:
        parse_permissions_config({"sets": {name: {"rules": [permission_rule(row)]}}}, separator)
    except PermissionConfigError as exc:
        return str(exc)
    return None


def acl_rule(row: dict[str, Any]) -> dict[str, Any]:
    """The Zenoh ``access_control.rules`` entry of an ACL row."""
    return {
        "id": row.get("id"),
        "permission": row.get("permission"),
        "flows": split_list(row.get("flows")) or ["ingress", "egress"],
        "messages": split_list(row.get("messages")),
        "key_exprs": split_list(row.get("key_exprs")),
    }


def acl_subject(row: dict[str, Any]) -> dict[str, Any]:
    """The subject an ACL row applies to: its ``interfaces``, ``cert_common_names`` and
    ``usernames`` columns (a row with none of them is refused by the loader, as in Zenoh)."""
    subject: dict[str, Any] = {"id": row.get("id")}
    for key in ("interfaces", "cert_common_names", "usernames"):
        values = split_list(row.get(key))
        if values:
            subject[key] = values
    return subject


def check_acl(row: dict[str, Any]) -> str | None:
    """An ACL row, loaded as a one-rule ``access_control`` section by the broker's loader."""
    from ..authz.acl_config import AclError, load_acl_config

    rule_id = row.get("id")
    if not rule_id:
        return "id: missing; give every ACL rule an id"
    section = {
        "enabled": True,
        "default_permission": "deny",
        "rules": [acl_rule(row)],
        "subjects": [acl_subject(row)],
        "policies": [{"rules": [rule_id], "subjects": [rule_id]}],
    }
    try:
        load_acl_config(section, "access_control")
    except AclError as exc:
        return str(exc)
    return None


def check_grant(row: dict[str, Any], separator: str = "/") -> str | None:
    """A token grant row: ``tenant``, ``direction`` (pub or sub) and the rule (PATTERNS.md §3)."""
    from ..matching.errors import RuleError
    from ..matching.names import normalize_tenant
    from ..matching.token_rules import PubRule, SubRule

    try:
        normalize_tenant(row.get("tenant"))
    except (RuleError, ValueError) as exc:
        return f"tenant: {exc}"
    direction = row.get("direction")
    text = row.get("rule")
    if direction not in ("pub", "sub"):
        return f"direction: write pub or sub, not {direction!r}"
    if not isinstance(text, str):
        return "rule: missing"
    try:
        (PubRule if direction == "pub" else SubRule).parse(text, separator)
    except RuleError as exc:
        return str(exc)
    return None


def check_device(row: dict[str, Any]) -> str | None:
    """A device: a client id that is not a glob (assignments match it literally), a valid tenant,
    a canonical SMOKER ID when it has one, and at least one permission set."""
    from ..claims.errors import ClaimError
    from ..matching.errors import RuleError
    from ..matching.names import normalize_tenant

    client_id = row.get("client_id")
    if not client_id:
        return "client_id: missing"
    bad = sorted(GLOB_CHARACTERS & set(client_id))
    if bad:
        return (
            f"client_id: {client_id!r} contains {''.join(bad)!r}, "
            "which [[permissions.assign]] reads as a glob"
        )
    username = row.get("username")
    if username is not None and GLOB_CHARACTERS & set(username):
        return f"username: {username!r} contains glob characters"
    try:
        normalize_tenant(row.get("tenant"))
    except (RuleError, ValueError) as exc:
        return f"tenant: {exc}"
    smoker = row.get("smoker_id")
    if smoker is not None:
        try:
            from ..claims.smoker_id import check_smoker_id

            check_smoker_id(smoker)
        except ClaimError as exc:
            return f"smoker_id: {exc}"
    if not split_list(row.get("sets")):
        return "sets: name one or more permission sets (whitespace-separated)"
    return None
