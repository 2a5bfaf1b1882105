"""IntersectIndex (authz/acl_index.py) against a linear scan with ``KeyExpr.intersects``."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from edge_broker.authz.acl_index import IntersectIndex
from edge_broker.matching.keyexpr import KeyExpr, is_valid

CHUNKS = ["a", "b", "*", "**", "a$*", "$*b", "@a", "@b"]
exprs = st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=3).map("/".join).filter(is_valid)


@settings(max_examples=300, deadline=None)
@given(st.lists(exprs, max_size=12), exprs)
def test_index_finds_exactly_the_intersecting_members(members: list[str], request: str) -> None:
    tagged = [(KeyExpr.parse(m), i) for i, m in enumerate(members)]
    index = IntersectIndex.build(tagged)
    req = KeyExpr.parse(request)
    expected = sorted(i for k, i in tagged if k.intersects(req))
    assert sorted(index.intersecting(req)) == expected


def test_buckets() -> None:
    index = IntersectIndex.build(
        [(KeyExpr.parse(e), e) for e in ("a/x", "b/x", "*/x", "**", "@a/x", "a$*/y")]
    )
    assert set(index.by_first) == {"a", "b", "@a"}
    assert sorted(index.intersecting(KeyExpr.parse("a/x"))) == ["**", "*/x", "a/x"]
    assert sorted(index.intersecting(KeyExpr.parse("@a/x"))) == ["@a/x"]
    assert sorted(index.intersecting(KeyExpr.parse("*/y"))) == ["**", "a$*/y"]
