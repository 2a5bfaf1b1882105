"""The ``access_control`` section of a Zenoh ``config.json5``, read and validated (seed 004
"Access Control Config", AUTHZ.md §2 gate 5).

Accepted as Zenoh 1.x writes it, from JSON5 text (:func:`load_acl_json5`, read by
:func:`~edge_broker.authz.json5_text.loads_json5`: fast, with the ``json5`` package's messages)
or from the same structure as a Python mapping (:func:`load_acl_config`, e.g. a TOML
table). Either the WHOLE section is valid and an immutable :class:`AclConfig` comes back, or
:class:`AclError` lists every problem found, each naming the entry (``rules[1] (id "r1")``) and
what to change. Nothing is ever half-loaded.

Shape (as Zenoh's serde model, unknown keys refused):

- ``enabled`` (bool, REQUIRED here: an access_control section that forgets it must not silently
  turn the ACL off), ``default_permission`` (``allow``/``deny``; absent -> ``deny``);
- ``rules``: ``id``, ``messages`` (non-empty; put, delete, declare_subscriber, query, reply,
  declare_queryable, and Zenoh's liveliness_token, declare_liveliness_subscriber,
  liveliness_query, which no MQTT action maps to: accepted, never consulted, reported by lint),
  ``flows`` (non-empty; absent -> both), ``permission``, ``key_exprs`` (non-empty, valid and
  canonical: PATTERNS.md §5);
- ``subjects``: ``id`` and optional non-empty lists ``interfaces``, ``cert_common_names``,
  ``usernames``. Zenoh's ``link_protocols`` and ``zids`` are refused (MQTT connections have
  neither a Zenoh link protocol nor a Zenoh id; ignoring them would widen the subject);
- ``policies``: optional ``id``, ``rules`` and ``subjects`` (lists of ids).

Like Zenoh, when ``enabled`` is true the three lists must be present (they may be empty), ids
must be unique within their list, and policies may only name declared rules and subjects; when
``enabled`` is false only the shape is checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum, StrEnum
from itertools import product
from typing import Any

from ..matching.errors import RuleError
from ..matching.keyexpr import KeyExpr
from .errors import AuthzError
from .json5_text import loads_json5


class AclError(AuthzError):
    """An invalid ``access_control`` section; ``problems`` lists every error found."""

    def __init__(self, problems: Sequence[str], source: str = "access_control") -> None:
        self.problems = tuple(problems)
        self.source = source
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source}: {len(self.problems)} problem(s):\n{lines}")


class Flow(StrEnum):
    INGRESS = "ingress"  # client -> broker
    EGRESS = "egress"  # broker -> client (deliveries)


class AclMessage(StrEnum):
    """The Zenoh message kinds a site-ACL rule names (AUTHZ.md §2): a kind of request, not the
    broker's message (``broker/message.py``)."""

    PUT = "put"
    DELETE = "delete"
    DECLARE_SUBSCRIBER = "declare_subscriber"
    QUERY = "query"
    REPLY = "reply"
    DECLARE_QUERYABLE = "declare_queryable"
    LIVELINESS_TOKEN = "liveliness_token"
    DECLARE_LIVELINESS_SUBSCRIBER = "declare_liveliness_subscriber"
    LIVELINESS_QUERY = "liveliness_query"


# Zenoh messages that no MQTT action maps to (AUTHZ.md §2 table).
UNMAPPED_MESSAGES = frozenset(
    {
        AclMessage.LIVELINESS_TOKEN,
        AclMessage.DECLARE_LIVELINESS_SUBSCRIBER,
        AclMessage.LIVELINESS_QUERY,
    }
)


class Permission(StrEnum):
    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True, slots=True)
class AclRule:
    id: str
    messages: tuple[AclMessage, ...]
    flows: tuple[Flow, ...]
    permission: Permission
    key_exprs: tuple[KeyExpr, ...]


@dataclass(frozen=True, slots=True)
class SubjectCombination:
    """One AND-combination of a subject (seed 004 "Subject combinations"); ``None`` = any."""

    interface: str | None = None
    cert_common_name: str | None = None
    username: str | None = None

    def matches(self, interface: str | None, cert_cn: str | None, username: str | None) -> bool:
        return (
            (self.interface is None or self.interface == interface)
            and (self.cert_common_name is None or self.cert_common_name == cert_cn)
            and (self.username is None or self.username == username)
        )

    def describe(self) -> str:
        parts = [
            f"{name}={value!r}"
            for name, value in (
                ("interface", self.interface),
                ("cert_common_name", self.cert_common_name),
                ("username", self.username),
            )
            if value is not None
        ]
        return " AND ".join(parts) if parts else "anyone"


