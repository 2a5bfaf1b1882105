"""edge_broker.matching: the pattern languages of PATTERNS.md, compiled once, matched many times.

Every language takes the separator as a parameter (``/`` by default). Invalid input raises
:class:`RuleError` at compile time, never at match time.

One idea a module:

- ``mqtt_topics``: MQTT topic names and filters (§4): validation, ``$share``, matching,
  containment and overlap.
- ``subscription_trie``: the broker's subscription index (filters -> subscribers).
- ``topic_tree``: retained topics queried by a filter.
- ``rule_index``: first-match over ordered MQTT-filter rules (seed 003, AUTHZ.md gate 4).
- ``subscription_patterns`` / ``pattern_trie``: runtime subscription patterns (§2, seed 001).
- ``decision_cache``: bounded cache with a generation number; ``routing_index``: the routing
  tries' shared bookkeeping.
- ``names``, ``pattern_tokens``, ``token_rules``, ``token_rule_sets`` (with its compressed
  ``token_trie``) (§1, §3) and
  ``keyexpr``, ``ketree`` (§5): import those from their modules.
"""

from .decision_cache import DecisionCache
from .errors import RuleError
from .mqtt_topics import (
    SharedFilter,
    filter_contains,
    filters_overlap,
    parse_shared,
    topic_matches,
    validate_topic_filter,
    validate_topic_name,
)
from .pattern_trie import PatternTrie
from .rule_index import FirstMatchIndex
from .subscription_patterns import SubscriptionPattern, parse_pattern, pattern_matches
from .subscription_trie import SubscriptionTrie
from .topic_tree import TopicTree

__all__ = [
    "DecisionCache",
    "FirstMatchIndex",
    "PatternTrie",
    "RuleError",
    "SharedFilter",
    "SubscriptionPattern",
    "SubscriptionTrie",
    "TopicTree",
    "filter_contains",
    "filters_overlap",
    "parse_pattern",
    "parse_shared",
    "pattern_matches",
    "topic_matches",
    "validate_topic_filter",
    "validate_topic_name",
]
