"""The firmware client over TLS (``ssl_context=``) against the real broker's TLS listener,
with SMOKER authentication on top: the path a device takes outside a trusted LAN."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import pytest
from smokermqtt import ed25519
from smokermqtt.client import MQTTClient

from edge_broker.auth.methods import AUTHENTICATOR_FACTORIES
from tests.ops.tls_files import make_pki

pytestmark = pytest.mark.skipif(
    "smoker" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the smoker authentication method yet",
)


@pytest.fixture(scope="module")
def server_pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("fw-pki")
    return make_pki(d, {"server": "localhost"}, ca_cn="fw-test-ca")


def test_smoker_over_tls(broker_factory: Any, server_pki: Path, tmp_path: Path) -> None:
    b = broker_factory(
        {
            "listeners": [
                {
                    "name": "tls",
                    "bind": "127.0.0.1",
                    "transport": "tls",
                    "tls_cert": str(server_pki / "server.pem"),
                    "tls_key": str(server_pki / "server.key"),
                    "auth_methods": ["smoker"],
                }
            ],
            "claims": {"store_dir": str(tmp_path / "claims")},
        }
    )
    context = ssl.create_default_context(cafile=str(server_pki / "ca.pem"))
    got: list[tuple[str, bytes]] = []
    c = MQTTClient(
        "localhost",
        b.port,
        signing_key=ed25519.SigningKey(b"\x0e" * 32),
        ssl_context=context,
        callback=lambda t, p: got.append((t, p)),
    )
    c.connect()
    assert c.smoker_authenticated
    topic = f"restricted/{c.client_id}/secure"
    assert c.claim_topic(topic, "WHITELIST") == 0
    assert c.subscribe(topic, qos=1) == 1
    big = bytes(range(256)) * 30  # several TLS records in one message
    assert c.publish(topic, big, qos=1) == 0
    c.loop(500)
    assert got == [(topic, big)]
    c.disconnect()
    # a client that does not trust the broker's certificate never gets to MQTT
    untrusting = MQTTClient(
        "localhost",
        b.port,
        signing_key=ed25519.SigningKey(b"\x0f" * 32),
        ssl_context=ssl.create_default_context(),
    )
    with pytest.raises(ssl.SSLError):
        untrusting.connect()
    assert not untrusting.connected
