"""How MQTT actions meet the site ACL (AUTHZ.md §2 gate 5, its mapping table).

Messages:

| Zenoh message        | MQTT action                                                           |
|----------------------|-----------------------------------------------------------------------|
| ``delete``           | PUBLISH with RETAIN and an empty payload (clears a retained message)  |
| ``query``            | PUBLISH carrying a Response Topic (MQTT 5 request)                    |
| ``reply``            | PUBLISH carrying Correlation Data and no Response Topic (response)    |
| ``put``              | every other PUBLISH                                                   |
| ``declare_subscriber``| SUBSCRIBE                                                            |
| ``declare_queryable``| SUBSCRIBE with user property ``queryable`` = ``true``                 |

checked in that order (a retained empty request is a ``delete``). Flows: ``ingress`` for what a
client sends (PUBLISH, will, SUBSCRIBE), ``egress`` for each delivery towards a subscriber,
with the message of the PUBLISH being delivered. (Zenoh's egress ``declare_subscriber`` filters
subscriber declarations a router forwards; an MQTT broker never sends SUBSCRIBE to clients, so
it is never asked.)

Topics and filters become key expressions level by level (a level is a chunk):

- a filter's ``+`` becomes ``*`` and its ``#`` becomes ``**``. ``a/#`` -> ``a/**``, which in
  Zenoh also includes ``a`` itself, exactly like MQTT's ``a/#`` matches ``a`` (checked against
  the eclipse-zenoh oracle in the tests). ``$share/<group>/`` is stripped first: the group is
  not part of the filter (MQTT 5 §4.8.2).
- a level starting with ``@`` is a Zenoh *verbatim* chunk, which ``*``, ``**`` and ``$*``
  never match, whereas in MQTT ``@`` is an ordinary character. Mapped blindly, a client could
  slip past every wildcard deny (``cmd/**``) by publishing to ``cmd/@x``, while MQTT
  subscribers on ``cmd/#`` still receive it. So an ``@`` level is mapped only when the ACL's
  rules name that exact verbatim chunk somewhere (``sensors/@cal`` when a rule says ``@cal``);
  any other ``@`` level is refused like the cases below.
- a topic or filter that has no faithful key expression is REFUSED, never approximated: an
  empty level (``a//b``, a leading or trailing ``/``), or a level containing ``$`` (so every
  ``$SYS/...`` and other ``$`` topic), ``*``, ``#``, ``?`` or (in a topic name) ``+``. With the
  ACL enabled such a request is denied whatever ``default_permission`` says: an ACL that cannot
  read a name must not let it through (never fail open). Escaping was rejected because any
  escape is itself a legal MQTT level, so two different topics would share one key.
- the broker's topic separator (PATTERNS.md "The separator", ``/`` by default, ``.`` when
  configured) splits levels; key expressions are always ``/``-separated as Zenoh defines them,
  so with ``.`` the topic ``store.sell.status`` is the key ``store/sell/status`` and a level
  containing ``/`` is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..matching.errors import RuleError
from ..matching.keyexpr import KeyExpr
from ..matching.mqtt_topics import SHARE_PREFIX
from .acl import ALLOWED_DISABLED, AclDecision, SubjectAcl
from .acl_config import AclMessage, Flow
from .request import PublishedMessage, UserProperties, message_kind

_FORBIDDEN_IN_LEVEL = ("$", "*", "#", "?", "+", "/")


PUBLISH_MESSAGES: tuple[AclMessage, ...] = (
    AclMessage.PUT,
    AclMessage.DELETE,
    AclMessage.QUERY,
    AclMessage.REPLY,
)
"""The Zenoh messages a PUBLISH, will or delivery can be, in the order
:func:`~edge_broker.authz.request.message_kind` numbers them (the gate keeps one decision cache
per kind)."""


def mqtt_publish_message(publish: PublishedMessage) -> AclMessage:
    """The Zenoh message a PUBLISH is (AUTHZ.md §2 table)."""
    return PUBLISH_MESSAGES[message_kind(publish.retain, publish.payload, publish.properties)]


def mqtt_subscribe_message(properties: UserProperties) -> AclMessage:
    """``declare_queryable`` when SUBSCRIBE carries user property ``queryable=true``."""
    return subscribe_message(properties.user_properties)


def subscribe_message(user_properties: tuple[tuple[str, str], ...]) -> AclMessage:
    """:func:`mqtt_subscribe_message` from the SUBSCRIBE's user properties alone."""
    for name, value in user_properties:
        if name == "queryable" and value.strip().lower() == "true":
            return AclMessage.DECLARE_QUERYABLE
    return AclMessage.DECLARE_SUBSCRIBER


def _refuse(text: str, level: str, reason: str) -> RuleError:
    return RuleError(text, level, f"{reason}; the site ACL denies what it cannot represent")


def _map_level(
    text: str, level: str, *, is_filter: bool, last: bool, verbatims: frozenset[str]
) -> str:
    if level == "":
        raise _refuse(text, level, "empty levels have no key expression equivalent")
    if is_filter and level == "+":
        return "*"
    if is_filter and level == "#":
        if not last:
            raise _refuse(text, level, "'#' must be the last level of a filter")
        return "**"
    for ch in _FORBIDDEN_IN_LEVEL:
        if ch in level:
            raise _refuse(text, level, f"{ch!r} inside a level has no key expression equivalent")
    if level[0] == "@" and level not in verbatims:
        raise _refuse(
            text,
            level,
            f"{level!r} would be a Zenoh verbatim chunk that no ACL rule names (wildcards never "
            "match verbatim chunks, so it would slip past wildcard denies)",
        )
    return level


