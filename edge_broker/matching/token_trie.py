"""The trie that token rule sets compile into (PATTERNS.md "Matching structures", §3).

Internal to :mod:`edge_broker.matching.token_rule_sets`, which walks it. The trie is keyed by
rule segment. A :class:`Node` *is* the dict of its literal edges (a ``dict`` subclass with
slots, so 100k rules cost few objects and few CPU-cache lines per level). Alternatives are built
as edges of their own, keyed by their canonical variant set (rules sharing ``(eu|us)`` share the
edge); when the set is sealed their literal variants are merged into the literal dict and their
prefix variants become a sorted tuple tested with one ``str.startswith(tuple)``. ``?`` and ``*``
(subscribe rules) are single edges; ``#`` and ``>`` tails are marks on the node they end at.
Each node knows the smallest rule index below it, so a walk skips branches that cannot beat the
best rule found.

Once built, the trie is compressed (radix-trie style): a run of segments through nodes with a
single edge becomes one :class:`Path`, and a subtree of one rule becomes that rule's leaf, which
carries the rule's text. With 100k rules the root's edges are then mostly leaves, and a random
decision touches the root's dict and one or two small objects instead of a node per segment.
The strings, variant sets and steps the trie keeps are its own de-duplicated copies, allocated
beside it (:class:`_Copies`), and the parsed rules are not referenced: a decision touches only
the trie's memory (``scripts/bench_token_rules.py``: 100k rules decide within 2x the time of 10,
with a third of the memory of the uncompressed trie).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, final

from .token_rules import Alternatives, PubRule, SegmentKind, SubRule, Tail

_NONE: Final = 1 << 62  # "no rule": larger than any rule index


@final
class Variants:
    """A single-token segment that is not a literal, as one step of a path.

    For an alternatives segment ``(v1|v2|p*)``, ``literals`` (the literal variants) and
    ``prefixes`` (the prefix variants, ``None`` when there are none); for the ``?`` or ``*``
    of a subscribe rule, ``wild`` is that segment kind (``None`` for alternatives). Shared by
    every path of the trie with equal variants, so a fleet's ``(temp|hum)`` costs one object
    however many rules repeat it, and stays in the CPU cache.
    """

    __slots__ = ("literals", "prefixes", "wild")

    def __init__(
        self,
        literals: frozenset[str],
        prefixes: tuple[str, ...] | None,
        wild: SegmentKind | None = None,
    ) -> None:
        self.literals = literals
        self.prefixes = prefixes
        self.wild = wild


Step = str | Variants


@final
class Path:
    """A rule found, or a compressed path of single-edge segments in the trie.

    As a result: ``best`` is the rule's index (the first rule in the given order wins) and
    ``text`` its text, so a decision returns the text it already touched; a node's ``marks``
    hold one such path per tail kind for the rules ending there (no steps, ``next`` None).

    As path compression: a run of segments through nodes that have a single edge and end no
    rule becomes one object, instead of one node per segment (an object, its key table and
    its key strings, each a CPU-cache miss when 100k rules are touched at random). Each of
    the ``size`` ``steps`` is a literal or the :class:`Variants` of a segment; a publish
    set whose steps are all literals keeps them as ``rest`` instead, joined by the separator
    and compared in place against the channel text. The path then goes on at the node
    ``next``, or, when ``next`` is None, it ends a single rule (``best``, ``text``) with its
    ``tail``: a leaf. Equal steps tuples are shared across the trie.
    """

    __slots__ = ("best", "text", "tail", "rest", "steps", "size", "next")

    def __init__(
        self,
        best: int,
        text: str,
        tail: Tail | None,
        steps: tuple[Step, ...] = (),
        next_node: Node | None = None,
    ) -> None:
        self.best = best
        self.text = text
        self.tail = tail
        self.rest = ""
        self.steps = steps
        self.size = len(steps)
        self.next = next_node

    def after(self, step: Step) -> Path:
        """This path with ``step`` in front (for the node whose single edge leads here)."""
        return Path(self.best, self.text, self.tail, (step, *self.steps), self.next)


NO_RULE: Final = Path(_NONE, "", None)  # "no rule found": loses every comparison


class Node(dict[str, "Node | Path"]):
    """A trie node: the node *is* the dict of its literal edges (token -> child).

    Compact on purpose (100k rules make 100k+ nodes, touched at random): no per-node dict of
    attributes, leaves share CPython's empty key table, and the rarely used parts live behind
    one slot each, ``None`` when unused. When the set is sealed, the literal variants of
    alternatives edges are merged into the literal dict (a token then finds an alternatives
    edge with the same lookup as a literal edge); ``more`` keeps the extra targets of a token
    that leads to several edges; prefix variants become the sorted tuple ``prefixes`` (one
    ``str.startswith(tuple)`` call rejects a token; equal tuples are shared across nodes) with
    the parallel tuples ``prefix_keys`` and ``prefix_targets`` (a prefix leading to several
    edges repeats in ``prefix_keys``). Mutable only while its rule set is being built.
    """

    __slots__ = (
        "marks",
        "best",
        "any_literal",
        "wildcard",
        "edges",
        "more",
        "prefixes",
        "prefix_keys",
        "prefix_targets",
    )

    def __init__(self, best: int) -> None:
        super().__init__()
        # (end, tail_zero, tail_one): the first rule ending here without a tail, with '#',
        # with '>' (NO_RULE where none does); None when no rule ends here.
        self.marks: tuple[Path, Path, Path] | None = None
        self.best = best  # smallest rule index in this subtree (rules are inserted in order)
        self.any_literal: Trie | None = None  # "?"
        self.wildcard: Trie | None = None  # "*"
        self.edges: dict[Alternatives, Node] | None = None  # while building only
        self.more: dict[str, tuple[Trie, ...]] | None = None
        self.prefixes: tuple[str, ...] | None = None
        self.prefix_keys: tuple[str, ...] = ()
        self.prefix_targets: tuple[Trie, ...] = ()

    def child(
        self, kind: SegmentKind, literal: str, alternatives: Alternatives | None, index: int
    ) -> Node:
        if kind is SegmentKind.LITERAL:
            node = self.get(literal)
            if node is None:
                node = self[literal] = Node(index)
            assert isinstance(node, Node)  # paths appear only when the set is sealed
            return node
        if kind is SegmentKind.ALTERNATIVES:
            assert alternatives is not None
            if self.edges is None:
                self.edges = {}
            node = self.edges.get(alternatives)
            if node is None:
                node = self.edges[alternatives] = Node(index)
            return node
        if kind is SegmentKind.ANY_LITERAL:
            if self.any_literal is None:
                self.any_literal = Node(index)
            assert isinstance(self.any_literal, Node)
            return self.any_literal
        if self.wildcard is None:
            self.wildcard = Node(index)
        assert isinstance(self.wildcard, Node)
        return self.wildcard

    def mark(self, rule: PubRule | SubRule, index: int) -> None:
        """Record that ``rule`` ends here; an earlier rule ending here with its tail wins."""
        end, zero, one = self.marks or (NO_RULE, NO_RULE, NO_RULE)
        tail = rule.tail
        if tail is None:
            if end is NO_RULE:
                end = Path(index, rule.text, None)
        elif tail is Tail.ZERO_OR_MORE:
            if zero is NO_RULE:
                zero = Path(index, rule.text, tail)
        elif one is NO_RULE:
            one = Path(index, rule.text, tail)
        self.marks = (end, zero, one)

    def seal_alternatives(self) -> list[Node]:
        """Merge the alternatives edges into the lookup structures; returns their nodes."""
        edges = self.edges
        if edges is None:
            return []
        self.edges = None
        more: dict[str, list[Trie]] = {}
        by_prefix: dict[str, list[Trie]] = {}
        for alternatives, node in edges.items():
            for literal in alternatives.literals:
                if literal in self:
                    more.setdefault(literal, []).append(node)
                else:
                    self[literal] = node
            for prefix in alternatives.prefixes:
                by_prefix.setdefault(prefix, []).append(node)
        if more:
            self.more = {k: tuple(v) for k, v in more.items()}
        if by_prefix:
            self.prefixes = tuple(sorted(by_prefix))
            pairs = [(p, target) for p in self.prefixes for target in by_prefix[p]]
            keys = tuple(p for p, _ in pairs)
            self.prefix_keys = self.prefixes if keys == self.prefixes else keys
            self.prefix_targets = tuple(target for _, target in pairs)
        return list(edges.values())

    def prefix_children(self, text: str) -> list[Trie]:
        """Edges with a prefix variant ``q*`` such that ``text`` starts with ``q``.

        For a literal token that is "matches ``q*``"; for a subscription token ``p*`` it is
        D3's "p ⊒ q": the same test.
        """
        return [
            target
            for prefix, target in zip(self.prefix_keys, self.prefix_targets, strict=True)
            if text.startswith(prefix)
        ]

    def subtrees(self) -> list[Trie]:
        """Every child: literal edges (each once), shared edges, prefix edges, ``?``, ``*``."""
        found: list[Trie] = list({id(child): child for child in self.values()}.values())
        if self.more is not None:
            found.extend(child for targets in self.more.values() for child in targets)
        found.extend(self.prefix_targets)
        if self.any_literal is not None:
            found.append(self.any_literal)
        if self.wildcard is not None:
            found.append(self.wildcard)
        return found

    def replace_children(self, final: dict[int, Path]) -> None:
        """Point every edge whose child was compressed at its path."""
        for token, child in self.items():
            path = final.get(id(child))
            if path is not None:
                self[token] = path
        if self.more is not None:
            self.more = {k: tuple(final.get(id(c), c) for c in v) for k, v in self.more.items()}
        self.prefix_targets = tuple(final.get(id(c), c) for c in self.prefix_targets)
        if self.any_literal is not None:
            self.any_literal = final.get(id(self.any_literal), self.any_literal)
        if self.wildcard is not None:
            self.wildcard = final.get(id(self.wildcard), self.wildcard)

    def own(self, copies: _Copies) -> None:
        """Re-key this node with the build's own copies of its strings (see :class:`_Copies`).

        The literal dict is rebuilt, so its key table is allocated now too.
        """
        items = list(self.items())
        self.clear()
        for token, child in items:
            self[copies.text(token)] = child
        if self.more is not None:
            self.more = {copies.text(k): v for k, v in self.more.items()}
        if self.prefixes is not None:
            self.prefixes = copies.strings(self.prefixes)
            self.prefix_keys = copies.strings(self.prefix_keys)
        if self.marks is not None:
            for path in self.marks:
                if path is not NO_RULE:
                    path.text = copies.text(path.text)

    def compressed(self, copies: _Copies) -> Path | None:
        """The path equivalent to this node (children already compressed), if any.

        A node that ends exactly one rule and has no edges becomes that rule's leaf. A node
        that ends no rule and has no shared edges, whose edges all lead to one child, becomes
        a path of one step more than its child's when the child is a path, else a path of one
        step to the child: the step is the literal of a single literal edge, else the
        variants of the alternatives (several literals, prefix variants), ``?`` or ``*``.
        """
        if self.more is not None:
            return None
        if self.marks is not None:
            if (
                len(self)
                or self.prefixes is not None
                or self.any_literal is not None  # a node is a dict: empty is not absent
                or self.wildcard is not None
            ):
                return None
            ended = [path for path in self.marks if path is not NO_RULE]
            return ended[0] if len(ended) == 1 else None
        step: Step
        child: Trie | None
        if self.any_literal is not None or self.wildcard is not None:
            if len(self) or self.prefixes is not None:
                return None
            if self.wildcard is None:
                step, child = (
                    copies.variants(frozenset(), None, SegmentKind.ANY_LITERAL),
                    self.any_literal,
                )
            elif self.any_literal is None:
                step, child = (
                    copies.variants(frozenset(), None, SegmentKind.WILDCARD),
                    self.wildcard,
                )
            else:
                return None
        else:
            children = {id(child): child for child in (*self.values(), *self.prefix_targets)}
            if len(children) != 1:
                return None
            (child,) = children.values()
            if self.prefixes is None and len(self) == 1:
                (step,) = self
            else:
                step = copies.variants(frozenset(self), self.prefixes, None)
        assert child is not None
        if isinstance(child, Path):
            return child.after(step)
        return Path(child.best, "", None, (step,), child)


Trie = Node | Path


class _Copies:
    """The build's own copies of the strings and variant sets a decision touches.

    Locality: a rule set built from 100k rules answers decisions by touching a few objects
    of the trie at random, each a CPU-cache and TLB miss when its page is cold. Strings
    shared with the parsed rules (keys, rule texts) would sit among those rules' other
    objects, all over the heap; copies made while the trie is compressed sit beside the
    trie's own objects, and the parsed rules are not kept at all. Equal strings, literal
    variants and tuples (prefix variants, a path's steps) get one copy each, so
    repeated ones (``(temp|hum)``, ``status/#``) are shared and stay cached. Used only while
    a set is being built.
    """

    __slots__ = ("_strings", "_tuples", "_variants", "_steps")

    def __init__(self) -> None:
        self._strings: dict[str, str] = {}
        self._tuples: dict[tuple[str, ...], tuple[str, ...]] = {}
        self._variants: dict[object, Variants] = {}
        self._steps: dict[tuple[Step, ...], tuple[Step, ...]] = {}

    def text(self, text: str) -> str:
        copy = self._strings.get(text)
        if copy is None:
            copy = self._strings[text] = "".join((text, ""))  # a new object, allocated now
        return copy

    def variants(
        self, literals: frozenset[str], prefixes: tuple[str, ...] | None, wild: SegmentKind | None
    ) -> Variants:
        """One :class:`Variants` per distinct segment (its strings already copied)."""
        key = (literals, prefixes, wild)
        found = self._variants.get(key)
        if found is None:
            found = self._variants[key] = Variants(literals, prefixes, wild)
        return found

    def steps(self, steps: tuple[Step, ...]) -> tuple[Step, ...]:
        """One copy of a path's steps (their strings and variants already copied)."""
        return self._steps.setdefault(steps, steps)

    def strings(self, strings: tuple[str, ...]) -> tuple[str, ...]:
        """One copy of a tuple of strings: the prefix variants of a node."""
        copy = self._tuples.get(strings)
        if copy is None:
            copy = self._tuples[strings] = tuple(self.text(p) for p in strings)
        return copy


def _seal(root: Node) -> None:
    """Merge alternatives edges once every rule is in (iterative: no recursion limit).

    The literal dict of a node must be sealed before its alternatives edges are merged into
    it, so the walk collects children before sealing.
    """
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(child for child in node.values() if isinstance(child, Node))
        stack.extend(node.seal_alternatives())
        if isinstance(node.any_literal, Node):
            stack.append(node.any_literal)
        if isinstance(node.wildcard, Node):
            stack.append(node.wildcard)


def _compress(root: Node, separator: str | None) -> Trie:
    """Replace every node that :meth:`Node.compressed` accepts by its path.

    Bottom up, so a path can take the steps of the path below it. Every string the trie
    keeps is the build's own copy (:class:`_Copies`). ``separator`` given (publish sets):
    paths of literal steps keep them as text, ``rest``.
    """
    order: list[Node] = []  # every node once, parents before children
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            order.append(node)
            stack.extend(child for child in node.subtrees() if isinstance(child, Node))
    final: dict[int, Path] = {}
    copies = _Copies()
    for node in reversed(order):
        node.replace_children(final)
        node.own(copies)
        path = node.compressed(copies)
        if path is not None:
            final[id(node)] = path
    for path in final.values():  # once every path has taken its children's steps
        steps = path.steps
        if separator is not None and steps and all(type(step) is str for step in steps):
            path.rest, path.steps = copies.text(separator.join(steps)), ()  # type: ignore[arg-type]
        elif steps:
            path.steps = copies.steps(steps)
    return final.get(id(root), root)


def build_trie(rules: Sequence[PubRule | SubRule], separator: str | None) -> Trie:
    root = Node(_NONE)
    for index, rule in enumerate(rules):
        node = root
        if index < node.best:
            node.best = index
        for segment in rule.segments:
            node = node.child(segment.kind, segment.literal, segment.alternatives, index)
        node.mark(rule, index)
    _seal(root)
    return _compress(root, separator)
