"""A slow, obviously-correct oracle for runtime subscription patterns (test helper).

Seed 001 / PATTERNS.md §2 translated into a regular expression, token by token.
"""

from __future__ import annotations

import re


def pattern_regex(pattern: str, sep: str) -> re.Pattern[str]:
    tokens = pattern.split(sep)
    s = re.escape(sep)
    one = f"[^{s}]*"
    parts: list[str] = []
    for i, tok in enumerate(tokens):
        lead = "" if i == 0 else s
        if tok in ("*", "+"):
            parts.append(lead + one)
        elif tok == "#":
            # zero or more tokens: after a body, an optional separator and anything
            parts.append(".*" if i == 0 else f"(?:{s}.*)?")
        elif tok == ">":
            parts.append(".*" if i == 0 else f"{s}.*")
        elif tok.endswith("*"):
            parts.append(lead + re.escape(tok[:-1]) + one)
        elif tok.endswith("#"):
            parts.append(lead + re.escape(tok[:-1]) + one + f"(?:{s}.*)?")
        elif tok.endswith(">"):
            parts.append(lead + re.escape(tok[:-1]) + one + f"{s}.*")
        else:
            parts.append(lead + re.escape(tok))
    return re.compile("".join(parts), re.DOTALL)


def oracle_pattern_matches(pattern: str, channel: str, sep: str) -> bool:
    return pattern_regex(pattern, sep).fullmatch(channel) is not None
