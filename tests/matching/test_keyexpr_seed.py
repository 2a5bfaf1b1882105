"""Zenoh key expressions: every row of seed 004's three matching tables, plus validity and
canonical-form examples of the Key Expressions RFC and Zenoh 1.x (PATTERNS.md §5)."""

from __future__ import annotations

import pytest

from edge_broker.matching.errors import RuleError
from edge_broker.matching.keyexpr import (
    ChunkKind,
    KeyExpr,
    canonize,
    includes,
    intersects,
    is_valid,
)
from tests.seed004_tables import MATCHING_TABLE

# (KE in request, KE in list of rules, match) -- seed 004 "Key-Expression Matching", every row
# of its three tables (shared with the site-ACL tests).
ALL_ROWS = MATCHING_TABLE


@pytest.mark.parametrize(("request_ke", "rule_ke", "match"), ALL_ROWS)
def test_seed_matching_tables(request_ke: str, rule_ke: str, match: bool) -> None:
    assert includes(rule_ke, request_ke) is match
    assert KeyExpr.parse(rule_ke).includes(KeyExpr.parse(request_ke)) is match


@pytest.mark.parametrize(
    ("request_ke", "rule_ke"),
    [("test/demo/*", "test/*/a"), ("test/**", "test/demo/a"), ("test/demo/*", "test/d$*/a")],
)
def test_partial_overlaps_and_supersets_intersect_without_inclusion(
    request_ke: str, rule_ke: str
) -> None:
    assert intersects(request_ke, rule_ke)
    assert not includes(rule_ke, request_ke)


def test_verbatim_partial_overlap_intersects_without_inclusion() -> None:
    # Both contain the key "test/@demo/a", yet neither includes the other.
    assert intersects("test/@demo/*", "*/@demo/a")
    assert not includes("*/@demo/a", "test/@demo/*")


@pytest.mark.parametrize(
    "expr",
    [
        "a",
        "a/b",
        "*",
        "**",
        "*/**",
        "a/**/b",
        "a$*",
        "$*a",
        "a$*b$*c",
        "@a",
        "@a/**",
        "**/@a",
        "@$*",
        "a b",
        "a@b",
        "$*@",
        "a.b/c-d",
        "demo/example$*-$*/test",
        "demo/*/**/test",
    ],
)
def test_valid(expr: str) -> None:
    assert is_valid(expr)
    assert KeyExpr.parse(expr).text == expr
    assert canonize(expr) == expr


@pytest.mark.parametrize(
    ("expr", "needle"),
    [
        ("", "empty"),
        ("/a", "empty chunks"),
        ("a/", "empty chunks"),
        ("a//b", "empty chunks"),
        ("a/#", "'#'"),
        ("a?", "'?'"),
        ("a$", "'$'"),
        ("a$b", "'$'"),
        ("a*", "'*'"),
        ("*a", "'*'"),
        ("***", "'*'"),
        ("@*", "'*'"),
        ("$*$*", "'$*$*'"),
        ("a$*$*b", "'$*$*'"),
        ("$*", "lone '$*'"),
        ("a/$*/b", "lone '$*'"),
        ("**/**", "'**/**'"),
        ("**/*", "'**/*'"),
        ("a/**/*/b", "'**/*'"),
    ],
)
def test_invalid_with_reason(expr: str, needle: str) -> None:
    assert not is_valid(expr)
    with pytest.raises(RuleError) as info:
        KeyExpr.parse(expr)
    assert needle in str(info.value)
    assert info.value.rule == expr


@pytest.mark.parametrize(
    ("expr", "canonical"),
    [
        # Key Expressions RFC statements (also Zenoh's canon.rs tests).
        ("hello/foo$*$*/bar", "hello/foo$*/bar"),
        ("hello/**/**/bye", "hello/**/bye"),
        ("hello/$*/bye", "hello/*/bye"),
        ("hello/$*$*/bye", "hello/*/bye"),
        ("$*/hello/$*/bye", "*/hello/*/bye"),
        ("$*$*$*/hello/$*/bye/$*", "*/hello/*/bye/*"),
        ("$*$*$*/hello/$*$*/bye/$*$*", "*/hello/*/bye/*"),
        ("hello/**/*", "hello/*/**"),
        ("**/**", "**"),
        ("**/*", "*/**"),
        ("*/**/*/**", "*/*/**"),
        ("a/**/b/**/*", "a/**/b/*/**"),
        ("**/$*", "*/**"),
        # Zenoh 1.10's autocanonize panics or fails on these; the RFC's rule is clear.
        ("a$*$*", "a$*"),
        ("x$*$*$*y", "x$*y"),
        ("$*$*x$*$*", "$*x$*"),
    ],
)
def test_canonize(expr: str, canonical: str) -> None:
    assert canonize(expr) == canonical
    assert KeyExpr.autocanonize(expr).text == canonical


@pytest.mark.parametrize("expr", ["", "a//b", "/a", "a/#", "a*", "$"])
def test_canonize_refuses_what_has_no_canonical_form(expr: str) -> None:
    with pytest.raises(RuleError):
        canonize(expr)


def test_chunk_kinds() -> None:
    kinds = [c.kind for c in KeyExpr.parse("a/*/**/d$*/@v/@v$*").chunks]
    assert kinds == [
        ChunkKind.LITERAL,
        ChunkKind.STAR,
        ChunkKind.DOUBLE_STAR,
        ChunkKind.PATTERN,
        ChunkKind.VERBATIM,
        ChunkKind.VERBATIM,
    ]


@pytest.mark.parametrize(
    ("rule", "request_ke", "match"),
    [
        ("a/**", "a", True),  # "**" covers zero chunks: MQTT's a/# also matches a
        ("a$*", "a", True),  # "$*" may stand for the empty string
        ("@a$*", "@ab", False),  # "$*" inside a verbatim chunk is literal
        ("@a$*", "@a$*", True),
        ("$*@", "x@", True),
        ("*", "@a", False),
        ("*/**", "**", False),
        ("**", "*/**", True),
        ("a/*/**", "a/b/**", True),  # the RFC's own example
        ("$*ab$*ba", "ab$*ba", True),
        ("ab$*ba", "aba", False),
        ("$*b$*", "a$*c", False),
    ],
)
def test_inclusion_corner_cases(rule: str, request_ke: str, match: bool) -> None:
    assert includes(rule, request_ke) is match


@pytest.mark.parametrize(
    ("a", "b", "meet"),
    [
        ("a/*", "*/a", True),
        ("a/**", "b/**", False),
        ("a/@b", "a/**", False),
        ("**", "@b/**", False),
        ("$*a", "$*b", False),
        ("a$*", "$*b", True),
        ("*/**", "**", True),
        ("a$*b", "ab", True),
    ],
)
def test_intersection_corner_cases(a: str, b: str, meet: bool) -> None:
    assert intersects(a, b) is meet
    assert intersects(b, a) is meet


def test_long_expressions_do_not_hit_the_recursion_limit() -> None:
    deep = "/".join(["a"] * 3000)
    assert includes("**", deep) and includes("a/**", deep)
    assert not includes(deep, deep + "/b")
    assert intersects("**/b", deep + "/b")
    long_pattern = "x" + "$*y" * 1500
    assert not intersects(long_pattern, "x" + "y" * 1500 + "z")
    assert intersects(long_pattern, "x" + "y" * 1500)
    assert includes(long_pattern, "x" + "y" * 1500)
    assert intersects("a$*" * 100, "$*b" * 100)  # pattern against pattern: the DP
