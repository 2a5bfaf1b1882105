"""Tenant grants of a token (seed 000 "tenant_grants", AUTHZ.md §1–§2 gate 4).

The JSON shape is a list of grants, each ``{"tenant_ids": [...], "allow_channels_pub": [...],
"allow_channels_sub": [...]}``; one token may carry several grants for different tenant sets.
Every rule is parsed when the grants are loaded (token presentation or ``token create``), so an
invalid rule is refused with a message naming the grant, the rule and the problem, never at
match time. For each tenant the rules of every grant naming it are compiled into one
:class:`~edge_broker.matching.token_rule_sets.PubRuleSet` and one ``SubRuleSet``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from ..matching.errors import RuleError
from ..matching.names import DEFAULT_SEPARATOR, normalize_tenant, validate_channel
from ..matching.pattern_tokens import PatternToken
from ..matching.subscription_patterns import SubscriptionPattern
from ..matching.token_rule_sets import PubRuleSet, SubRuleSet
from ..matching.token_rules import PubRule, SubRule
from .errors import AuthzError

GRANT_KEYS: Final = ("tenant_ids", "allow_channels_pub", "allow_channels_sub")
MAX_GRANTS: Final = 256
MAX_RULES_PER_LIST: Final = 4096


class GrantError(AuthzError):
    """Invalid ``tenant_grants``: ``where`` locates the problem (``tenant_grants[1].
    allow_channels_pub[0]``), ``reason`` says what is wrong and what to change."""

    def __init__(self, where: str, reason: str) -> None:
        super().__init__(where, reason)
        self.where = where
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class TenantGrant:
    """One grant: the tenants it applies to and its parsed publish and subscribe rules."""

    tenant_ids: tuple[str, ...]
    pub_rules: tuple[PubRule, ...]
    sub_rules: tuple[SubRule, ...]

    def to_json(self) -> dict[str, list[str]]:
        return {
            "tenant_ids": list(self.tenant_ids),
            "allow_channels_pub": [r.text for r in self.pub_rules],
            "allow_channels_sub": [r.text for r in self.sub_rules],
        }


@dataclass(frozen=True, slots=True)
class CompiledTenantGrants:
    """The rules of every grant naming one tenant, compiled for O(depth) decisions."""

    pub: PubRuleSet
    sub: SubRuleSet
    grant_indexes: tuple[int, ...]

    def can_publish(self, channel: str) -> str | None:
        """The allowing publish rule's text, or ``None`` (allow-list: deny).

        Strict channel names apply under the token model (PATTERNS.md §1): an invalid
        channel raises :class:`RuleError` (a syntax error, not a denial).
        """
        return self.pub.allowed(validate_channel(channel, self.pub.separator))

    def can_subscribe(
        self, pattern: str | SubscriptionPattern | Sequence[PatternToken]
    ) -> str | None:
        """The accepting subscribe rule's text, or ``None`` (PATTERNS.md §3).

        An invalid pattern raises :class:`RuleError` (a syntax error, not a denial).
        """
        return self.sub.allowed(pattern)


@dataclass(frozen=True, slots=True)
class Grants:
    """All grants of one token, compiled per tenant at load time."""

    grants: tuple[TenantGrant, ...]
    separator: str = DEFAULT_SEPARATOR
    _by_tenant: Mapping[str, CompiledTenantGrants] = field(
        default_factory=lambda: MappingProxyType({}), repr=False, compare=False
    )

    @staticmethod
    def compile(grants: Sequence[TenantGrant], separator: str = DEFAULT_SEPARATOR) -> Grants:
        indexes: dict[str, list[int]] = {}
        for i, grant in enumerate(grants):
            for tenant in grant.tenant_ids:
                if i not in indexes.setdefault(tenant, []):
                    indexes[tenant].append(i)
        shared: dict[tuple[int, ...], CompiledTenantGrants] = {}
        by_tenant: dict[str, CompiledTenantGrants] = {}
        for tenant, found in indexes.items():
            key = tuple(found)
            if key not in shared:
                shared[key] = CompiledTenantGrants(
                    PubRuleSet([r for i in key for r in grants[i].pub_rules], separator),
                    SubRuleSet([r for i in key for r in grants[i].sub_rules], separator),
                    key,
                )
            by_tenant[tenant] = shared[key]
        return Grants(tuple(grants), separator, MappingProxyType(by_tenant))

    @staticmethod
    def parse(value: Any, separator: str = DEFAULT_SEPARATOR) -> Grants:
        """Parse the seed 000 JSON shape (already decoded); :class:`GrantError` if invalid."""
        return Grants.compile(parse_tenant_grants(value, separator), separator)

    @property
    def tenants(self) -> frozenset[str]:
        return frozenset(self._by_tenant)

    def for_tenant(self, tenant: str | None) -> CompiledTenantGrants | None:
        """The compiled rules for ``tenant`` (normalised, D14), or ``None`` if no grant names it."""
        return self._by_tenant.get(normalize_tenant(tenant))

    def to_json(self) -> list[dict[str, list[str]]]:
        return [g.to_json() for g in self.grants]


def parse_tenant_grants(value: Any, separator: str = DEFAULT_SEPARATOR) -> tuple[TenantGrant, ...]:
    """Validate every grant and rule of a decoded ``tenant_grants`` value."""
    if not isinstance(value, list):
        raise GrantError("tenant_grants", f"must be a list of grants, not {_json_type(value)}")
    if not value:
        raise GrantError("tenant_grants", "is empty; a token needs at least one grant")
    if len(value) > MAX_GRANTS:
        raise GrantError("tenant_grants", f"has {len(value)} grants; at most {MAX_GRANTS}")
    return tuple(_parse_grant(i, g, separator) for i, g in enumerate(value))


def _parse_grant(index: int, grant: Any, separator: str) -> TenantGrant:
    where = f"tenant_grants[{index}]"
    if not isinstance(grant, dict):
        raise GrantError(
            where, f"must be an object with keys {', '.join(GRANT_KEYS)}, not {_json_type(grant)}"
        )
    unknown = sorted(set(grant) - set(GRANT_KEYS))
    if unknown:
        raise GrantError(where, f"unknown key {unknown[0]!r}; the keys are {', '.join(GRANT_KEYS)}")
    if "tenant_ids" not in grant:
        raise GrantError(where, "missing 'tenant_ids' (the exact tenant names it applies to)")
    tenants = _strings(f"{where}.tenant_ids", grant["tenant_ids"])
    if not tenants:
        raise GrantError(f"{where}.tenant_ids", "is empty; name at least one tenant")
    tenant_ids: list[str] = []
    for i, tenant in enumerate(tenants):
        try:
            normal = normalize_tenant(tenant)
        except RuleError as exc:
            raise GrantError(f"{where}.tenant_ids[{i}]", str(exc)) from None
        if normal not in tenant_ids:
            tenant_ids.append(normal)
    pub = _rules(
        f"{where}.allow_channels_pub", grant.get("allow_channels_pub", []), PubRule.parse, separator
    )
    sub = _rules(
        f"{where}.allow_channels_sub", grant.get("allow_channels_sub", []), SubRule.parse, separator
    )
    return TenantGrant(tuple(tenant_ids), pub, sub)


def _rules(where: str, value: Any, parse: Any, separator: str) -> tuple[Any, ...]:
    texts = _strings(where, value)
    if len(texts) > MAX_RULES_PER_LIST:
        raise GrantError(where, f"has {len(texts)} rules; at most {MAX_RULES_PER_LIST}")
    rules = []
    for i, text in enumerate(texts):
        try:
            rules.append(parse(text, separator))
        except RuleError as exc:
            raise GrantError(f"{where}[{i}]", str(exc)) from None
    return tuple(rules)


def _strings(where: str, value: Any) -> list[str]:
    if not isinstance(value, list):
        raise GrantError(where, f"must be a list of strings, not {_json_type(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise GrantError(f"{where}[{i}]", f"must be a string, not {_json_type(item)}")
    return list(value)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