def topic_to_keyexpr(
    topic: str, separator: str = "/", verbatims: frozenset[str] = frozenset()
) -> KeyExpr:
    """The key (no wildcards) of an MQTT topic name; :class:`RuleError` when it has none."""
    if (
        separator == "/"
        and topic
        and topic[0] != "/"
        and topic[-1] != "/"
        and "//" not in topic
        and "$" not in topic
        and "*" not in topic
        and "#" not in topic
        and "?" not in topic
        and "+" not in topic
        and "@" not in topic
    ):
        return KeyExpr.parse(topic)  # the common case: every level is a plain literal
    levels = topic.split(separator)
    n = len(levels)
    mapped = [
        _map_level(topic, lv, is_filter=False, last=i == n - 1, verbatims=verbatims)
        for i, lv in enumerate(levels)
    ]
    return _parse(topic, "/".join(mapped))


def filter_to_keyexpr(
    topic_filter: str, separator: str = "/", verbatims: frozenset[str] = frozenset()
) -> KeyExpr:
    """The key expression of an MQTT topic filter (``a/+/b/#`` -> ``a/*/b/**``);
    :class:`RuleError` when it has none."""
    text = topic_filter
    share = SHARE_PREFIX + separator
    if text.startswith(share):
        group, sep, rest = text[len(share) :].partition(separator)
        if not group or not sep:
            raise _refuse(topic_filter, text, "a shared subscription needs $share/<group>/<filter>")
        text = rest
    levels = text.split(separator)
    n = len(levels)
    mapped = [
        _map_level(topic_filter, lv, is_filter=True, last=i == n - 1, verbatims=verbatims)
        for i, lv in enumerate(levels)
    ]
    return _parse(topic_filter, "/".join(mapped))


def _parse(original: str, expr: str) -> KeyExpr:
    try:
        return KeyExpr.parse(expr)
    except RuleError as exc:
        raise _refuse(original, exc.segment, exc.reason) from None


@dataclass(frozen=True, slots=True)
class AclRequest:
    """What an MQTT action asks of the ACL, mapped once: the Zenoh ``message`` and the ``key``
    expression, or ``refusal`` (why the topic has no key expression; then ``key`` is None).
    A broker maps each PUBLISH once and checks the same request for every subscriber."""

    message: AclMessage
    key: KeyExpr | None
    refusal: str | None = None


def publish_request(
    publish: PublishedMessage, separator: str = "/", verbatims: frozenset[str] = frozenset()
) -> AclRequest:
    """``verbatims``: the ACL's :attr:`~edge_broker.authz.acl.Acl.verbatims`."""
    message = mqtt_publish_message(publish)
    try:
        return AclRequest(message, topic_to_keyexpr(publish.topic, separator, verbatims))
    except RuleError as exc:
        return AclRequest(message, None, f"topic not representable as a key expression: {exc}")


def subscribe_request(
    topic_filter: str,
    properties: UserProperties | None = None,
    separator: str = "/",
    verbatims: frozenset[str] = frozenset(),
) -> AclRequest:
    message = subscribe_message(() if properties is None else properties.user_properties)
    try:
        return AclRequest(message, filter_to_keyexpr(topic_filter, separator, verbatims))
    except RuleError as exc:
        return AclRequest(message, None, f"filter not representable as a key expression: {exc}")


def check(acl: SubjectAcl, flow: Flow, request: AclRequest) -> AclDecision:
    """The ACL's verdict on a mapped request; an unrepresentable one is denied when the ACL is
    enabled, whatever ``default_permission`` says (never fail open)."""
    if not acl.enabled:
        return ALLOWED_DISABLED
    if request.key is None:
        return AclDecision(False, None, request.refusal)
    return acl.decide(flow, request.message, request.key)


def check_publish(
    acl: SubjectAcl, publish: PublishedMessage, flow: Flow = Flow.INGRESS, separator: str = "/"
) -> AclDecision:
    """Ingress: a client's PUBLISH (or its will). Egress: a delivery of ``publish`` to the
    subscriber whose :class:`SubjectAcl` is ``acl``."""
    if not acl.enabled:
        return ALLOWED_DISABLED
    return check(acl, flow, publish_request(publish, separator, acl.verbatims))


def check_delivery(acl: SubjectAcl, publish: PublishedMessage, separator: str = "/") -> AclDecision:
    """Egress check of one delivery to the receiving client's subject."""
    return check_publish(acl, publish, Flow.EGRESS, separator)


def check_subscribe(
    acl: SubjectAcl,
    topic_filter: str,
    properties: UserProperties | None = None,
    separator: str = "/",
) -> AclDecision:
    """Ingress check of one SUBSCRIBE filter (``declare_subscriber``/``declare_queryable``)."""
    if not acl.enabled:
        return ALLOWED_DISABLED
    return check(
        acl, Flow.INGRESS, subscribe_request(topic_filter, properties, separator, acl.verbatims)
    )
