"""Seed 001's wildcard-pattern examples ("Wildcard patterns"), one list for every test that
reproduces them: (pattern, channel, matches), written with the seed's '.' separator.

The seed's examples, plus the single-token forms it defines (``p*``, ``*``, literals)."""

from __future__ import annotations

ROUTING: list[tuple[str, str, bool]] = [
    ("a.b.>", "a.b.x", True),
    ("a.b.>", "a.b.x.y", True),
    ("a.b.>", "a.b", False),
    ("a.b.#", "a.b", True),
    ("a.b.#", "a.b.x", True),
    ("a.b.#", "a.b.x.y", True),
    ("a.b.c>", "a.b.c1.x", True),
    ("a.b.c>", "a.b.c99.x.y", True),
    ("a.b.c>", "a.b.c1", False),
    ("a.b.c#", "a.b.c1", True),
    ("a.b.c#", "a.b.c1.x", True),
    ("a.b.c#", "a.b.c99.x.y", True),
    ("a.b.c#", "a.b.d1", False),
    ("b*", "b", True),
    ("b*", "b1", True),
    ("b*", "b1.x", False),
    ("b*", "c1", False),
    ("a.*.c", "a.x.c", True),
    ("a.*.c", "a.x.y.c", False),
    ("abc", "abc", True),
    ("abc", "abcd", False),
    ("#", "any.thing.at.all", True),
    (">", "one", True),
    ("a.b*.c", "a.b.c", True),
    ("a.b*.c", "a.b1.c", True),
    ("a.b*.c", "a.b1.x.c", False),
    ("abc", "abd", False),
    ("#", "x.y", True),
    (">", "x", True),
]
