"""Sets of token rules compiled into tries (PATTERNS.md "Matching structures", §3).

:class:`PubRuleSet` answers "may this concrete channel be published to?" and
:class:`SubRuleSet` "may this subscription pattern be sent?", each with the text of the deciding
rule (the first in the given order, for explain and audit) or ``None``.

The trie is keyed by rule segment. A node *is* the dict of its literal edges (a ``dict``
subclass with slots, so 100k rules cost few objects and few CPU-cache lines per level).
Alternatives are built as edges of their own, keyed by their canonical variant set (rules
sharing ``(eu|us)`` share the edge); when the set is sealed their literal variants are merged
into the literal dict and their prefix variants become a sorted tuple tested with one
``str.startswith(tuple)``. ``?`` and ``*`` (subscribe rules) are single edges; ``#`` and ``>``
tails are marks on the node they end at. A decision walks one path per matching edge, so it
costs O(depth) for any number of rules, and each node knows the smallest rule index below it,
so branches that cannot beat the best rule found are skipped. Optionally each set keeps a
bounded cache of its decisions (``cache_entries``).

Once built, the trie is compressed (radix-trie style): a run of segments through nodes with a
single edge becomes one :class:`_Path`, and a subtree of one rule becomes that rule's leaf,
which carries the rule's text. With 100k rules the root's edges are then mostly leaves, and a
random decision touches the root's dict and one or two small objects instead of a node per
segment. The strings, variant sets and steps the trie keeps are its own de-duplicated copies,
allocated beside it, and the parsed rules are dropped: a decision touches only the trie's
memory (``scripts/bench_token_rules.py``: 100k rules decide within 2x the time of 10, with a
third of the memory of the uncompressed trie).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, final

from .names import DEFAULT_SEPARATOR, check_separator
from .pattern_tokens import PatternToken, TokenKind
from .subscription_patterns import SubscriptionPattern
from .token_rules import (
    Alternatives,
    PubRule,
    SegmentKind,
    SubRule,
    Tail,
    subscription_tokens,
)

_NONE: Final = 1 << 62  # "no rule": larger than any rule index


@final
class _Variants:
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


_Step = str | _Variants


@final
class _Path:
    """A rule found, or a compressed path of single-edge segments in the trie.

    As a result: ``best`` is the rule's index (the first rule in the given order wins) and
    ``text`` its text, so a decision returns the text it already touched; a node's ``marks``
    hold one such path per tail kind for the rules ending there (no steps, ``next`` None).

    As path compression: a run of segments through nodes that have a single edge and end no
    rule becomes one object, instead of one node per segment (an object, its key table and
    its key strings, each a CPU-cache miss when 100k rules are touched at random). Each of
    the ``size`` ``steps`` is a literal or the :class:`_Variants` of a segment; a publish
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
        steps: tuple[_Step, ...] = (),
        next_node: _Node | None = None,
    ) -> None:
        self.best = best
        self.text = text
        self.tail = tail
        self.rest = ""
        self.steps = steps
        self.size = len(steps)
        self.next = next_node

    def after(self, step: _Step) -> _Path:
        """This path with ``step`` in front (for the node whose single edge leads here)."""
        return _Path(self.best, self.text, self.tail, (step, *self.steps), self.next)


_NO_RULE: Final = _Path(_NONE, "", None)  # "no rule found": loses every comparison


