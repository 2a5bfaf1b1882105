"""Seed 004's key-expression matching tables (seeds/004, "How the matching works"), one list
for every test that reproduces them: (request key expression, rule key expression, match).

A request matches a rule when it is included in it (equal or a subset); a partial overlap or a
superset does not match. Rows are in the seed's order: plain wildcards, the ``$*`` DSL, then
verbatim (``@``) chunks."""

from __future__ import annotations

MATCHING_TABLE: list[tuple[str, str, bool]] = [
    ("test/demo/a", "test/demo/a", True),
    ("test/demo/a", "test/demo/*", True),
    ("test/*/*", "test/**", True),
    ("test/demo/a", "**", True),
    ("test/demo/a", "test/*/a", True),
    ("test/demo/*", "test/*/a", False),  # partial overlap
    ("test/**", "test/demo/a", False),  # superset
    ("test/demo/a", "test/d$*/a", True),
    ("test/demo/a", "t$*/**", True),
    ("test/d$*/a", "t$*/**", True),
    ("test/demo/*", "test/d$*/a", False),  # partial overlap
    ("test/d$*/a", "test/demo/a", False),  # superset
    ("test/@demo/a", "test/demo/a", False),  # verbatim missing
    ("test/demo/a", "test/@demo/a", False),  # verbatim missing
    ("test/@demo/a", "test/@demo/*", True),
    ("test/@demo/a", "**", False),  # verbatim missing
    ("test/@demo/a", "test/*/a", False),  # verbatim missing
    ("test/@demo/*", "*/@demo/a", False),  # partial overlap
]
