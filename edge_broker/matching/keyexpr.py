"""Zenoh key expressions: validity, canonical form, inclusion and intersection (PATTERNS.md §5).

A key expression is a ``/``-separated list of non-empty chunks and denotes a SET of keys (a key
is a key expression without wildcards). Chunk kinds, with the semantics of Zenoh 1.x (the
eclipse-zenoh package is the test oracle, ``tests/matching/test_keyexpr_oracle.py``):

- ``*``  one chunk (any chunk that does not start with ``@``);
- ``**`` zero or more such chunks;
- a chunk containing ``$*`` (``d$*``, ``$*-x$*``): one chunk where each ``$*`` stands for any
  substring, the empty one included (``a$*`` includes ``a``);
- a chunk starting with ``@`` is *verbatim*: only the identical chunk matches it; ``*``, ``**``
  and ``$*`` never do, and a ``$*`` inside a verbatim chunk is literal text;
- any other chunk is literal.

Validity (Zenoh 1.x ``keyexpr::try_from``): not empty; no empty chunk (so no leading, trailing or
double ``/``); no ``#`` and no ``?``; ``$`` only as ``$*``; ``*`` only as a whole ``*``/``**``
chunk or right after ``$``; and the expression is *canonical*: no ``$*$*``, no lone ``$*``
chunk (write ``*``), no ``**/**`` (write ``**``), no ``**/*`` (write ``*/**``). Canonical forms
make string equality the same as set equality. :func:`canonize` rewrites an expression into its
canonical form as the Key Expressions RFC states it (Zenoh 1.10's own ``autocanonize`` panics or
fails on some ``$*$*`` inputs; ours does not: documented deviation, tested).

``includes(a, b)``: every key of ``b`` is a key of ``a``. ``intersects(a, b)``: some key is in
both. Parse once into an immutable :class:`KeyExpr`; the relations are computed on its chunks.
Errors are :class:`~edge_broker.matching.errors.RuleError` naming the expression, the chunk and
what to change.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from .errors import RuleError

SEPARATOR = "/"
STAR_DSL = "$*"


class ChunkKind(IntEnum):
    LITERAL = 0
    VERBATIM = 1  # starts with "@": only the identical chunk matches it
    STAR = 2  # "*"
    DOUBLE_STAR = 3  # "**"
    PATTERN = 4  # contains "$*" (and does not start with "@")


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk. For a ``PATTERN`` chunk, ``parts`` are the literal pieces around each ``$*``
    (``a$*b$*`` -> ``("a", "b", "")``); for other kinds ``parts`` is empty."""

    text: str
    kind: ChunkKind
    parts: tuple[str, ...] = ()

    @property
    def prefix(self) -> str:
        """The literal text every key chunk this chunk matches starts with."""
        return self.parts[0] if self.kind is ChunkKind.PATTERN else self.text


def _chunk_error(chunk: str) -> str | None:
    """Why ``chunk`` cannot appear in a canonical key expression, or ``None``."""
    if chunk == "":
        return "empty chunks are forbidden: no leading, trailing or double '/'"
    if chunk in ("*", "**"):
        return None
    if "#" in chunk or "?" in chunk:
        return (
            "'#' and '?' are forbidden in key expressions "
            "(MQTT '#' is written '**', MQTT '+' is written '*')"
        )
    i = 0
    n = len(chunk)
    while i < n:
        c = chunk[i]
        if c == "$":
            if i + 1 >= n or chunk[i + 1] != "*":
                return "'$' is only allowed as part of '$*'"
            if i + 2 < n and chunk[i + 2] == "$":
                return "'$*$*' is not canonical: write a single '$*'"
            i += 2
            continue
        if c == "*":
            return "'*' may only be a whole chunk ('*' or '**') or follow '$' ('$*')"
        i += 1
    if chunk == STAR_DSL:
        return "a lone '$*' chunk is not canonical: write '*'"
    return None


