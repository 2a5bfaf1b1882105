"""Fixtures of the authorization tests (tests/conftest.py starts the brokers)."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import RunningBroker, start_broker

# token_broker (and the token_test_keys it imports) live in tests/auth and import each other
# by bare name.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "auth"))
from token_broker import token_config  # noqa: E402


@pytest.fixture(scope="module", params=["/", "."], ids=["slash", "dot"])
def seed001_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningBroker, str]]:
    """A token broker whose listener takes seed 001's runtime subscription patterns, once with
    the '/' and once with the '.' separator: ``(broker, separator)``. One per test module."""
    sep = str(request.param)
    directory = tmp_path_factory.mktemp("seed001")
    b = start_broker(directory, token_config(directory, separator=sep, patterns="seed001"))
    yield b, sep
    b.stop(signal.SIGKILL if b.alive() else signal.SIGTERM, timeout=5)
