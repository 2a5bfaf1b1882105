"""The keys a routing trie delivers ``topic`` to, as a set: what the trie tests compare.

The broker iterates :meth:`RoutingIndex.match`'s mappings directly; this set is only for tests.
"""

from __future__ import annotations

from typing import Any

from edge_broker.matching.routing_index import RoutingIndex


def match_keys(trie: RoutingIndex[Any, Any], topic: str) -> set[Any]:
    """Every key subscribed through at least one filter or pattern matching ``topic``."""
    return {key for subs in trie.match(topic) for key in subs}
