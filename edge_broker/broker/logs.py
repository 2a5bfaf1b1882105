"""Broker logs: readable text by default, JSON lines with ``--log-format json``.

Records carry structured fields in ``extra`` (``event``, ``client_id``, ``reason_code``,
``reason`` …); the text format appends them as ``key=value``.
"""

from __future__ import annotations

import json
import logging
import sys
import time

STANDARD_ATTRS = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {
    "message", "asctime", "taskName"}


def _fields(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in STANDARD_ATTRS and v is not None}


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        fields = _fields(record)
        fields.pop("event", None)
        extra = " ".join(f"{k}={v}" for k, v in fields.items())
        text = f"{stamp}Z {record.levelname} {record.getMessage()}"
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
