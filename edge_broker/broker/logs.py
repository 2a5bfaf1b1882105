"""Broker logs: readable text by default, JSON lines with ``--log-format json``.

Records carry structured fields in ``extra`` (``event``, ``client_id``, ``reason_code``,
``reason`` …); the text format appends them as ``key=value``.

Client ids, user names, topics and reason strings come from clients. In the text format one
record is one line whatever they contain (issue 15 item 10): control characters (C0, DEL, C1,
U+2028/U+2029) in the message and in field values are written as ``\\xNN``/``\\uNNNN``, and a
field value that is empty or contains a space, ``=`` or ``"`` is written as a JSON string, so a
client cannot forge a log line or a ``key=value`` field. JSON lines are escaped by ``json``.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time

STANDARD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NEEDS_QUOTES = re.compile('[ ="]')


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_text(text: str) -> str:
    """``text`` on one line: every control character written as an escape."""
    return _CONTROL.sub(_escape_char, text) if _CONTROL.search(text) else text


def _value(value: object) -> str:
    text = str(value)
    if not text or _NEEDS_QUOTES.search(text):
        return escape_text(json.dumps(text, ensure_ascii=False))
    return escape_text(text)


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in STANDARD_ATTRS and v is not None}


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        fields = _fields(record)
        fields.pop("event", None)
        extra = " ".join(f"{k}={_value(v)}" for k, v in fields.items())
        text = f"{stamp}Z {record.levelname} {escape_text(record.getMessage())}"
        if extra:
            text += " " + extra
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return text


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "msg": record.getMessage(),
        }
        data.update(_fields(record))
        if record.exc_info:
            data["exc"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


def setup_logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("edge_broker")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False
