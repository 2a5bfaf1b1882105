"""Slow, obviously-correct oracles for MQTT topic filters (test helper, not a test file).

A filter becomes a regular expression level by level, the ``$`` rule is a negative look-ahead,
and relations between filters are decided by enumerating every topic over a tiny alphabet.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence

# Level values used by generated filters; topics additionally use a fresh level 'z' that no
# filter names, so '+' always has a witness that no literal matches.
FILTER_LITERALS = ["a", "b", "", "$s"]
TOPIC_LEVELS = [*FILTER_LITERALS, "z"]


def filter_regex(topic_filter: str, sep: str = "/") -> re.Pattern[str]:
    levels = topic_filter.split(sep)
    esep = re.escape(sep)
    parts: list[str] = []
    for i, level in enumerate(levels):
        if level == "#":
            # '#' is last: zero or more further levels; after a parent it also matches the parent.
            parts.append(".*" if i == 0 else f"(?:{esep}.*)?")
            break
        piece = f"[^{esep}]*" if level == "+" else re.escape(level)
        parts.append(piece if i == 0 else esep + piece)
    body = "".join(parts)
    if levels[0] in ("+", "#"):
        body = r"(?!\$)" + body
    return re.compile(body)


def oracle_matches(topic_filter: str, topic: str, sep: str = "/") -> bool:
    return filter_regex(topic_filter, sep).fullmatch(topic) is not None


def all_topics(max_levels: int, sep: str = "/") -> list[str]:
    out: list[str] = []
    for n in range(1, max_levels + 1):
        for combo in itertools.product(TOPIC_LEVELS, repeat=n):
            if combo != ("",):  # "" is not a valid topic name
                out.append(sep.join(combo))
    return out


def matched_set(topic_filter: str, topics: Iterable[str], sep: str = "/") -> set[str]:
    rx = filter_regex(topic_filter, sep)
    return {t for t in topics if rx.fullmatch(t)}


def depth_bound(*filters: str, sep: str = "/") -> int:
    """Enumerating topics one level deeper than the longest filter finds every witness."""
    return max(len(f.split(sep)) for f in filters) + 1


def join(levels: Sequence[str], sep: str) -> str:
    return sep.join(levels)
