"""The one exception type of the matching layer (CONVENTIONS.md: one exception per layer).

Every pattern language (MQTT filters, runtime subscription patterns, names, token rules, Zenoh
key expressions) raises :class:`RuleError` when a rule, filter, pattern or name is invalid, at
compile time, never at match time (PATTERNS.md §3 "Grammar and limits").
"""

from __future__ import annotations


class RuleError(ValueError):
    """An invalid rule, pattern, filter or name.

    ``rule`` is the whole text the user wrote, ``segment`` the offending token (may be ``""``
    when the problem concerns the whole rule, e.g. its length), ``reason`` what is wrong and,
    where possible, what to change. ``str()`` reads ``store.#.status: '#' must be the last
    segment`` — or ``rule: segment 'x': reason`` when the segment is not already quoted in
    the reason.
    """

    def __init__(self, rule: str, segment: str, reason: str) -> None:
        super().__init__(rule, segment, reason)
        self.rule = rule
        self.segment = segment
        self.reason = reason

    def __str__(self) -> str:
        shown = self.rule if self.rule else "(empty)"
        if not self.segment or repr(self.segment) in self.reason:
            return f"{shown}: {self.reason}"
        return f"{shown}: segment {self.segment!r}: {self.reason}"
