"""Sets of token rules compiled into tries (PATTERNS.md "Matching structures", §3).

:class:`PubRuleSet` answers "may this concrete channel be published to?" and
:class:`SubRuleSet` "may this subscription pattern be sent?", each with the text of the deciding
rule (the first in the given order, for explain and audit) or ``None``. The rules compile into
the compressed trie of :mod:`~edge_broker.matching.token_trie`; a decision walks one path per
matching edge, so it costs O(depth) for any number of rules. Optionally each set keeps a bounded
cache of its decisions (``cache_entries``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from .names import DEFAULT_SEPARATOR, check_separator
from .pattern_tokens import PatternToken, TokenKind
from .subscription_patterns import SubscriptionPattern
from .token_rules import PubRule, SegmentKind, SubRule, Tail, subscription_tokens
from .token_trie import NO_RULE, Path, Trie, Variants, build_trie


def _walk_channel(
    node: Trie, channel: str, tokens: Sequence[str], i: int, pos: int, best: Path, sep: str
) -> Path:
    """The first publish rule (before ``best``) whose set contains ``tokens[i:]``, or ``best``.

    ``pos`` is where ``tokens[i]`` starts in ``channel`` (``len(channel) + 1`` past the end),
    for paths of literals, compared in place (they must end a token); a path's steps are
    followed by what its next node accepts, or, at a leaf, by no token (no tail), any
    (``#``), or one or more (``>``; a token may be empty, D11).
    Extra edges (prefix variants, a token leading to several edges) recurse; the edge of the
    literal dict is followed in the loop, so a path of literal segments costs one call.
    Rules are inserted in index order, so a child's ``best`` is only worth comparing once a
    rule has matched (``best`` is not ``NO_RULE``).
    """
    n = len(tokens)
    while True:
        if type(node) is Path:
            if best is not NO_RULE and node.best >= best.best:
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
            if zero is not NO_RULE and zero.best < best.best:
                best = zero
            if i == n:
                return end_rule if end_rule.best < best.best else best
            if one is not NO_RULE and one.best < best.best:
                best = one
        elif i == n:
            return best
        token = tokens[i]
        i += 1
        next_pos = pos + len(token) + 1
        prefixes = node.prefixes
        if prefixes is not None and token.startswith(prefixes):  # rejects most tokens at once
            for prefix, alt in zip(node.prefix_keys, node.prefix_targets, strict=True):
                if token.startswith(prefix) and (best is NO_RULE or alt.best < best.best):
                    best = _walk_channel(alt, channel, tokens, i, next_pos, best, sep)
        if node.more is not None:
            for alt in node.more.get(token, ()):
                if best is NO_RULE or alt.best < best.best:
                    best = _walk_channel(alt, channel, tokens, i, next_pos, best, sep)
        child = node.get(token)
        if child is None or (best is not NO_RULE and child.best >= best.best):
            return best
        node = child
        pos = next_pos


_STAR_ACCEPTS: Final = frozenset({TokenKind.LITERAL, TokenKind.STAR, TokenKind.PREFIX_STAR})


def _variants_accept(variants: Variants, token: PatternToken) -> bool:
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


def _steps_accept(path: Path, tokens: Sequence[PatternToken], i: int) -> bool:
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


def _walk_pattern(node: Trie, tokens: Sequence[PatternToken], i: int, best: Path) -> Path:
    """The first subscribe rule (before ``best``) accepting ``tokens[i:]`` (§3), or ``best``.

    Every candidate edge but the last recurses; the last is followed in the loop.
    """
    n = len(tokens)
    while True:
        if type(node) is Path:
            if best is not NO_RULE and node.best >= best.best:
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
            if zero is not NO_RULE and zero.best < best.best:
                best = zero  # D4: '#' accepts any valid rest, including none
            if token is None:  # D5
                return end if end is not NO_RULE and end.best < best.best else best
            if (
                one is not NO_RULE
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
                    best is not NO_RULE and literal_child.best >= best.best
                ):
                    return best
                node = literal_child
                continue
            candidates: list[Trie | None] = [
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
        follow: Trie | None = None
        for child in candidates:
            if child is not None and (best is NO_RULE or child.best < best.best):
                if follow is not None:
                    best = _walk_pattern(follow, tokens, i, best)
                follow = child
        if follow is None or (best is not NO_RULE and follow.best >= best.best):
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


class _RuleSet:
    """What both rule sets share: the separator, the rule texts in order, the trie, the cache.

    The parsed rules are checked against the set's separator, compiled, and not kept.
    """

    __slots__ = ("separator", "texts", "_root", "_decisions")

    def __init__(
        self,
        rules: Sequence[PubRule | SubRule],
        separator: str,
        cache_entries: int,
        text_steps: bool,
    ) -> None:
        self.separator = check_separator(separator)
        for rule in rules:
            if rule.separator != separator:
                raise ValueError(
                    f"rule {rule.text!r} was parsed with separator {rule.separator!r}, "
                    f"the set uses {separator!r}"
                )
        if not isinstance(cache_entries, int) or cache_entries < 0:
            raise ValueError(
                f"cache_entries must be an integer >= 0 (0 disables the cache), "
                f"got {cache_entries!r}"
            )
        self.texts: tuple[str, ...] = tuple(rule.text for rule in rules)  # in order
        self._decisions = _Decisions(cache_entries) if cache_entries else None
        self._root: Trie = build_trie(rules, separator if text_steps else None)

    def __len__(self) -> int:
        return len(self.texts)


class PubRuleSet(_RuleSet):
    """Publish rules compiled into a trie; :meth:`allowed` costs O(channel depth).

    ``cache_entries`` > 0 keeps up to that many decisions by channel text (repeated
    decisions, a publisher's channels, then cost one dict lookup); 0 (the default) walks the
    trie every time.
    """

    __slots__ = ()

    def __init__(
        self,
        rules: Iterable[PubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        check_separator(separator)
        parsed = [r if isinstance(r, PubRule) else PubRule.parse(r, separator) for r in rules]
        super().__init__(parsed, separator, cache_entries, text_steps=True)

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
        found = _walk_channel(self._root, channel, channel.split(sep), 0, 0, NO_RULE, sep)
        rule = None if found is NO_RULE else found.text
        if decisions is not None:
            decisions.store(channel, rule)
        return rule


class SubRuleSet(_RuleSet):
    """Subscribe rules compiled into a trie; :meth:`allowed` costs O(pattern depth).

    ``cache_entries`` > 0 keeps up to that many decisions by pattern text (patterns given
    parsed are not cached); 0 (the default) walks the trie every time.
    """

    __slots__ = ()

    def __init__(
        self,
        rules: Iterable[SubRule | str],
        separator: str = DEFAULT_SEPARATOR,
        *,
        cache_entries: int = 0,
    ) -> None:
        check_separator(separator)
        parsed = [r if isinstance(r, SubRule) else SubRule.parse(r, separator) for r in rules]
        super().__init__(parsed, separator, cache_entries, text_steps=False)

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
        found = _walk_pattern(self._root, tokens, 0, NO_RULE)
        rule = None if found is NO_RULE else found.text
        if key is not None and decisions is not None:
            decisions.store(key, rule)
        return rule
