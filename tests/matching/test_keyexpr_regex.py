"""Key expressions against a slow, obviously-correct regex oracle written here (independent of
eclipse-zenoh, so these run on every platform): a key (no wildcards) belongs to an expression
exactly when the expression's regex translation matches it (PATTERNS.md §5 semantics).

- exact: ``includes(e, key)`` and ``intersects(e, key)`` equal regex membership of ``key``;
- soundness over a finite universe of keys: ``includes(a, b)`` implies every universe key of
  ``b`` is in ``a``; a universe key in both implies ``intersects(a, b)``.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.matching.keyexpr import KeyExpr, is_valid

KEY_CHUNKS = ["a", "b", "ab", "aba", "@a", "@a$*"]
WILD_CHUNKS = ["*", "**", "a$*", "$*b", "$*a$*", "a$*b"]

# A key chunk any wildcard may stand for: non-empty, no "/", not starting with "@".
_FREE_CHUNK = r"(?!@)[^/]+"


def _chunk_regex(chunk: str) -> str:
    if chunk == "*":
        return _FREE_CHUNK
    if chunk.startswith("@"):
        return re.escape(chunk)  # verbatim: only itself ("$*" inside is literal)
    if "$*" in chunk:
        return "(?!@)" + "[^/]*".join(re.escape(p) for p in chunk.split("$*"))
    return re.escape(chunk)


def to_regex(expr: str) -> re.Pattern[str]:
    """``**`` is zero or more free chunks, each other chunk one chunk."""
    out = ""
    for i, chunk in enumerate(expr.split("/")):
        sep = "" if i == 0 else "/"
        if chunk == "**":
            # zero or more chunks, with the separators placed so that "a/**" matches "a"
            out += f"(?:{sep}{_FREE_CHUNK}(?:/{_FREE_CHUNK})*)?" if i else (
                f"(?:{_FREE_CHUNK}(?:/{_FREE_CHUNK})*)?"
            )  # fmt: skip
        else:
            out += sep + _chunk_regex(chunk)
    return re.compile(out)


def member(key: str, expr: str) -> bool:
    # "**" first and then more chunks: "**/a" must match "a" (zero chunks, no leading "/").
    pattern = to_regex(expr)
    if pattern.fullmatch(key):
        return True
    return bool(expr.startswith("**/") and to_regex(expr[3:]).fullmatch(key))


UNIVERSE = [
    "/".join(c)
    for n in (1, 2, 3)
    for c in itertools.product(KEY_CHUNKS, repeat=n)
    if is_valid("/".join(c))
]

exprs = (
    st.lists(st.sampled_from(KEY_CHUNKS + WILD_CHUNKS), min_size=1, max_size=4)
    .map("/".join)
    .filter(is_valid)
)


def test_regex_oracle_sanity() -> None:
    assert member("a", "a/**") and member("a/b/ab", "a/**") and not member("a/@a", "a/**")
    assert member("a", "**/a") and member("b/a", "**/a") and not member("@a/a", "**/a")
    assert member("ab", "a$*") and member("a", "a$*") and not member("@a", "$*a")
    assert member("@a$*", "@a$*") and not member("@ab", "@a$*")


@settings(max_examples=200, deadline=None)
@given(exprs)
def test_membership_of_keys_is_exact(expr: str) -> None:
    e = KeyExpr.parse(expr)
    for key in UNIVERSE:
        k = KeyExpr.parse(key)
        expected = member(key, expr)
        assert e.includes(k) == expected, (expr, key)
        assert e.intersects(k) == expected, (expr, key)
        assert k.intersects(e) == expected, (expr, key)


@settings(max_examples=200, deadline=None)
@given(exprs, exprs)
def test_relations_are_sound_on_the_universe(a: str, b: str) -> None:
    ka, kb = KeyExpr.parse(a), KeyExpr.parse(b)
    in_a = {k for k in UNIVERSE if member(k, a)}
    in_b = {k for k in UNIVERSE if member(k, b)}
    if ka.includes(kb):
        assert in_b <= in_a, (a, b, sorted(in_b - in_a))
    if in_a & in_b:
        assert ka.intersects(kb), (a, b, sorted(in_a & in_b))