def _make_chunk(text: str) -> Chunk:
    if text == "*":
        return Chunk(text, ChunkKind.STAR)
    if text == "**":
        return Chunk(text, ChunkKind.DOUBLE_STAR)
    if text.startswith("@"):
        return Chunk(text, ChunkKind.VERBATIM)
    if STAR_DSL in text:
        return Chunk(text, ChunkKind.PATTERN, tuple(text.split(STAR_DSL)))
    return Chunk(text, ChunkKind.LITERAL)


def _parse_chunks(expr: str) -> tuple[Chunk, ...]:
    if not isinstance(expr, str):
        raise RuleError(repr(expr), "", "a key expression must be a string")
    if expr == "":
        raise RuleError(expr, "", "a key expression must not be empty")
    texts = expr.split(SEPARATOR)
    chunks: list[Chunk] = []
    previous_double = False
    for text in texts:
        if text and "$" not in text and "*" not in text and "#" not in text and "?" not in text:
            # The common case, a plain literal or verbatim chunk: no character-level checks.
            previous_double = False
            chunks.append(Chunk(text, ChunkKind.VERBATIM if text[0] == "@" else ChunkKind.LITERAL))
            continue
        reason = _chunk_error(text)
        if reason is not None:
            raise RuleError(expr, text, reason)
        if previous_double and text == "**":
            raise RuleError(expr, text, "'**/**' is not canonical: write a single '**'")
        if previous_double and text == "*":
            raise RuleError(expr, text, "'**/*' is not canonical: write '*/**'")
        previous_double = text == "**"
        chunks.append(_make_chunk(text))
    return tuple(chunks)


def canonize(expr: str) -> str:
    """The canonical form of ``expr`` (Key Expressions RFC, "canon form"), validated.

    ``$*$*`` -> ``$*``; a ``$*`` chunk -> ``*``; in every run of ``*``/``**`` chunks the single
    stars come first and the double stars collapse into one (``**/*/**`` -> ``*/**``).
    Raises :class:`RuleError` when no canonical form exists (empty chunk, ``#``, stray ``$``...).
    """
    if not isinstance(expr, str):
        raise RuleError(repr(expr), "", "a key expression must be a string")
    text = expr
    while "$*$*" in text:
        text = text.replace("$*$*", "$*")
    out: list[str] = []
    stars = 0
    double = False
    for chunk in text.split(SEPARATOR):
        if chunk in ("*", STAR_DSL):
            stars += 1
            continue
        if chunk == "**":
            double = True
            continue
        out.extend(["*"] * stars)
        if double:
            out.append("**")
        stars, double = 0, False
        out.append(chunk)
    out.extend(["*"] * stars)
    if double:
        out.append("**")
    result = SEPARATOR.join(out)
    try:
        _parse_chunks(result)
    except RuleError as exc:
        raise RuleError(expr, exc.segment, exc.reason) from None
    return result


@dataclass(frozen=True, slots=True)
class KeyExpr:
    """A valid, canonical key expression parsed into chunks. Build with :meth:`parse`
    (strict: refuses non-canonical text, as Zenoh does) or :meth:`autocanonize`."""

    text: str
    chunks: tuple[Chunk, ...]

    @classmethod
    def parse(cls, expr: str) -> KeyExpr:
        return cls(expr, _parse_chunks(expr))

    @classmethod
    def autocanonize(cls, expr: str) -> KeyExpr:
        return cls.parse(canonize(expr))

    @property
    def is_wild(self) -> bool:
        """True when the expression denotes more than one key (has ``*``, ``**`` or ``$*``)."""
        return any(c.kind >= ChunkKind.STAR for c in self.chunks)

    def includes(self, other: KeyExpr) -> bool:
        return _includes(self.chunks, other.chunks)

    def intersects(self, other: KeyExpr) -> bool:
        return _intersects(self.chunks, other.chunks)

    def __str__(self) -> str:
        return self.text


def as_keyexpr(expr: KeyExpr | str) -> KeyExpr:
    return expr if isinstance(expr, KeyExpr) else KeyExpr.parse(expr)


def is_valid(expr: str) -> bool:
    """True when ``expr`` is a valid canonical key expression."""
    try:
        _parse_chunks(expr)
    except RuleError:
        return False
    return True


