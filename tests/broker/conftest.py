"""Fixtures of the broker tests (tests/conftest.py starts the brokers; this file adds clients to
them, and the in-memory broker of engine_harness.py for tests of protocol, not sockets)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_raw import RawClients
from engine_harness import MemoryBroker, memory_broker


@pytest.fixture
def client(module_broker: Any) -> Iterator[RawClients]:
    """``client(level=5)`` → a new :class:`broker_raw.RawClient` to the module's broker, closed
    at teardown. Modules that need another default level or broker define their own."""
    with RawClients(module_broker, level=5) as make:
        yield make


@pytest.fixture
def mb() -> Iterator[MemoryBroker]:
    """The real broker in memory with the default configuration and a fake clock. Modules that
    need another configuration define their own."""
    yield from memory_broker()
