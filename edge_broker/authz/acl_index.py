"""Indexes over ACL key expressions for ``lint``, which asks pairwise questions ("is this allow
included in some deny?", "does this deny meet any allow?") that must not cost rules x rules on
a 10k-rule section (AUTHZ.md §4, PATTERNS.md "Matching structures").

Inclusion uses a :class:`~edge_broker.matching.ketree.KeTree` (O(depth)). Intersection has no
trie query, so :class:`IntersectIndex` buckets members by their first chunk: a member whose
first chunk is a literal or verbatim chunk can only meet a request with the same first chunk
or a wildcard one, so a request starting with a literal scans one bucket plus the members that
start with a wildcard; only wildcard-first requests scan everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from ..matching.keyexpr import ChunkKind, KeyExpr

T = TypeVar("T")

_PLAIN = (ChunkKind.LITERAL, ChunkKind.VERBATIM)


@dataclass(frozen=True, slots=True)
class IntersectIndex(Generic[T]):
    """Tagged key expressions bucketed by first chunk; build with :meth:`build`."""

    by_first: dict[str, tuple[tuple[KeyExpr, T], ...]]
    wild_first: tuple[tuple[KeyExpr, T], ...]
    members: tuple[tuple[KeyExpr, T], ...]

    @classmethod
    def build(cls, members: Iterable[tuple[KeyExpr, T]]) -> IntersectIndex[T]:
        everything = tuple(members)
        buckets: dict[str, list[tuple[KeyExpr, T]]] = {}
        wild: list[tuple[KeyExpr, T]] = []
        for expr, tag in everything:
            first = expr.chunks[0]
            if first.kind in _PLAIN:
                buckets.setdefault(first.text, []).append((expr, tag))
            else:
                wild.append((expr, tag))
        return cls({k: tuple(v) for k, v in buckets.items()}, tuple(wild), everything)

    def intersecting(self, request: KeyExpr) -> Iterator[T]:
        """Tags of the members that share at least one key with ``request``."""
        first = request.chunks[0]
        if first.kind in _PLAIN:
            candidates: Iterable[tuple[KeyExpr, T]] = (
                *self.by_first.get(first.text, ()),
                *self.wild_first,
            )
        else:
            candidates = self.members
        for expr, tag in candidates:
            if expr.intersects(request):
                yield tag
