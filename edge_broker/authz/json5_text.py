"""JSON5 text (a Zenoh ``config.json5``) read quickly: rewritten to JSON token by token, then
parsed by the standard ``json`` module; anything the rewrite does not recognise goes to the
``json5`` package (the reference implementation, whose error messages are kept).

Why: the ``json5`` package is a pure-Python PEG parser: a 10k-rule ``access_control`` section
(about 1.5 MB) takes it two minutes, against well under a second here; the broker reads the
file at start and at every reload.

The rewrite handles what JSON5 adds to JSON (spec https://spec.json5.org): ``//`` and ``/* */``
comments, unquoted (identifier) keys, single-quoted strings, escapes JSON lacks, trailing
commas, ``+``/hex/``.5``/``5.`` numbers, ``Infinity`` and ``NaN``. Tokens with escapes or
unusual number forms are converted by ``json5`` itself, one token at a time, so the result is
the same as ``json5.loads`` (checked by a property test on generated documents), with one
deliberate difference: an escaped UTF-16 surrogate pair (``"\\ud83d\\ude00"``) is one character,
as in ECMAScript and JSON, where the ``json5`` package keeps two lone surrogates.
"""

from __future__ import annotations

import json
import re
from typing import Any

_TOKEN = re.compile(
    r"""
    (?P<ws>[\s\ufeff]+)
  | (?P<comment>//[^\n\r\u2028\u2029]*|/\*.*?\*/)
  | (?P<dq>"(?:[^"\\\n\r]|\\.)*")
  | (?P<sq>'(?:[^'\\\n\r]|\\.)*')
  | (?P<num>[+-]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|Infinity|NaN))
  | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<punct>[{}\[\]:,])
    """,
    re.VERBOSE | re.DOTALL,
)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?\Z")
_PLAIN_STRING = re.compile(r'"[^"\\\x00-\x1f]*"\Z')


class _Unsupported(Exception):
    """The rewrite gives up: ``json5`` parses the whole text instead."""


def _rewrite(text: str) -> str:
    out: list[str] = []
    pos, end = 0, len(text)
    match = _TOKEN.match
    key_expected = False  # an unquoted identifier was quoted: it must be a key (":" follows)
    while pos < end:
        m = match(text, pos)
        if m is None:
            raise _Unsupported(pos)
        pos = m.end()
        kind = m.lastgroup
        token = m.group()
        if kind == "ws" or kind == "comment":
            continue
        if key_expected and token != ":":
            raise _Unsupported(pos)  # an identifier used as a value: json5 gives the error
        key_expected = False
        if kind == "punct":
            if token in "}]" and len(out) > 1 and out[-1] == "," and out[-2] not in "{[":
                out.pop()  # a trailing comma (after an element: "{,}" stays invalid)
            out.append(token)
        elif kind == "dq":
            out.append(token if _PLAIN_STRING.match(token) else json.dumps(_json5_loads(token)))
        elif kind == "sq":
            out.append(json.dumps(_json5_loads(token)))
        elif kind == "num":
            # hex, "+1", ".5", "5.", "Infinity", "NaN": json.dumps writes NaN/Infinity as the
            # json module reads them back
            out.append(token if _JSON_NUMBER.match(token) else json.dumps(_json5_loads(token)))
        elif token in ("true", "false", "null"):
            out.append(token)
        else:
            out.append(json.dumps(token))
            key_expected = True
    if key_expected:
        raise _Unsupported(pos)
    return " ".join(out)  # separated: "[1 2]" must not become "[12]"


def loads_json5(text: str) -> Any:
    """``json5.loads(text)``, fast for large documents; raises ``ValueError`` on invalid text
    (the ``json5`` package's message)."""
    try:
        converted = _rewrite(text)
        return json.loads(converted)
    except (_Unsupported, ValueError, RecursionError):
        return _json5_loads(text)


def _json5_loads(text: str) -> Any:
    """The ``json5`` package's reader, imported on first use: only text the fast rewrite above
    cannot take needs it (about 0.6 MB of a fresh broker, issue 32)."""
    import json5

    return json5.loads(text)
