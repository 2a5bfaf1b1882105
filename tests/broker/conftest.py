"""Fixtures of the broker tests (tests/conftest.py starts the brokers; this file only adds
clients to them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from broker_raw import RawClients


@pytest.fixture
def client(module_broker: Any) -> Iterator[RawClients]:
    """``client(level=5)`` → a new :class:`broker_raw.RawClient` to the module's broker, closed
    at teardown. Modules that need another default level or broker define their own."""
    with RawClients(module_broker, level=5) as make:
        yield make
