"""edge_broker.matching: the pattern languages of PATTERNS.md, compiled once, matched many times.

Every language takes the separator as a parameter (``/`` by default). Invalid input raises
:class:`RuleError` at compile time, never at match time.
"""

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
from .subscription_trie import SubscriptionTrie

__all__ = [
    "RuleError",
    "SharedFilter",
    "SubscriptionTrie",
    "filter_contains",
    "filters_overlap",
    "parse_shared",
    "topic_matches",
    "validate_topic_filter",
    "validate_topic_name",
]