class _Node(dict[str, "_Node | _Path"]):
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
        # with '>' (_NO_RULE where none does); None when no rule ends here.
        self.marks: tuple[_Path, _Path, _Path] | None = None
        self.best = best  # smallest rule index in this subtree (rules are inserted in order)
        self.any_literal: _Tree | None = None  # "?"
        self.wildcard: _Tree | None = None  # "*"
        self.edges: dict[Alternatives, _Node] | None = None  # while building only
        self.more: dict[str, tuple[_Tree, ...]] | None = None
        self.prefixes: tuple[str, ...] | None = None
        self.prefix_keys: tuple[str, ...] = ()
        self.prefix_targets: tuple[_Tree, ...] = ()

    def child(
        self, kind: SegmentKind, literal: str, alternatives: Alternatives | None, index: int
    ) -> _Node:
        if kind is SegmentKind.LITERAL:
            node = self.get(literal)
            if node is None:
                node = self[literal] = _Node(index)
            assert isinstance(node, _Node)  # paths appear only when the set is sealed
            return node
        if kind is SegmentKind.ALTERNATIVES:
            assert alternatives is not None
            if self.edges is None:
                self.edges = {}
            node = self.edges.get(alternatives)
            if node is None:
                node = self.edges[alternatives] = _Node(index)
            return node
        if kind is SegmentKind.ANY_LITERAL:
            if self.any_literal is None:
                self.any_literal = _Node(index)
            assert isinstance(self.any_literal, _Node)
            return self.any_literal
        if self.wildcard is None:
            self.wildcard = _Node(index)
        assert isinstance(self.wildcard, _Node)
        return self.wildcard

    def mark(self, rule: PubRule | SubRule, index: int) -> None:
        """Record that ``rule`` ends here; an earlier rule ending here with its tail wins."""
        end, zero, one = self.marks or (_NO_RULE, _NO_RULE, _NO_RULE)
        tail = rule.tail
        if tail is None:
            if end is _NO_RULE:
                end = _Path(index, rule.text, None)
        elif tail is Tail.ZERO_OR_MORE:
            if zero is _NO_RULE:
                zero = _Path(index, rule.text, tail)
        elif one is _NO_RULE:
            one = _Path(index, rule.text, tail)
        self.marks = (end, zero, one)

    def seal_alternatives(self) -> list[_Node]:
        """Merge the alternatives edges into the lookup structures; returns their nodes."""
        edges = self.edges
        if edges is None:
            return []
        self.edges = None
        more: dict[str, list[_Tree]] = {}
        by_prefix: dict[str, list[_Tree]] = {}
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

    def prefix_children(self, text: str) -> list[_Tree]:
        """Edges with a prefix variant ``q*`` such that ``text`` starts with ``q``.

        For a literal token that is "matches ``q*``"; for a subscription token ``p*`` it is
        D3's "p ⊒ q": the same test.
        """
        return [
            target
            for prefix, target in zip(self.prefix_keys, self.prefix_targets, strict=True)
            if text.startswith(prefix)
        ]

    def subtrees(self) -> list[_Tree]:
        """Every child: literal edges (each once), shared edges, prefix edges, ``?``, ``*``."""
        found: list[_Tree] = list({id(child): child for child in self.values()}.values())
        if self.more is not None:
            found.extend(child for targets in self.more.values() for child in targets)
        found.extend(self.prefix_targets)
        if self.any_literal is not None:
            found.append(self.any_literal)
        if self.wildcard is not None:
            found.append(self.wildcard)
        return found

    def replace_children(self, final: dict[int, _Path]) -> None:
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
                if path is not _NO_RULE:
                    path.text = copies.text(path.text)

    def compressed(self, copies: _Copies) -> _Path | None:
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
            if len(self) or self.prefixes is not None or self.any_literal or self.wildcard:
                return None
            ended = [path for path in self.marks if path is not _NO_RULE]
            return ended[0] if len(ended) == 1 else None
        step: _Step
        child: _Tree | None
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
        if isinstance(child, _Path):
            return child.after(step)
        return _Path(child.best, "", None, (step,), child)


_Tree = _Node | _Path


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
        self._variants: dict[object, _Variants] = {}
        self._steps: dict[tuple[_Step, ...], tuple[_Step, ...]] = {}

    def text(self, text: str) -> str:
        copy = self._strings.get(text)
        if copy is None:
            copy = self._strings[text] = "".join((text, ""))  # a new object, allocated now
        return copy

    def variants(
        self, literals: frozenset[str], prefixes: tuple[str, ...] | None, wild: SegmentKind | None
    ) -> _Variants:
        """One :class:`_Variants` per distinct segment (its strings already copied)."""
        key = (literals, prefixes, wild)
        found = self._variants.get(key)
        if found is None:
            found = self._variants[key] = _Variants(literals, prefixes, wild)
        return found

    def steps(self, steps: tuple[_Step, ...]) -> tuple[_Step, ...]:
        """One copy of a path's steps (their strings and variants already copied)."""
        return self._steps.setdefault(steps, steps)

    def strings(self, strings: tuple[str, ...]) -> tuple[str, ...]:
        """One copy of a tuple of strings: the prefix variants of a node."""
        copy = self._tuples.get(strings)
        if copy is None:
            copy = self._tuples[strings] = tuple(self.text(p) for p in strings)
        return copy


