"""Waiting in tests: poll a condition until it holds; the deadline only bounds a hang.

A test that waits for something a broker, a client, a process or a file does next waits for that
very thing here instead of sleeping a guessed time: it goes on the moment the condition holds
(no time lost on a quiet machine) and a condition that does not hold in time fails naming what
was awaited (no flake on a busy one). Timing itself is tested on the in-memory broker's fake
clock (tests/broker/engine_harness.py), not here."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

POLL_INTERVAL = 0.05  # seconds between two looks at the condition


def wait_for(
    condition: Callable[[], T],
    timeout: float = 10.0,
    what: str | Callable[[], str] = "the condition",
    interval: float = POLL_INTERVAL,
) -> T:
    """``condition()``'s first truthy value, asked every ``interval`` seconds; AssertionError
    naming ``what`` (a text, or a function giving one, e.g. a log's tail) after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what() if callable(what) else what
            raise AssertionError(f"not within {timeout} s: {said}")
        time.sleep(interval)


class Logged(Protocol):
    """A broker under test (tests/conftest.py's RunningBroker): what it has logged so far."""

    def log(self) -> str: ...


def wait_for_log(b: Logged, text: str, count: int = 1, timeout: float = 10.0) -> str:
    """The broker's log once it holds ``text`` at least ``count`` times."""
    return wait_for(
        lambda: (log := b.log()).count(text) >= count and log,
        timeout,
        lambda: f"{text!r} logged {count} time(s):\n{b.log()[-3000:]}",
    )


def wait_for_log_match(
    b: Logged, pattern: str | re.Pattern[str], timeout: float = 10.0
) -> re.Match[str]:
    """The first match of the regular expression ``pattern`` in the broker's log, once there."""
    return wait_for(
        lambda: re.search(pattern, b.log()),
        timeout,
        lambda: f"{pattern!r} in the log:\n{b.log()[-3000:]}",
    )


def paho_subscribe(client: Any, topic: str, qos: int = 0, timeout: float = 10.0) -> None:
    """SUBSCRIBE a paho client whose network loop runs, and wait for the broker's SUBACK (from
    then on every message published to ``topic`` reaches it)."""
    acked: set[int] = set()
    chained = client.on_subscribe

    def on_subscribe(c: Any, userdata: Any, mid: int, *rest: Any) -> None:
        acked.add(mid)
        if chained is not None:
            chained(c, userdata, mid, *rest)

    client.on_subscribe = on_subscribe
    try:
        _, mid = client.subscribe(topic, qos)
        wait_for(lambda: mid in acked, timeout, f"the SUBACK to {topic!r}")
    finally:
        client.on_subscribe = chained
