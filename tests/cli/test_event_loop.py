"""Which event loop ``edge-broker run`` runs on: uvloop (the optional ``speed`` extra) when it
is installed, asyncio's own otherwise, and asyncio's own whenever a listener uses TLS: under
uvloop 0.23 a TLS handshake never finishes once the process has had a signal (SIGHUP rotates
the certificates; found with tests/broker/test_tls_reload.py run under uvloop)."""

from __future__ import annotations

import logging

import pytest

from edge_broker.cli.broker import event_loop
from edge_broker.config import parse_config


def test_uvloop_when_installed_and_no_listener_uses_tls() -> None:
    config = parse_config({"listeners": [{"name": "plain", "port": 0}]})
    assert event_loop(config, installed=True) == "uvloop"
    assert event_loop(config, installed=False) == "asyncio"


@pytest.mark.parametrize(
    "listener",
    [
        {"name": "secure", "port": 0, "transport": "tls"},
        {"name": "secure", "port": 0, "transport": "websocket", "websocket_tls": True},
    ],
)
def test_a_tls_listener_keeps_asyncio_and_says_why(
    listener: dict[str, object], tmp_path: object, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.ops.tls_files import make_cert

    cert, key = make_cert(tmp_path, "server")  # type: ignore[arg-type]
    config = parse_config(
        {
            "listeners": [
                {"name": "plain", "port": 0},
                {**listener, "tls_cert": str(cert), "tls_key": str(key)},
            ]
        }
    )
    with caplog.at_level(logging.INFO):
        assert event_loop(config, installed=True) == "asyncio"
    assert "listener secure uses TLS" in caplog.text
    assert event_loop(config, installed=False) == "asyncio"
