"""Runtime subscription patterns in the broker (PATTERNS.md §2, seed 001; issue 5).

A listener with ``subscription_patterns = "seed001"`` accepts, besides MQTT topic filters, the
patterns of seed 001: ``*`` (one token), ``p*`` (one token starting with ``p``), and as the last
token ``>`` (one or more), ``p#`` and ``p>``. On such a listener ``*`` and ``>`` are wildcards,
not the literal characters they are in MQTT.

A filter whose tokens are all literals, ``+`` and a final ``#`` means the same thing in both
languages (``+`` is the alias of ``*`` with ``/``; ``#`` is zero or more in both) and stays in the
MQTT subscription trie. A filter that uses a seed-001-only wildcard is compiled once into a
:class:`~edge_broker.matching.subscription_patterns.SubscriptionPattern` and routed through the
topic space's second index, a :class:`~edge_broker.matching.pattern_trie.PatternTrie`, exactly
per §2. The connection's identity says whether its listener allows patterns
(``Identity.subscription_patterns``), so that gate 1 of the policy judges the filter by the
right grammar.

Gates that only understand MQTT filters judge a pattern by its MQTT cover
(``broker/policy.py`` ``covering_mqtt_filter``: a superset, so containment can deny a pattern
that would be allowed, never allow one that would leak).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..matching.mqtt_topics import SHARE_PREFIX, SharedFilter, parse_shared
from ..matching.subscription_patterns import SubscriptionPattern, is_runtime_pattern, parse_pattern

if TYPE_CHECKING:
    from ..config import ListenerConfig
    from ..identity import Identity

SEED001 = "seed001"


def runtime_pattern(topic_filter: str, separator: str) -> SubscriptionPattern | None:
    """The compiled pattern when ``topic_filter`` (without ``$share/<group>/``) uses a wildcard
    that MQTT lacks; ``None`` for a filter that means the same in MQTT. :class:`RuleError`
    when it is meant as a pattern (it contains ``*``, ``>`` or a prefix ``#``) but is invalid."""
    if not is_runtime_pattern(topic_filter, separator):
        return None
    return parse_pattern(topic_filter, separator)


def listener_identity(identity: Identity, listener: ListenerConfig) -> Identity:
    """``identity`` marked with whether its listener accepts runtime subscription patterns."""
    allowed = listener.subscription_patterns == SEED001
    if identity.subscription_patterns == allowed:
        return identity
    return replace(identity, subscription_patterns=allowed)


def split_shared(topic_filter: str, separator: str, patterns: bool) -> SharedFilter | None:
    """:func:`~edge_broker.matching.mqtt_topics.parse_shared`, where the filter after the group
    may also be a runtime pattern when ``patterns`` (the listener allows them). The group rules
    of MQTT 5 §4.8.2 apply either way; :class:`RuleError` when malformed."""
    head = SHARE_PREFIX + separator
    if not patterns or not topic_filter.startswith(head):
        return parse_shared(topic_filter, separator)
    group, _, inner = topic_filter[len(head) :].partition(separator)
    if not inner or runtime_pattern(inner, separator) is None:
        return parse_shared(topic_filter, separator)  # the MQTT rules and their messages
    if not group or "+" in group or "#" in group:
        return parse_shared(topic_filter, separator)
    return SharedFilter(group, inner)


def subscription_pattern(
    topic_filter: str, separator: str, patterns: bool
) -> tuple[SharedFilter | None, str, SubscriptionPattern | None]:
    """A SUBSCRIBE filter as (shared part, filter without ``$share/<group>/``, runtime pattern
    or ``None``); :class:`RuleError` when it is invalid for the listener's grammar."""
    shared = split_shared(topic_filter, separator, patterns)
    inner = shared.filter if shared is not None else topic_filter
    pattern = runtime_pattern(inner, separator) if patterns else None
    return shared, inner, pattern
