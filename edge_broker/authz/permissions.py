"""Default permissions (seed 003 ``TopicPermission``) and their compiled, first-match form.

A :class:`TopicPermission` has a topic filter, a QoS set, an activity, a retain condition, a
shared-subscription condition, a shared group and a type (ALLOW/DENY), with the seed's defaults
(QoS ALL, activity ALL, retain ALL, shared ALL, group ``#``, type ALLOW). A client's list is
evaluated in order and the first permission that matches decides; when none matches, the
*default behaviour* decides: ALLOW when the list is empty, DENY otherwise, unless configured.

Publishing (and a will) matches a concrete topic. Subscribing uses true containment
(PATTERNS.md §4, AUTHZ.md §2 gate 4): the first permission whose filter *contains* the
subscription filter decides; earlier permissions of the other type that merely *overlap* it
mark the subscription for a per-delivery check on the concrete topic, so that a wildcard never
leaks what an exact subscription could not get.

Placeholders ``${clientid}``, ``${username}`` and ``${tenant}`` are substituted per client
(:meth:`PermissionList.bind`). A value that contains ``+``, ``#``, the separator or U+0000
would change the filter's shape, so binding such a client is refused with
:class:`PermissionBindError` (the broker answers CONNACK 0x87): a placeholder can narrow a
permission to one client, never widen it.

Lookups are compiled with :class:`~edge_broker.matching.rule_index.FirstMatchIndex` (one per
list, built when the list is made), so a decision costs O(topic depth) however many permissions
there are; attributes are checked on the first matching rule, and only when they do not apply
are further matches walked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, StrEnum

from ..matching.errors import RuleError
from ..matching.mqtt_topics import filter_contains, filters_overlap, validate_topic_filter
from ..matching.rule_index import FirstMatchIndex
from .errors import AuthzError


class PermissionConfigError(AuthzError):
    """A permission definition that cannot be used; the message names the rule and the field.

    ``problems``: every problem found (the message is the first), so that ``edge-broker check``
    reports them all (issue 20)."""

    def __init__(self, message: str, problems: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.problems: tuple[str, ...] = tuple(problems) or (message,)


class PermissionBindError(AuthzError):
    """A client whose identity cannot fill a placeholder without widening a filter."""


class Activity(StrEnum):
    PUBLISH = "PUBLISH"
    SUBSCRIBE = "SUBSCRIBE"
    ALL = "ALL"


class Retain(StrEnum):
    RETAINED = "RETAINED"
    NOT_RETAINED = "NOT_RETAINED"
    ALL = "ALL"


class SharedSubscription(StrEnum):
    SHARED = "SHARED"
    NOT_SHARED = "NOT_SHARED"
    ALL = "ALL"


class PermissionType(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


QOS_SETS: Mapping[str, frozenset[int]] = {
    "ZERO": frozenset({0}),
    "ONE": frozenset({1}),
    "TWO": frozenset({2}),
    "ZERO_ONE": frozenset({0, 1}),
    "ZERO_TWO": frozenset({0, 2}),
    "ONE_TWO": frozenset({1, 2}),
    "ALL": frozenset({0, 1, 2}),
}

PLACEHOLDERS = ("${clientid}", "${username}", "${tenant}")
_PLACEHOLDER_RE = re.compile(r"\$\{[^}]*\}")


@dataclass(frozen=True, slots=True)
class TopicPermission:
    """One seed-003 TopicPermission, with an ``id`` for explain, audit and counters."""

    topic: str
    id: str
    qos: str = "ALL"
    activity: Activity = Activity.ALL
    retain: Retain = Retain.ALL
    shared_subscription: SharedSubscription = SharedSubscription.ALL
    shared_group: str = "#"
    type: PermissionType = PermissionType.ALLOW

    @property
    def allow(self) -> bool:
        return self.type is PermissionType.ALLOW

    @property
    def qos_set(self) -> frozenset[int]:
        return QOS_SETS[self.qos]

    @property
    def has_placeholders(self) -> bool:
        return "${" in self.topic

    def applies_to_publish(self, qos: int, retain: bool) -> bool:
        return (
            self.activity is not Activity.SUBSCRIBE
            and qos in self.qos_set
            and (self.retain is Retain.ALL or (self.retain is Retain.RETAINED) == retain)
        )

    def applies_to_subscribe(self, qos: int, share_group: str | None) -> bool:
        if self.activity is Activity.PUBLISH or qos not in self.qos_set:
            return False
        if share_group is None:
            return self.shared_subscription is not SharedSubscription.SHARED
        if self.shared_subscription is SharedSubscription.NOT_SHARED:
            return False
        return self.shared_group in ("#", share_group)


def make_permission(
    fields: Mapping[str, object], rule_id: str, separator: str = "/"
) -> TopicPermission:
    """Build and validate a permission from config values; errors name ``rule_id`` and the field."""

    def enum_field(name: str, enum: type[Enum], default: Enum) -> Enum:
        value = fields.get(name, default.value)
        if not isinstance(value, str):
            raise PermissionConfigError(f"permission {rule_id!r}: {name} must be a string")
        try:
            return enum(value.upper())
        except ValueError:
            choices = ", ".join(member.value for member in enum)
            raise PermissionConfigError(
                f"permission {rule_id!r}: {name} {value!r} is not one of {choices}"
            ) from None

    known = {
        "topic",
        "id",
        "qos",
        "activity",
        "retain",
        "shared_subscription",
        "shared_group",
        "type",
    }
    unknown = sorted(set(fields) - known)
    if unknown:
        raise PermissionConfigError(
            f"permission {rule_id!r}: unknown field(s) {', '.join(unknown)}; allowed: "
            f"{', '.join(sorted(known))}"
        )
    topic = fields.get("topic")
    if not isinstance(topic, str) or not topic:
        raise PermissionConfigError(
            f"permission {rule_id!r}: topic must be a non-empty MQTT topic filter"
        )
    for match in _PLACEHOLDER_RE.findall(topic):
        if match not in PLACEHOLDERS:
            raise PermissionConfigError(
                f"permission {rule_id!r}: unknown placeholder {match}; use one of "
                f"{', '.join(PLACEHOLDERS)}"
            )
    probe = topic
    for placeholder in PLACEHOLDERS:
        probe = probe.replace(placeholder, "x")
    try:
        validate_topic_filter(probe, separator)
    except RuleError as exc:
        raise PermissionConfigError(
            f"permission {rule_id!r}: topic {topic!r}: {exc.reason}"
        ) from None
    qos = fields.get("qos", "ALL")
    if not isinstance(qos, str) or qos.upper() not in QOS_SETS:
        raise PermissionConfigError(
            f"permission {rule_id!r}: qos {qos!r} is not one of {', '.join(QOS_SETS)}"
        )
    group = fields.get("shared_group", "#")
    if not isinstance(group, str) or not group or (group != "#" and any(c in group for c in "+#/")):
        raise PermissionConfigError(
            f"permission {rule_id!r}: shared_group {group!r} must be a shared subscription group "
            "name or '#'"
        )
    return TopicPermission(
        topic=topic,
        id=str(fields.get("id", rule_id)),
        qos=qos.upper(),
        activity=enum_field("activity", Activity, Activity.ALL),  # type: ignore[arg-type]
        retain=enum_field("retain", Retain, Retain.ALL),  # type: ignore[arg-type]
        shared_subscription=enum_field(
            "shared_subscription", SharedSubscription, SharedSubscription.ALL
        ),  # type: ignore[arg-type]
        shared_group=group,
        type=enum_field("type", PermissionType, PermissionType.ALLOW),  # type: ignore[arg-type]
    )


@dataclass(frozen=True, slots=True)
class PermissionVerdict:
    """The answer of a permission list: allowed, the deciding permission (None: default
    behaviour), and for SUBSCRIBE whether deliveries must be re-checked per topic."""

    allowed: bool
    permission: TopicPermission | None
    recheck: bool = False


def _bind_value(name: str, value: str | None, separator: str) -> str:
    if value is None or value == "":
        raise PermissionBindError(f"the permissions use ${{{name}}} but the client has no {name}")
    for bad in ("+", "#", separator, "\x00"):
        if bad in value:
            raise PermissionBindError(
                f"{name} {value!r} contains {bad!r}, which would change the shape of a "
                f"permission's topic filter through ${{{name}}}; use a {name} without '+', '#' or "
                f"{separator!r}"
            )
    return value


@dataclass(slots=True)
class PermissionList:
    """An ordered list of permissions with its default behaviour, compiled for first-match.

    One :class:`FirstMatchIndex` over every permission's filter answers "the first rule whose
    filter matches (contains)"; that rule's other attributes (activity, QoS, retain, shared)
    are then checked, and only when they do not apply are the further matching rules walked in
    order. The index is built once, when the list is made (config load, or binding a client's
    placeholders), never on the hot path."""

    permissions: tuple[TopicPermission, ...]
    default_allow: bool | None = None  # None: ALLOW when empty, DENY otherwise (seed 003)
    separator: str = "/"
    index: FirstMatchIndex | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.index is None and self.permissions and not self.has_placeholders:
            self.index = FirstMatchIndex([p.topic for p in self.permissions], self.separator)

    @property
    def default_allows(self) -> bool:
        if self.default_allow is not None:
            return self.default_allow
        return not self.permissions

    @property
    def has_placeholders(self) -> bool:
        return any(p.has_placeholders for p in self.permissions)

    def bind(self, client_id: str, username: str | None, tenant: str) -> PermissionList:
        """The list with placeholders substituted for one client (itself when it has none)."""
        if not self.has_placeholders:
            return self
        values = {"${clientid}": client_id, "${username}": username, "${tenant}": tenant}
        bound = []
        for perm in self.permissions:
            topic = perm.topic
            for placeholder, value in values.items():
                if placeholder in topic:
                    topic = topic.replace(
                        placeholder, _bind_value(placeholder[2:-1], value, self.separator)
                    )
            bound.append(perm if topic == perm.topic else _replace_topic(perm, topic))
        return PermissionList(tuple(bound), self.default_allow, self.separator)

    # -- lookups --------------------------------------------------------------------------

    def _index(self) -> FirstMatchIndex:
        if self.index is None:  # a list with placeholders, used without binding (lint, tests)
            self.index = FirstMatchIndex([p.topic for p in self.permissions], self.separator)
        return self.index

    def _verdict(self, position: int | None) -> PermissionVerdict:
        if position is None:
            return PermissionVerdict(self.default_allows, None)
        perm = self.permissions[position]
        return PermissionVerdict(perm.allow, perm)

    def check_publish(self, topic: str, qos: int, retain: bool) -> PermissionVerdict:
        """First permission matching a PUBLISH (or will) to the concrete ``topic``."""
        if not self.permissions:
            return PermissionVerdict(self.default_allows, None)
        index = self._index()
        first = index.first_match(topic)
        if first is not None and not self.permissions[first].applies_to_publish(qos, retain):
            first = next(
                (
                    i
                    for i in index.matches(topic)
                    if self.permissions[i].applies_to_publish(qos, retain)
                ),
                None,
            )
        return self._verdict(first)

    def _first_for_subscribe(
        self, found: int | None, more: list[int] | None, qos: int, share_group: str | None
    ) -> int | None:
        if found is None or self.permissions[found].applies_to_subscribe(qos, share_group):
            return found
        assert more is not None
        return next(
            (i for i in more if self.permissions[i].applies_to_subscribe(qos, share_group)), None
        )

    def check_subscribe(
        self, topic_filter: str, qos: int, share_group: str | None = None
    ) -> PermissionVerdict:
        """True containment with the overlap rule of AUTHZ.md §2 gate 4 (module docstring)."""
        if not self.permissions:
            return PermissionVerdict(self.default_allows, None)
        index = self._index()
        found = index.first_containing(topic_filter)
        if found is not None and not self.permissions[found].applies_to_subscribe(qos, share_group):
            found = self._first_for_subscribe(
                found, index.containing(topic_filter), qos, share_group
            )
        verdict = self._verdict(found)
        if not verdict.allowed:
            return verdict
        # Earlier permissions that overlap without containing: if one of them denies (for this
        # QoS and group), a delivery through this subscription may hit it: check per topic.
        for position in index.overlapping(topic_filter, before=found):
            perm = self.permissions[position]
            if not perm.allow and perm.applies_to_subscribe(qos, share_group):
                return PermissionVerdict(True, verdict.permission, recheck=True)
        return verdict

    def check_delivery(
        self, topic: str, qos: int, share_group: str | None = None
    ) -> PermissionVerdict:
        """A message on ``topic`` delivered through a subscription marked for recheck: decided as
        if the client had subscribed to exactly ``topic`` (no wildcard can leak more)."""
        if not self.permissions:
            return PermissionVerdict(self.default_allows, None)
        index = self._index()
        found = index.first_match(topic)
        if found is not None and not self.permissions[found].applies_to_subscribe(qos, share_group):
            found = next(
                (
                    i
                    for i in index.matches(topic)
                    if self.permissions[i].applies_to_subscribe(qos, share_group)
                ),
                None,
            )
        return self._verdict(found)


def _replace_topic(perm: TopicPermission, topic: str) -> TopicPermission:
    return TopicPermission(
        topic,
        perm.id,
        perm.qos,
        perm.activity,
        perm.retain,
        perm.shared_subscription,
        perm.shared_group,
        perm.type,
    )


def shadowed_permissions(plist: PermissionList) -> list[tuple[TopicPermission, TopicPermission]]:
    """(shadowed, by) pairs: a permission an earlier one makes unreachable for every request it
    could match (the earlier filter contains it and covers all its attribute values)."""
    found = []
    perms = plist.permissions
    for i, later in enumerate(perms):
        for earlier in perms[:i]:
            if not filter_contains(earlier.topic, later.topic, plist.separator):
                continue
            if not later.qos_set <= earlier.qos_set:
                continue
            if earlier.activity is not Activity.ALL and earlier.activity is not later.activity:
                continue
            if earlier.retain is not Retain.ALL and earlier.retain is not later.retain:
                continue
            if (
                earlier.shared_subscription is not SharedSubscription.ALL
                and earlier.shared_subscription is not later.shared_subscription
            ):
                continue
            if earlier.shared_group != "#" and earlier.shared_group != later.shared_group:
                continue
            found.append((later, earlier))
            break
    return found


def overlapping_pairs(plist: PermissionList) -> list[tuple[TopicPermission, TopicPermission]]:
    """(earlier, later) pairs of opposite type whose filters overlap: the places a wildcard
    subscription needs per-delivery checks."""
    perms = plist.permissions
    return [
        (a, b)
        for i, a in enumerate(perms)
        for b in perms[i + 1 :]
        if a.allow != b.allow and filters_overlap(a.topic, b.topic, plist.separator)
    ]


def parse_permission_list(
    rules: Sequence[Mapping[str, object]], set_name: str, default: str | None, separator: str = "/"
) -> PermissionList:
    """A named set from config: ``rules`` in order, ``default`` "allow" | "deny" | None."""
    perms = []
    seen: set[str] = set()
    problems: list[str] = []  # every rule's problem, not only the first
    for position, fields in enumerate(rules):
        if not isinstance(fields, Mapping):
            problems.append(f"permission set {set_name!r} rule {position}: must be a table")
            continue
        rule_id = str(fields.get("id", f"{set_name}[{position}]"))
        if rule_id in seen:
            problems.append(f"permission set {set_name!r}: rule id {rule_id!r} appears twice")
        seen.add(rule_id)
        try:
            perms.append(make_permission(fields, rule_id, separator))
        except PermissionConfigError as exc:
            problems.extend(exc.problems)
    if default not in (None, "allow", "deny"):
        problems.append(f'permission set {set_name!r}: default_behaviour must be "allow" or "deny"')
    if problems:
        raise PermissionConfigError(problems[0], problems)
    return PermissionList(tuple(perms), None if default is None else default == "allow", separator)
