"""Canonical JSON for SMOKER claims (SMOKER.md "What is signed").

The signed bytes are the restriction serialised with keys sorted at every level, no whitespace,
and non-ASCII characters written as themselves (UTF-8), exactly what CPython gives with
``json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``. MicroPython's
json.dumps can neither sort keys nor drop the spaces, so this module writes the JSON itself.
Floats are refused: CPython and MicroPython print them differently, and claims have none.
"""

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
}


def _string(s: str, out: list[str]) -> None:
    out.append('"')
    start = 0
    for i, ch in enumerate(s):
        if ch in _ESCAPES or ch < " ":
            out.append(s[start:i])
            out.append(_ESCAPES.get(ch) or "\\u%04x" % ord(ch))
            start = i + 1
    out.append(s[start:])
    out.append('"')


def _value(obj: object, out: list[str]) -> None:
    if obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, str):
        _string(obj, out)
    elif isinstance(obj, int):
        out.append(str(obj))
    elif isinstance(obj, dict):
        out.append("{")
        first = True
        for key in sorted(obj):
            if not isinstance(key, str):
                raise TypeError("canonical JSON keys must be str, got %r" % (key,))
            if not first:
                out.append(",")
            first = False
            _string(key, out)
            out.append(":")
            _value(obj[key], out)
        out.append("}")
    elif isinstance(obj, (list, tuple)):
        out.append("[")
        for i, item in enumerate(obj):
            if i:
                out.append(",")
            _value(item, out)
        out.append("]")
    else:
        raise TypeError("canonical JSON has no form for %s values (%r)" % (type(obj).__name__, obj))


def dumps(obj: object) -> str:
    """The canonical JSON text of ``obj`` (dict, list, tuple, str, int, bool, None)."""
    out: list[str] = []
    _value(obj, out)
    return "".join(out)


def dumpb(obj: object) -> bytes:
    """The canonical JSON of ``obj`` as UTF-8 bytes: what a claim signature covers."""
    return dumps(obj).encode("utf-8")
