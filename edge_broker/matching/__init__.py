"""edge_broker.matching: the pattern languages of PATTERNS.md, compiled once, matched many times.

Every language takes the separator as a parameter (``/`` by default). Invalid input raises
:class:`RuleError` at compile time, never at match time.
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