@dataclass(frozen=True, slots=True)
class AclSubject:
    id: str
    interfaces: tuple[str, ...] | None = None
    cert_common_names: tuple[str, ...] | None = None
    usernames: tuple[str, ...] | None = None

    def combinations(self) -> tuple[SubjectCombination, ...]:
        """The cartesian product of the three lists; a missing list matches any value."""
        lists: list[Sequence[str | None]] = [
            self.interfaces or (None,),
            self.cert_common_names or (None,),
            self.usernames or (None,),
        ]
        return tuple(SubjectCombination(i, c, u) for i, c, u in product(*lists))


@dataclass(frozen=True, slots=True)
class AclPolicy:
    id: str | None
    rules: tuple[str, ...]
    subjects: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AclConfig:
    enabled: bool
    default_permission: Permission
    rules: tuple[AclRule, ...] = ()
    subjects: tuple[AclSubject, ...] = ()
    policies: tuple[AclPolicy, ...] = ()


_TOP_KEYS = ("enabled", "default_permission", "rules", "subjects", "policies")
_RULE_KEYS = ("id", "messages", "flows", "permission", "key_exprs")
_SUBJECT_KEYS = ("id", "interfaces", "cert_common_names", "usernames")
_SUBJECT_UNSUPPORTED = {
    "link_protocols": "MQTT connections have no Zenoh link protocol; use 'interfaces'",
    "zids": "MQTT clients have no Zenoh id; use 'usernames' or 'cert_common_names'",
}
_POLICY_KEYS = ("id", "rules", "subjects")


def _choices(enum: type[Enum]) -> str:
    return ", ".join(str(m.value) for m in enum)


