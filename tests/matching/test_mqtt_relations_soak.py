"""Soak: filter containment and overlap checked exhaustively for every filter of up to four
levels over the tiny alphabet (about 1,560 filters, 2.4 million ordered pairs) against topic
enumeration, with matched sets as bitmasks. Run with ``pytest -m soak``."""

from __future__ import annotations

import itertools

import pytest
from mqtt_oracle import FILTER_LITERALS, all_topics, filter_regex

from edge_broker.matching import filter_contains, filters_overlap


@pytest.mark.soak
def test_every_pair_of_short_filters() -> None:
    filters: list[str] = []
    for n in range(5):
        for body in itertools.product([*FILTER_LITERALS, "+"], repeat=n):
            for tail in ([], ["#"]):
                levels = [*body, *tail]
                if levels not in ([], [""]):
                    filters.append("/".join(levels))
    universe = all_topics(6)  # one level deeper than the longest filter
    masks: dict[str, int] = {}
    for f in filters:
        rx = filter_regex(f)
        mask = 0
        for bit, topic in enumerate(universe):
            if rx.fullmatch(topic):
                mask |= 1 << bit
        masks[f] = mask
    for outer in filters:
        mo = masks[outer]
        for inner in filters:
            mi = masks[inner]
            assert filter_contains(outer, inner) == (mi & ~mo == 0), (outer, inner)
            assert filters_overlap(outer, inner) == (mi & mo != 0), (outer, inner)