def _seal(root: _Node) -> None:
    """Merge alternatives edges once every rule is in (iterative: no recursion limit).

    The literal dict of a node must be sealed before its alternatives edges are merged into
    it, so the walk collects children before sealing.
    """
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(child for child in node.values() if isinstance(child, _Node))
        stack.extend(node.seal_alternatives())
        if isinstance(node.any_literal, _Node):
            stack.append(node.any_literal)
        if isinstance(node.wildcard, _Node):
            stack.append(node.wildcard)


def _compress(root: _Node, separator: str | None) -> _Tree:
    """Replace every node that :meth:`_Node.compressed` accepts by its path or choice.

    Bottom up, so a path can take the steps of the path below it. Every string the trie
    keeps is the build's own copy (:class:`_Copies`). ``separator`` given (publish sets):
    paths of literal steps keep them as text, ``rest``.
    """
    order: list[_Node] = []  # every node once, parents before children
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            order.append(node)
            stack.extend(child for child in node.subtrees() if isinstance(child, _Node))
    final: dict[int, _Path] = {}
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


def _build(rules: Sequence[PubRule | SubRule], separator: str | None) -> _Tree:
    root = _Node(_NONE)
    for index, rule in enumerate(rules):
        node = root
        if index < node.best:
            node.best = index
        for segment in rule.segments:
            node = node.child(segment.kind, segment.literal, segment.alternatives, index)
        node.mark(rule, index)
    _seal(root)
    return _compress(root, separator)


def _walk_channel(
    node: _Tree, channel: str, tokens: Sequence[str], i: int, pos: int, best: _Path, sep: str
) -> _Path:
    """The first publish rule (before ``best``) whose set contains ``tokens[i:]``, or ``best``.

    ``pos`` is where ``tokens[i]`` starts in ``channel`` (``len(channel) + 1`` past the end),
    for paths of literals, compared in place (they must end a token); a path's steps are
    followed by what its next node accepts, or, at a leaf, by no token (no tail), any
    (``#``), or one or more (``>``; a token may be empty, D11).
    Extra edges (prefix variants, a token leading to several edges) recurse; the edge of the
    literal dict is followed in the loop, so a path of literal segments costs one call.
    Rules are inserted in index order, so a child's ``best`` is only worth comparing once a
    rule has matched (``best`` is not ``_NO_RULE``).
    """
    n = len(tokens)
    while True:
        if type(node) is _Path:
            if best is not _NO_RULE and node.best >= best.best:
                return best
            rest = node.rest
            if rest:  # literal steps, compared in place; they must end a token
                if not channel.startswith(rest, pos):
                    return best
                end = pos + len(rest)
                if end < len(channel) and channel[end] != sep:
                    return best
                i += node.size
                pos = end + 1
            elif node.steps:
                if i + node.size > n:
                    return best
                for step in node.steps:
                    token = tokens[i]
                    if isinstance(step, str):
                        if token != step:
                            return best
                    elif token not in step.literals and (
                        step.prefixes is None or not token.startswith(step.prefixes)
                    ):
                        return best
                    i += 1
                    pos += len(token) + 1
            following = node.next
            if following is not None:
                node = following
                continue
            tail = node.tail  # a leaf: what may follow its steps
            if tail is None:
                return node if i == n else best
            return node if tail is Tail.ZERO_OR_MORE or i < n else best
        marks = node.marks
        if marks is not None:
            end_rule, zero, one = marks
            if zero is not _NO_RULE and zero.best < best.best:
                best = zero
            if i == n:
                return end_rule if end_rule.best < best.best else best
            if one is not _NO_RULE and one.best < best.best:
                best = one
        elif i == n:
            return best
        token = tokens[i]
        i += 1
        next_pos = pos + len(token) + 1
        prefixes = node.prefixes
        if prefixes is not None and token.startswith(prefixes):  # rejects most tokens at once
            for prefix, alt in zip(node.prefix_keys, node.prefix_targets, strict=True):
                if token.startswith(prefix) and (best is _NO_RULE or alt.best < best.best):
                    best = _walk_channel(alt, channel, tokens, i, next_pos, best, sep)
        if node.more is not None:
            for alt in node.more.get(token, ()):
                if best is _NO_RULE or alt.best < best.best:
                    best = _walk_channel(alt, channel, tokens, i, next_pos, best, sep)
        child = node.get(token)
        if child is None or (best is not _NO_RULE and child.best >= best.best):
            return best
        node = child
        pos = next_pos


_STAR_ACCEPTS: Final = frozenset({TokenKind.LITERAL, TokenKind.STAR, TokenKind.PREFIX_STAR})