def includes(a: KeyExpr | str, b: KeyExpr | str) -> bool:
    """True when the set of keys of ``a`` contains every key of ``b``."""
    return as_keyexpr(a).includes(as_keyexpr(b))


def intersects(a: KeyExpr | str, b: KeyExpr | str) -> bool:
    """True when some key belongs to both ``a`` and ``b``."""
    return as_keyexpr(a).intersects(as_keyexpr(b))


# --- chunk-level relations -------------------------------------------------------------------


def pattern_includes(parts: tuple[str, ...], text: str) -> bool:
    """True when the ``$*`` pattern with literal ``parts`` matches every string that ``text``
    matches. ``text`` is a literal chunk or a pattern chunk written out (its ``$*`` kept as
    text): the parts never contain ``$``, so they can only match ``text``'s literal pieces,
    which are present in every string ``text`` denotes; leftmost matching is then exact."""
    head, tail = parts[0], parts[-1]
    if not text.startswith(head):
        return False
    rest = text[len(head) :]
    if not rest.endswith(tail) or len(rest) < len(tail):
        return False
    rest = rest[: len(rest) - len(tail)]
    position = 0
    for needle in parts[1:-1]:
        found = rest.find(needle, position)
        if found < 0:
            return False
        position = found + len(needle)
    return True


def chunk_includes(rule: Chunk, request: Chunk) -> bool:
    """Chunk-level inclusion for chunks that are not ``**``."""
    if rule.text == request.text:
        return True
    if rule.kind is ChunkKind.VERBATIM or request.kind is ChunkKind.VERBATIM:
        return False
    if rule.kind is ChunkKind.STAR:
        return True
    if rule.kind is ChunkKind.PATTERN and request.kind is not ChunkKind.STAR:
        return pattern_includes(rule.parts, request.text)
    return False


def _glob_tokens(chunk: Chunk) -> list[str | None]:
    """A chunk as a list of characters with ``None`` for each ``$*``."""
    tokens: list[str | None] = []
    for i, part in enumerate(chunk.parts if chunk.kind is ChunkKind.PATTERN else (chunk.text,)):
        if i:
            tokens.append(None)
        tokens.extend(part)
    return tokens


def chunk_intersects(a: Chunk, b: Chunk) -> bool:
    """Chunk-level intersection for chunks that are not ``**``: is there one non-verbatim
    chunk both match (or are both the same verbatim chunk)?"""
    if a.text == b.text:
        return True
    if a.kind is ChunkKind.VERBATIM or b.kind is ChunkKind.VERBATIM:
        return False
    if a.kind is ChunkKind.STAR or b.kind is ChunkKind.STAR:
        return True
    if a.kind is ChunkKind.LITERAL and b.kind is ChunkKind.LITERAL:
        return False
    if a.kind is ChunkKind.LITERAL:  # a single string: does the pattern match it?
        return pattern_includes(b.parts, a.text)
    if b.kind is ChunkKind.LITERAL:
        return pattern_includes(a.parts, b.text)
    # Two globs over characters: a common string exists. Neither starts with "@" (not
    # verbatim), and a string both match can be made non-empty and "@"-free at its start
    # (both then begin with "$*" and absorb any first character).
    x, y = _glob_tokens(a), _glob_tokens(b)
    return _solve(len(x), len(y), lambda i, j, rec: _glob_step(x, y, i, j, rec))


def _glob_step(
    x: list[str | None], y: list[str | None], i: int, j: int, rec: Callable[[int, int], bool]
) -> bool:
    if i == len(x) and j == len(y):
        return True
    if i < len(x) and x[i] is None:
        if rec(i + 1, j):
            return True
        return j < len(y) and rec(i, j + 1)
    if j < len(y) and y[j] is None:
        if rec(i, j + 1):
            return True
        return i < len(x) and rec(i + 1, j)
    if i == len(x) or j == len(y):
        return False
    return x[i] == y[j] and rec(i + 1, j + 1)


