"""Runtime subscription patterns (PATTERNS.md §2) as the token kinds that §3 acceptance needs.

Subscribe rules judge the pattern a client sends token by token, so they need each token's
*kind* (literal, ``*``, ``p*``, and as the last token ``#``, ``>``, ``p#``, ``p>``). This module
validates a pattern exactly as §2 says (D9, D10, D13, D15, ``+`` as ``*`` with ``/``) and
returns those kinds; matching patterns against channels and routing belong to the runtime
pattern matcher of this package, not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final

from .errors import RuleError
from .names import check_separator, is_literal, literal_chars_hint

MAX_PATTERN_BYTES: Final = 256  # D9
MAX_PATTERN_TOKENS: Final = 32  # D10
MAX_TOKEN_BYTES: Final = 128  # D10


class TokenKind(Enum):
    LITERAL = "literal"
    STAR = "*"  # exactly one token
    PREFIX_STAR = "p*"  # one token starting with p (p itself included, D13)
    HASH = "#"  # last only: zero or more tokens
    GT = ">"  # last only: one or more tokens
    PREFIX_HASH = "p#"  # last only: a token starting with p, then zero or more
    PREFIX_GT = "p>"  # last only: a token starting with p, then one or more


TAIL_KINDS: Final = frozenset(
    {TokenKind.HASH, TokenKind.GT, TokenKind.PREFIX_HASH, TokenKind.PREFIX_GT}
)


@dataclass(frozen=True, slots=True)
class PatternToken:
    """One token of a subscription pattern; ``text`` is the literal or the prefix ``p``."""

    kind: TokenKind
    text: str = ""


def pattern_tokens(pattern: str, separator: str) -> tuple[PatternToken, ...]:
    """Validate ``pattern`` per §2 and return its tokens; :class:`RuleError` if invalid."""
    check_separator(separator)
    if pattern == "":
        raise RuleError(pattern, "", "a subscription pattern must not be empty")
    size = len(pattern.encode("utf-8"))
    if size > MAX_PATTERN_BYTES:
        raise RuleError(
            pattern, "", f"pattern is {size} bytes; at most {MAX_PATTERN_BYTES} are allowed"
        )
    raw = pattern.split(separator)
    if len(raw) > MAX_PATTERN_TOKENS:
        raise RuleError(
            pattern,
            "",
            f"pattern has {len(raw)} tokens; at most {MAX_PATTERN_TOKENS} are allowed",
        )
    last = len(raw) - 1
    return tuple(_token(pattern, tok, separator, i, last=i == last) for i, tok in enumerate(raw))


def _token(pattern: str, tok: str, separator: str, index: int, *, last: bool) -> PatternToken:
    if tok == "":
        raise RuleError(
            pattern, "", f"empty token at position {index + 1}; remove the extra {separator!r}"
        )
    if len(tok.encode("utf-8")) > MAX_TOKEN_BYTES:
        raise RuleError(pattern, tok, f"token is longer than {MAX_TOKEN_BYTES} bytes")
    if is_literal(tok, separator):
        return PatternToken(TokenKind.LITERAL, tok)
    if tok == "*" or (tok == "+" and separator == "/"):
        return PatternToken(TokenKind.STAR)
    if tok in ("#", ">"):
        if not last:
            raise RuleError(pattern, tok, f"{tok!r} is allowed only in the last token")
        return PatternToken(TokenKind.HASH if tok == "#" else TokenKind.GT)
    head, mark = tok[:-1], tok[-1]
    if mark in "*#>" and is_literal(head, separator):
        if mark == "*":
            return PatternToken(TokenKind.PREFIX_STAR, head)
        if not last:
            raise RuleError(
                pattern, tok, f"{tok!r}: a prefix tail is allowed only in the last token"
            )
        return PatternToken(TokenKind.PREFIX_HASH if mark == "#" else TokenKind.PREFIX_GT, head)
    raise RuleError(pattern, tok, _why_invalid(tok, separator))


def _why_invalid(tok: str, separator: str) -> str:
    if tok == "+":
        return "'+' is the MQTT alias of '*' only with the separator '/'; write '*'"
    if any(c in tok for c in "*#>+"):
        return (
            f"{tok!r}: wildcards are a whole token ('*', '#', '>') or end a literal prefix "
            "('p*', 'p#', 'p>')"
        )
    for char in tok:
        if not is_literal(char, separator):
            return f"{tok!r} contains {char!r}; use {literal_chars_hint(separator)}"
    return f"{tok!r} is not a valid token"


def render(tokens: Sequence[PatternToken], separator: str) -> str:
    """The pattern text of ``tokens`` (``+`` is rendered as ``*``)."""
    out = []
    for token in tokens:
        kind = token.kind
        if kind is TokenKind.LITERAL:
            out.append(token.text)
        elif kind in (TokenKind.STAR, TokenKind.HASH, TokenKind.GT):
            out.append(kind.value)
        else:
            out.append(token.text + kind.value[-1])
    return separator.join(out)
