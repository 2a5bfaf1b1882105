"""When the log calls fsync, and what an acknowledged append promises (issue 6, issue 8).

- ``always`` (the default): an append returns only after its record is written and fdatasync'ed.
  Concurrent appends share one fsync (group commit), so throughput grows with concurrency while
  every acknowledgement (PUBACK 0x00, a stored claim) is a promise that survives power loss.
- ``interval`` (e.g. ``0.05`` or ``"50ms"``): an append returns once the record is written to the
  OS page cache; the log fsyncs at most ``interval`` seconds later. A crash of the broker process
  loses nothing (the kernel still holds the data), but a power loss or kernel crash can lose the
  last ``interval`` of acknowledged records. Much faster on SD cards, where one fsync costs
  milliseconds. The timer runs with the async API; the synchronous API fsyncs on the first
  append after ``interval`` has passed, on ``sync()`` and on close.
- ``never``: fsync only on close, compaction and explicit ``sync()``. For tests and benchmarks,
  or data that may be lost (QoS 0 state).

Per append, ``durable=False`` opts one record out of the fsync under any policy (QoS 0 retained
messages next to QoS 1/2 ones in the same log); the next durable append's fsync, a ``sync()`` or
the close covers it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .errors import StoreError

Mode = Literal["always", "interval", "never"]


@dataclass(frozen=True, slots=True)
class Durability:
    """A parsed fsync policy; ``interval`` is in seconds and only meaningful in interval mode."""

    mode: Mode = "always"
    interval: float = 0.0

    @classmethod
    def parse(cls, value: Durability | str | float) -> Durability:
        """Accept ``"always"``, ``"never"`` (or ``"none"``), seconds, ``"50ms"`` or ``"0.05s"``."""
        if isinstance(value, Durability):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            if text == "always":
                return cls("always")
            if text in ("never", "none"):
                return cls("never")
            scale = 1.0
            if text.endswith("ms"):
                text, scale = text[:-2], 0.001
            elif text.endswith("s"):
                text = text[:-1]
            try:
                seconds = float(text) * scale
            except ValueError:
                raise StoreError(
                    f"fsync policy {value!r} is not understood; use 'always', 'never', "
                    "or an interval such as '50ms' or 0.05"
                ) from None
            return cls._interval(seconds, value)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise StoreError(
                f"fsync policy {value!r} has type {type(value).__name__}; use 'always', 'never', "
                "or an interval in seconds"
            )
        return cls._interval(float(value), value)

    @classmethod
    def _interval(cls, seconds: float, original: object) -> Durability:
        if not math.isfinite(seconds) or seconds <= 0 or seconds > 60:
            raise StoreError(
                f"fsync interval {original!r} must be more than 0 and at most 60 seconds"
            )
        return cls("interval", seconds)