class _Reader:
    """Collects problems instead of stopping at the first one."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def problem(self, where: str, text: str) -> None:
        self.problems.append(f"{where}: {text}")

    def check_keys(self, where: str, entry: Mapping[str, Any], allowed: Sequence[str]) -> None:
        for key in entry:
            if key in allowed:
                continue
            if where.startswith("subjects[") and key in _SUBJECT_UNSUPPORTED:
                self.problem(
                    where, f"'{key}' is not supported by edge-broker: {_SUBJECT_UNSUPPORTED[key]}"
                )
            else:
                self.problem(where, f"unknown key {key!r}: expected one of {', '.join(allowed)}")

    def string(self, where: str, value: Any, what: str) -> str | None:
        if not isinstance(value, str) or not value.strip():
            self.problem(where, f"{what} must be a non-empty string, got {value!r}")
            return None
        return value

    def string_list(
        self, where: str, entry: Mapping[str, Any], key: str, *, required: bool, empty_ok: bool
    ) -> tuple[str, ...] | None:
        if key not in entry:
            if required:
                self.problem(where, f"'{key}' is required")
            return None
        value = entry[key]
        if not isinstance(value, list):
            self.problem(where, f"'{key}' must be a list of strings, got {value!r}")
            return None
        if not value and not empty_ok:
            self.problem(where, f"'{key}' must not be empty (leave it out to mean 'any')")
            return None
        out: list[str] = []
        for i, item in enumerate(value):
            text = self.string(f"{where}.{key}[{i}]", item, "each item")
            if text is not None:
                out.append(text)
        return tuple(dict.fromkeys(out))

    def enum_list(
        self, where: str, entry: Mapping[str, Any], key: str, enum: type[Enum], required: bool
    ) -> tuple[Any, ...] | None:
        texts = self.string_list(where, entry, key, required=required, empty_ok=False)
        if texts is None:
            return None
        out = []
        for text in texts:
            try:
                out.append(enum(text))
            except ValueError:
                self.problem(where, f"{key}: {text!r} is not one of {_choices(enum)}")
        return tuple(out)


def _label(kind: str, index: int, entry: Mapping[str, Any]) -> str:
    ident = entry.get("id")
    if isinstance(ident, str) and ident.strip():
        return f"{kind}[{index}] (id {ident!r})"
    return f"{kind}[{index}]"


def _read_rule(r: _Reader, where: str, entry: Mapping[str, Any]) -> AclRule | None:
    before = len(r.problems)
    r.check_keys(where, entry, _RULE_KEYS)
    ident = r.string(where, entry.get("id"), "'id'")
    messages = r.enum_list(where, entry, "messages", AclMessage, required=True)
    flows = r.enum_list(where, entry, "flows", Flow, required=False)
    permission: Permission | None = None
    raw = entry.get("permission")
    if raw is None:
        r.problem(where, f"'permission' is required: one of {_choices(Permission)}")
    else:
        try:
            permission = Permission(raw)
        except ValueError:
            r.problem(where, f"permission {raw!r} is not one of {_choices(Permission)}")
    texts = r.string_list(where, entry, "key_exprs", required=True, empty_ok=False)
    exprs: list[KeyExpr] = []
    for text in texts or ():
        try:
            exprs.append(KeyExpr.parse(text))
        except RuleError as exc:
            r.problem(where, f"key_exprs: invalid key expression {exc}")
    if len(r.problems) > before or ident is None or messages is None or permission is None:
        return None
    return AclRule(
        ident,
        messages,
        flows if flows is not None else (Flow.EGRESS, Flow.INGRESS),
        permission,
        tuple(exprs),
    )


def _read_subject(r: _Reader, where: str, entry: Mapping[str, Any]) -> AclSubject | None:
    before = len(r.problems)
    r.check_keys(where, entry, _SUBJECT_KEYS)
    ident = r.string(where, entry.get("id"), "'id'")
    lists = [
        r.string_list(where, entry, key, required=False, empty_ok=False)
        for key in ("interfaces", "cert_common_names", "usernames")
    ]
    if len(r.problems) > before or ident is None:
        return None
    return AclSubject(ident, lists[0], lists[1], lists[2])


def _read_policy(r: _Reader, where: str, entry: Mapping[str, Any]) -> AclPolicy | None:
    before = len(r.problems)
    r.check_keys(where, entry, _POLICY_KEYS)
    ident = None
    if "id" in entry:
        ident = r.string(where, entry["id"], "'id'")
    rules = r.string_list(where, entry, "rules", required=True, empty_ok=True)
    subjects = r.string_list(where, entry, "subjects", required=True, empty_ok=True)
    if len(r.problems) > before or rules is None or subjects is None:
        return None
    return AclPolicy(ident, rules, subjects)


def _read_list(r: _Reader, data: Mapping[str, Any], key: str) -> list[tuple[str, Any]] | None:
    if key not in data:
        return None
    value = data[key]
    if not isinstance(value, list):
        r.problem(key, f"must be a list, got {value!r}")
        return None
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, Mapping):
            r.problem(f"{key}[{i}]", f"must be an object, got {entry!r}")
            continue
        out.append((_label(key, i, entry), entry))
    return out


def _unique(r: _Reader, kind: str, noun: str, ids: Sequence[Any]) -> None:
    seen: set[str] = set()
    for ident in ids:
        if not isinstance(ident, str):
            continue
        if ident in seen:
            r.problem(kind, f"{noun} id must be unique: {ident!r} is repeated")
        seen.add(ident)


def load_acl_config(data: Any, source: str = "access_control") -> AclConfig:
    """Validate an ``access_control`` mapping; raise :class:`AclError` listing every problem."""
    r = _Reader()
    if not isinstance(data, Mapping):
        raise AclError([f"must be an object, got {type(data).__name__}"], source)
    r.check_keys("access_control", data, _TOP_KEYS)
    enabled = data.get("enabled")
    if not isinstance(enabled, bool):
        r.problem("enabled", f"is required and must be true or false, got {enabled!r}")
    default = Permission.DENY
    if data.get("default_permission") is not None:
        try:
            default = Permission(data["default_permission"])
        except ValueError:
            r.problem(
                "default_permission",
                f"{data['default_permission']!r} is not one of {_choices(Permission)}",
            )
    raw_rules = _read_list(r, data, "rules")
    raw_subjects = _read_list(r, data, "subjects")
    raw_policies = _read_list(r, data, "policies")
    rules = [_read_rule(r, w, e) for w, e in raw_rules or ()]
    subjects = [_read_subject(r, w, e) for w, e in raw_subjects or ()]
    policies = [_read_policy(r, w, e) for w, e in raw_policies or ()]
    if enabled is True:
        missing = [k for k in ("rules", "subjects", "policies") if k not in data]
        if missing:
            r.problem(
                "access_control",
                f"config lists must be provided when enabled: add {', '.join(missing)}"
                " (empty lists are fine)",
            )
        _unique(r, "rules", "Rule", [e.get("id") for _, e in raw_rules or ()])
        _unique(r, "subjects", "Subject", [e.get("id") for _, e in raw_subjects or ()])
        _unique(r, "policies", "Policy", [e.get("id") for _, e in raw_policies or ()])
        rule_ids = {e.get("id") for _, e in raw_rules or ()}
        subject_ids = {e.get("id") for _, e in raw_subjects or ()}
        for (where, _), policy in zip(raw_policies or (), policies, strict=True):
            if policy is None:
                continue
            for ident in policy.rules:
                if ident not in rule_ids:
                    r.problem(where, f"rule {ident!r} does not exist in rules list")
            for ident in policy.subjects:
                if ident not in subject_ids:
                    r.problem(where, f"subject {ident!r} does not exist in subjects list")
    if r.problems:
        raise AclError(r.problems, source)
    assert isinstance(enabled, bool)
    return AclConfig(
        enabled,
        default,
        tuple(x for x in rules if x is not None),
        tuple(x for x in subjects if x is not None),
        tuple(x for x in policies if x is not None),
    )


def load_acl_json5(text: str, source: str = "config.json5") -> AclConfig:
    """Read JSON5 text: either a whole Zenoh config with an ``access_control`` key, or the
    section itself (an object with ``enabled``)."""
    try:
        data = loads_json5(text)
    except ValueError as exc:
        raise AclError([f"not valid JSON5: {exc}"], source) from None
    if isinstance(data, Mapping) and "access_control" in data:
        data = data["access_control"]
        source = f"{source}: access_control"
    return load_acl_config(data, source)
