"""Helpers the firmware tests import by name (fixtures live in conftest.py, which tests must
not import: in a full run a bare ``conftest`` may be another directory's)."""

from __future__ import annotations

import socket
from collections.abc import Callable

MicroPythonRunner = Callable[..., str]
"""``run(script, heap=..., timeout=..., mounts={host_dir: "/dir"}) -> stdout`` (conftest's
``micropython`` fixture)."""


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (for a broker that must keep its port
    across a restart)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
