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
(``authz/policy.py`` ``covering_mqtt_filter``: a superset, so containment can deny a pattern
that would be allowed, never allow one that would leak).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import ListenerConfig
    from ..identity import Identity

SEED001 = "seed001"


def listener_identity(identity: Identity, listener: ListenerConfig) -> Identity:
    """``identity`` marked with whether its listener accepts runtime subscription patterns."""
    allowed = listener.subscription_patterns == SEED001
    if identity.subscription_patterns == allowed:
        return identity
    return replace(identity, subscription_patterns=allowed)