def _variants_accept(variants: _Variants, token: PatternToken) -> bool:
    """Does a ``?``, ``*`` or alternatives segment accept one subscription token (D1–D3)?"""
    wild = variants.wild
    if wild is not None:
        if wild is SegmentKind.ANY_LITERAL:
            return token.kind is TokenKind.LITERAL  # D1
        return token.kind in _STAR_ACCEPTS  # D2
    if token.kind is TokenKind.LITERAL:
        text = token.text
        return text in variants.literals or (
            variants.prefixes is not None and text.startswith(variants.prefixes)
        )
    if token.kind is TokenKind.PREFIX_STAR:  # D3: p* only under a variant q* with p ⊒ q
        return variants.prefixes is not None and token.text.startswith(variants.prefixes)
    return False


def _steps_accept(path: _Path, tokens: Sequence[PatternToken], i: int) -> bool:
    """Do the path's steps accept ``tokens[i:i + path.size]`` (§3, D1–D3)?"""
    if i + path.size > len(tokens):
        return False
    for step in path.steps:
        token = tokens[i]
        if isinstance(step, str):
            if token.kind is not TokenKind.LITERAL or token.text != step:
                return False
        elif not _variants_accept(step, token):
            return False
        i += 1
    return True


def _walk_pattern(node: _Tree, tokens: Sequence[PatternToken], i: int, best: _Path) -> _Path:
    """The first subscribe rule (before ``best``) accepting ``tokens[i:]`` (§3), or ``best``.

    Every candidate edge but the last recurses; the last is followed in the loop.
    """
    n = len(tokens)
    while True:
        if type(node) is _Path:
            if best is not _NO_RULE and node.best >= best.best:
                return best
            if node.steps:
                if not _steps_accept(node, tokens, i):
                    return best
                i += node.size
            following = node.next
            if following is not None:
                node = following
                continue
            tail = node.tail  # a leaf: what may follow its steps
            if tail is None:
                return node if i == n else best  # D5
            if tail is Tail.ZERO_OR_MORE:
                return node  # D4: '#' accepts any valid rest, including none
            if i < n and not (i == n - 1 and tokens[i].kind is TokenKind.HASH):
                return node  # D4: '>' needs a rest that requires a channel token
            return best
        token = tokens[i] if i < n else None
        marks = node.marks
        if marks is not None:
            end, zero, one = marks
            if zero is not _NO_RULE and zero.best < best.best:
                best = zero  # D4: '#' accepts any valid rest, including none
            if token is None:  # D5
                return end if end is not _NO_RULE and end.best < best.best else best
            if (
                one is not _NO_RULE
                and one.best < best.best
                and not (i == n - 1 and token.kind is TokenKind.HASH)
            ):
                best = one  # D4: '>' needs a rest that requires a channel token
        elif token is None:
            return best
        kind = token.kind
        i += 1
        if kind is TokenKind.LITERAL:
            literal_child = node.get(token.text)  # literal edges and literal variants
            if (
                node.any_literal is None
                and node.wildcard is None
                and node.prefixes is None
                and node.more is None
            ):  # the common case: no branching
                if literal_child is None or (
                    best is not _NO_RULE and literal_child.best >= best.best
                ):
                    return best
                node = literal_child
                continue
            candidates: list[_Tree | None] = [
                node.any_literal,  # D1
                node.wildcard,  # D2
                literal_child,
            ]
            if node.more is not None:
                candidates.extend(node.more.get(token.text, ()))
            if node.prefixes is not None and token.text.startswith(node.prefixes):
                candidates.extend(node.prefix_children(token.text))
        elif kind is TokenKind.STAR:
            candidates = [node.wildcard]  # D2
        elif kind is TokenKind.PREFIX_STAR:
            candidates = [node.wildcard]  # D2
            candidates.extend(node.prefix_children(token.text))  # D3
        else:
            return best  # tail tokens are accepted only by rule tails
        follow: _Tree | None = None
        for child in candidates:
            if child is not None and (best is _NO_RULE or child.best < best.best):
                if follow is not None:
                    best = _walk_pattern(follow, tokens, i, best)
                follow = child
        if follow is None or (best is not _NO_RULE and follow.best >= best.best):
            return best
        node = follow


