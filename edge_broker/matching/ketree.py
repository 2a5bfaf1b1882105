"""KeTree: a set of key expressions compiled for "is this request INCLUDED in some member?"
(seed 004 "Key-Expression Matching", PATTERNS.md §5 and "Matching structures").

The set is a trie over chunks. Each node keeps its edges apart by kind, so a lookup never scans
the members: literal and verbatim chunks in a dict (one hash lookup), one ``*`` edge, one ``**``
edge, and ``$*`` pattern chunks grouped by their literal prefix (one dict lookup per distinct
prefix length at that node). A lookup walks the request's chunks once, carrying the set of
nodes reached so far (``**`` nodes may stay active); its cost is O(request depth x active
nodes), independent of the number of members that cannot match.

Every member carries a payload (for the ACL: the rule id) and a rank (for the ACL: the rule's
position in the rules list); :meth:`KeTree.first_including` returns the payload of the
lowest-ranked member that includes the request, so answers do not depend on traversal order.
Trees are immutable once built; :meth:`KeTree.union` merges trees by sharing every subtree that
only one of them has, so merging per-subject trees costs their overlap, not their size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .keyexpr import Chunk, ChunkKind, KeyExpr, as_keyexpr, chunk_includes

_NO_LITERALS: Mapping[str, _KeNode] = MappingProxyType({})
_NO_PATTERNS: Mapping[str, list[tuple[Chunk, _KeNode]]] = MappingProxyType({})


class _KeNode:
    """A trie node; mutable only while it is being built, never after (nodes are then shared
    between trees by :meth:`KeTree.union`)."""

    __slots__ = (
        "literal",
        "star",
        "double",
        "patterns",
        "prefix_lengths",
        "is_double",
        "terminal",
    )

    def __init__(self, is_double: bool = False) -> None:
        self.literal: Mapping[str, _KeNode] = _NO_LITERALS  # a dict once it has an entry
        self.star: _KeNode | None = None
        self.double: _KeNode | None = None
        self.patterns: Mapping[str, list[tuple[Chunk, _KeNode]]] = _NO_PATTERNS
        self.prefix_lengths: tuple[int, ...] = ()
        self.is_double = is_double  # reached through a "**" edge: absorbs request chunks
        self.terminal: tuple[int, str] | None = None  # (rank, payload); lowest rank wins

    def child(self, chunk: Chunk) -> _KeNode:
        kind = chunk.kind
        if kind is ChunkKind.STAR:
            if self.star is None:
                self.star = _KeNode()
            return self.star
        if kind is ChunkKind.DOUBLE_STAR:
            if self.double is None:
                self.double = _KeNode(is_double=True)
            return self.double
        if kind is ChunkKind.PATTERN:
            if not isinstance(self.patterns, dict):
                self.patterns = {}
            group = self.patterns.setdefault(chunk.prefix, [])
            for existing, node in group:
                if existing.text == chunk.text:
                    return node
            node = _KeNode()
            group.append((chunk, node))
            self.prefix_lengths = tuple(sorted({len(p) for p in self.patterns}))
            return node
        found = self.literal.get(chunk.text)
        if found is None:
            if not isinstance(self.literal, dict):
                self.literal = {}
            found = _KeNode()
            self.literal[chunk.text] = found
        return found


def _merge(nodes: list[_KeNode]) -> _KeNode:
    """The union of tries; a subtree present in only one input is shared, not copied."""
    if len(nodes) > 1:
        nodes = list({id(n): n for n in nodes}.values())  # the same subtree twice: once
    if len(nodes) == 1:
        return nodes[0]
    out = _KeNode(is_double=nodes[0].is_double)
    terminals = [n.terminal for n in nodes if n.terminal is not None]
    out.terminal = min(terminals) if terminals else None
    literal: dict[str, list[_KeNode]] = {}
    patterns: dict[str, dict[str, tuple[Chunk, list[_KeNode]]]] = {}
    stars: list[_KeNode] = []
    doubles: list[_KeNode] = []
    for n in nodes:
        for text, child in n.literal.items():
            literal.setdefault(text, []).append(child)
        for prefix, group in n.patterns.items():
            by_text = patterns.setdefault(prefix, {})
            for chunk, child in group:
                by_text.setdefault(chunk.text, (chunk, []))[1].append(child)
        if n.star is not None:
            stars.append(n.star)
        if n.double is not None:
            doubles.append(n.double)
    if literal:
        out.literal = {text: _merge(children) for text, children in literal.items()}
    if patterns:
        out.patterns = {
            prefix: [(chunk, _merge(children)) for chunk, children in by_text.values()]
            for prefix, by_text in patterns.items()
        }
        out.prefix_lengths = tuple(sorted({len(p) for p in patterns}))
    out.star = _merge(stars) if stars else None
    out.double = _merge(doubles) if doubles else None
    return out


@dataclass(frozen=True, slots=True)
class KeTree:
    """An immutable compiled set of key expressions with payloads."""

    _root: _KeNode
    size: int

    @classmethod
    def build(cls, members: Iterable[tuple[KeyExpr | str, str]]) -> KeTree:
        """Compile ``(key expression, payload)`` pairs; earlier pairs win ties."""
        return cls.build_ranked(
            (expr, rank, payload) for rank, (expr, payload) in enumerate(members)
        )

    @classmethod
    def build_ranked(cls, members: Iterable[tuple[KeyExpr | str, int, str]]) -> KeTree:
        """Compile ``(key expression, rank, payload)``; when several members include a
        request, the one with the lowest rank is reported (ranks order trees too, so a
        :meth:`union` reports the same member as one tree built from all members)."""
        root = _KeNode()
        count = 0
        for expr, rank, payload in members:
            node = root
            for chunk in as_keyexpr(expr).chunks:
                node = node.child(chunk)
            if node.terminal is None or rank < node.terminal[0]:
                node.terminal = (rank, payload)
            count += 1
        return cls(root, count)

    @classmethod
    def union(cls, trees: Iterable[KeTree]) -> KeTree:
        """One tree holding every member of ``trees``; costs the size of their overlap only."""
        nonempty = [t for t in trees if t.size]
        if not nonempty:
            return cls(_KeNode(), 0)
        return cls(_merge([t._root for t in nonempty]), sum(t.size for t in nonempty))

    def __len__(self) -> int:
        return self.size

    def includes(self, request: KeyExpr | str) -> bool:
        """True when some member includes ``request``."""
        return self.first_including(request) is not None

    def first_including(self, request: KeyExpr | str) -> str | None:
        """The payload of the lowest-ranked member that includes ``request``, or ``None``."""
        if self.size == 0:
            return None
        chunks = as_keyexpr(request).chunks
        active: list[_KeNode] = [self._root]
        for chunk in chunks:
            if len(active) == 1:
                # Fast path: one node with literal edges only, a literal or verbatim chunk.
                node = active[0]
                if (
                    chunk.kind <= ChunkKind.VERBATIM
                    and node.star is None
                    and node.double is None
                    and not node.patterns
                    and not node.is_double
                ):
                    hit = node.literal.get(chunk.text)
                    if hit is None:
                        return None
                    active = [hit]
                    continue
            active = _step(_close(active), chunk)
            if not active:
                return None
        best: tuple[int, str] | None = None
        for node in _close(active):
            t = node.terminal
            if t is not None and (best is None or t[0] < best[0]):
                best = t
        return None if best is None else best[1]


def _close(nodes: list[_KeNode]) -> list[_KeNode]:
    """Add the nodes reachable through "**" matching zero chunks."""
    extra = [n.double for n in nodes if n.double is not None]
    if not extra:
        return nodes
    seen = {id(n) for n in nodes}
    out = list(nodes)
    for n in extra:
        if id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    return out


def _step(nodes: list[_KeNode], chunk: Chunk) -> list[_KeNode]:
    """The nodes reached from ``nodes`` by one request chunk, by inclusion."""
    kind = chunk.kind
    text = chunk.text
    out: list[_KeNode] = []
    for node in nodes:
        if node.is_double and kind is not ChunkKind.VERBATIM:
            out.append(node)  # "**" absorbs any non-verbatim chunk, "*" and "**" included
        if kind is ChunkKind.DOUBLE_STAR:
            continue  # only "**" includes "**"
        if kind is ChunkKind.LITERAL or kind is ChunkKind.VERBATIM:
            hit = node.literal.get(text)
            if hit is not None:
                out.append(hit)
            if kind is ChunkKind.VERBATIM:
                continue
        if node.star is not None:
            out.append(node.star)
        if kind is ChunkKind.STAR or not node.patterns:
            continue
        for length in node.prefix_lengths:
            if length > len(text):
                break
            group = node.patterns.get(text[:length])
            if group is None:
                continue
            for pattern, child in group:
                if chunk_includes(pattern, chunk):
                    out.append(child)
    if len(out) > 1:
        unique: dict[int, _KeNode] = {}
        for n in out:
            unique.setdefault(id(n), n)
        return list(unique.values())
    return out
