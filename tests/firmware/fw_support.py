"""Helpers the firmware tests import by name (fixtures live in conftest.py, which tests must
not import: in a full run a bare ``conftest`` may be another directory's)."""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

try:  # `python -m pytest` (scripts/test) has the repository root on sys.path
    from tests.conftest import RunningBroker, start_broker
except ModuleNotFoundError:  # a bare `pytest`: tests/ is on sys.path, as the module conftest
    from conftest import RunningBroker, start_broker  # type: ignore[no-redef]

MicroPythonRunner = Callable[..., str]
"""``run(script, heap=..., timeout=..., mounts={host_dir: "/dir"}) -> stdout`` (conftest's
``micropython`` fixture)."""


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for a broker that must keep its port
    across a restart)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_broker(workdir: Path, config: dict[str, Any] | str) -> Iterator[RunningBroker]:
    """The real broker (tests/conftest.py's start_broker) for a module-scoped fixture: one
    start shared by the tests of a module that use distinct client ids and topics."""
    broker = start_broker(workdir, config)
    try:
        yield broker
    finally:
        broker.stop(signal.SIGTERM if broker.alive() else signal.SIGKILL, timeout=5)