class _Decisions:
    """A bounded cache of decisions of one immutable rule set: text -> rule text, ``""`` = deny.

    The rule set never changes, so its generation never moves: a new rule set (a new token or
    grant) starts with an empty cache, which is the generation bump of
    :mod:`~edge_broker.matching.decision_cache`. When full it is emptied (as that module does):
    cheap, and a repeating working set refills in a few decisions.
    """

    __slots__ = ("entries", "max_entries")

    def __init__(self, max_entries: int) -> None:
        self.entries: dict[str, str] = {}
        self.max_entries = max_entries

    def store(self, key: str, rule: str | None) -> None:
        if len(self.entries) >= self.max_entries:
            self.entries.clear()
        self.entries[key] = rule or ""


def _decisions(cache_entries: int) -> _Decisions | None:
    if not isinstance(cache_entries, int) or cache_entries < 0:
        raise ValueError(
            f"cache_entries must be an integer >= 0 (0 disables the cache), got {cache_entries!r}"
        )
    return _Decisions(cache_entries) if cache_entries else None


def _check_separators(rules: Sequence[PubRule | SubRule], separator: str) -> None:
    for rule in rules:
        if rule.separator != separator:
            raise ValueError(
                f"rule {rule.text!r} was parsed with separator {rule.separator!r}, "
                f"the set uses {separator!r}"
            )


class PubRuleSet:
    """Publish rules compiled into a trie; :meth:`allowed` costs O(channel depth).

    ``cache_entries`` > 0 keeps up to that many decisions by channel text (repeated
    decisions, a publisher's channels, then cost one dict lookup); 0 (the default) walks the
    trie every time.
    """

    __slots__ = ("separator", "texts", "_root", "_decisions")

    def __init__(
        self,
        rules: Iterable[PubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        self.separator = check_separator(separator)
        parsed = tuple(r if isinstance(r, PubRule) else PubRule.parse(r, separator) for r in rules)
        _check_separators(parsed, separator)
        self.texts: tuple[str, ...] = tuple(rule.text for rule in parsed)  # in order
        self._decisions = _decisions(cache_entries)
        self._root = _build(parsed, separator)  # the parsed rules are not kept

    def allowed(self, channel: str) -> str | None:
        """The text of the first rule whose set contains ``channel``, or ``None``.

        ``channel`` must already be a valid channel (:func:`~edge_broker.matching.names.
        validate_channel`); this is the hot path and does not validate.
        """
        decisions = self._decisions
        if decisions is not None:
            known = decisions.entries.get(channel)
            if known is not None:
                return known or None
        sep = self.separator
        found = _walk_channel(self._root, channel, channel.split(sep), 0, 0, _NO_RULE, sep)
        rule = None if found is _NO_RULE else found.text
        if decisions is not None:
            decisions.store(channel, rule)
        return rule

    def __len__(self) -> int:
        return len(self.texts)


class SubRuleSet:
    """Subscribe rules compiled into a trie; :meth:`allowed` costs O(pattern depth).

    ``cache_entries`` > 0 keeps up to that many decisions by pattern text (patterns given
    parsed are not cached); 0 (the default) walks the trie every time.
    """

    __slots__ = ("separator", "texts", "_root", "_decisions")

    def __init__(
        self,
        rules: Iterable[SubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        self.separator = check_separator(separator)
        parsed = tuple(r if isinstance(r, SubRule) else SubRule.parse(r, separator) for r in rules)
        _check_separators(parsed, separator)
        self.texts: tuple[str, ...] = tuple(rule.text for rule in parsed)  # in order
        self._decisions = _decisions(cache_entries)
        self._root = _build(parsed, None)  # the parsed rules are not kept

    def allowed(self, pattern: str | SubscriptionPattern | Sequence[PatternToken]) -> str | None:
        """The text of the first rule accepting the subscription ``pattern``, or ``None``.

        ``pattern`` is the text the client sent, validated per §2 first (:class:`RuleError`
        when invalid: a syntax error, not a denial, and never cached), or an already parsed
        :class:`SubscriptionPattern` or token sequence.
        """
        decisions = self._decisions
        key = pattern if isinstance(pattern, str) and decisions is not None else None
        if key is not None and decisions is not None:
            known = decisions.entries.get(key)
            if known is not None:
                return known or None
        tokens = subscription_tokens(pattern, self.separator)
        found = _walk_pattern(self._root, tokens, 0, _NO_RULE)
        rule = None if found is _NO_RULE else found.text
        if key is not None and decisions is not None:
            decisions.store(key, rule)
        return rule

    def __len__(self) -> int:
        return len(self.texts)