def _solve(n: int, m: int, step: Callable[[int, int, Callable[[int, int], bool]], bool]) -> bool:
    """Evaluate a recurrence over cells (i, j), 0 <= i <= n, 0 <= j <= m, whose cell reads only
    cells with a larger i or j; bottom-up, so no recursion limit whatever the lengths."""
    table = [[False] * (m + 1) for _ in range(n + 1)]

    def get(i: int, j: int) -> bool:
        return table[i][j]

    for i in range(n, -1, -1):
        row = table[i]
        for j in range(m, -1, -1):
            row[j] = step(i, j, get)
    return table[0][0]


# --- expression-level relations --------------------------------------------------------------


def _trim(
    a: tuple[Chunk, ...],
    b: tuple[Chunk, ...],
    fixed: Callable[[Chunk, Chunk], bool | None],
) -> tuple[tuple[Chunk, ...], tuple[Chunk, ...]] | None:
    """Strip the leading and trailing chunk pairs that must face each other.

    ``fixed(x, y)`` says whether the pair is forced (``None``: not forced, stop) and if so
    whether it is compatible; ``None`` comes back when a forced pair is not. Only ``**``
    branches, so the remaining middle is what the table of :func:`_solve` must explore."""
    start = 0
    while start < len(a) and start < len(b):
        verdict = fixed(a[start], b[start])
        if verdict is None:
            break
        if not verdict:
            return None
        start += 1
    end_a, end_b = len(a), len(b)
    while end_a > start and end_b > start:
        verdict = fixed(a[end_a - 1], b[end_b - 1])
        if verdict is None:
            break
        if not verdict:
            return None
        end_a -= 1
        end_b -= 1
    return a[start:end_a], b[start:end_b]


def _includes_pair(r: Chunk, q: Chunk) -> bool | None:
    if r.kind is ChunkKind.DOUBLE_STAR:
        return None
    return q.kind is not ChunkKind.DOUBLE_STAR and chunk_includes(r, q)


def _intersects_pair(x: Chunk, y: Chunk) -> bool | None:
    if x.kind is ChunkKind.DOUBLE_STAR or y.kind is ChunkKind.DOUBLE_STAR:
        return None
    return chunk_intersects(x, y)


def _includes(rule: tuple[Chunk, ...], request: tuple[Chunk, ...]) -> bool:
    if rule == request:
        return True
    # A rule chunk other than "**" faces exactly one request chunk, the ends included.
    trimmed = _trim(rule, request, _includes_pair)
    if trimmed is None:
        return False
    rule, request = trimmed

    def step(i: int, j: int, rec: Callable[[int, int], bool]) -> bool:
        if i == len(rule):
            return j == len(request)
        r = rule[i]
        if r.kind is ChunkKind.DOUBLE_STAR:
            # "**" covers zero chunks, or absorbs the next request chunk (which may itself be
            # "*", "**" or a pattern) unless that chunk is verbatim.
            if rec(i + 1, j):
                return True
            return j < len(request) and request[j].kind is not ChunkKind.VERBATIM and rec(i, j + 1)
        if j == len(request):
            return False
        q = request[j]
        if q.kind is ChunkKind.DOUBLE_STAR:
            return False
        return chunk_includes(r, q) and rec(i + 1, j + 1)

    return _solve(len(rule), len(request), step)


def _intersects(a: tuple[Chunk, ...], b: tuple[Chunk, ...]) -> bool:
    if a == b:
        return True
    trimmed = _trim(a, b, _intersects_pair)
    if trimmed is None:
        return False
    a, b = trimmed

    def step(i: int, j: int, rec: Callable[[int, int], bool]) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i].kind is ChunkKind.DOUBLE_STAR:
            if rec(i + 1, j):
                return True
            return j < len(b) and b[j].kind is not ChunkKind.VERBATIM and rec(i, j + 1)
        if j < len(b) and b[j].kind is ChunkKind.DOUBLE_STAR:
            if rec(i, j + 1):
                return True
            return i < len(a) and a[i].kind is not ChunkKind.VERBATIM and rec(i + 1, j)
        if i == len(a) or j == len(b):
            return False
        return chunk_intersects(a[i], b[j]) and rec(i + 1, j + 1)

    return _solve(len(a), len(b), step)
