"""Microcontroller clients with token authentication against the real broker (AUTHZ.md §1).

The JWT from `edge-broker token create` travels as the CONNECT password: umqtt.simple (MQTT
3.1.1), Adafruit MiniMQTT (3.1.1), the firmware's own MQTT 5 client, and the basic example with
a token file. Grants allow devices/#; anything else is refused. Runs once the broker offers the
``token`` method.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import nacl.signing
import pytest
from smokermqtt.client import MQTTClient

from edge_broker.auth.methods import AUTHENTICATOR_FACTORIES
from edge_broker.cli import main as edge_broker
from edge_broker.keys import write_signing_key, write_verify_key

from .fw_support import (
    basic_app_telemetry,
    firmware_echo,
    firmware_refusal,
    minimqtt_echo,
    minimqtt_refused,
    running_broker,
    umqtt_echo,
    umqtt_refusal,
)

pytestmark = pytest.mark.skipif(
    "token" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the token authentication method yet",
)

GRANT = {
    "tenant_ids": ["acme"],
    "allow_channels_pub": ["devices/#"],
    "allow_channels_sub": ["devices/#"],
}


class TokenBroker:
    def __init__(self, workdir: Path) -> None:
        self.host = ""
        self.port = 0
        self.key = nacl.signing.SigningKey(b"\x42" * 32)
        self.private = workdir / "token-key.pem"
        public = workdir / "token-key.pub"
        write_signing_key(self.private, self.key)
        write_verify_key(public, self.key.verify_key)
        config = (
            '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
            'auth_methods = ["token"]\n\n'
            f'[[tokens.keys]]\nfile = "{public}"\n'
        )
        self.config = config

    def token(self, grant: dict[str, Any] = GRANT, ttl: str = "1h") -> str:
        out = io.StringIO()
        with redirect_stdout(out):
            assert (
                edge_broker(
                    [
                        "token",
                        "create",
                        "--key",
                        str(self.private),
                        "--grant",
                        json.dumps(grant),
                        "--ttl",
                        ttl,
                    ]
                )
                == 0
            )
        return out.getvalue().strip()


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenBroker]:
    """One token broker for the module: the tests use distinct client ids and topics."""
    workdir = tmp_path_factory.mktemp("fw-token")
    tb = TokenBroker(workdir)
    with running_broker(workdir, tb.config) as broker:
        tb.host, tb.port = broker.host, broker.port
        yield tb


def test_firmware_client_mqtt5_with_token(token_broker: TokenBroker) -> None:
    b = token_broker
    c, got = firmware_echo(b.host, b.port, "dev-t1", b.token())
    assert got == [("devices/dev-t1/telemetry", b"1")]
    assert c.publish("other/topic", b"x", qos=1) == 0x87  # outside the grants
    assert c.subscribe("other/#", qos=1) == 0x87
    c.disconnect()


def test_forged_and_foreign_tokens_are_refused(token_broker: TokenBroker, tmp_path: Path) -> None:
    b = token_broker
    foreign_key = tmp_path / "foreign.pem"
    write_signing_key(foreign_key, nacl.signing.SigningKey(b"\x43" * 32))
    out = io.StringIO()
    with redirect_stdout(out):
        assert (
            edge_broker(
                ["token", "create", "--key", str(foreign_key), "--grant", json.dumps(GRANT)]
            )
            == 0
        )
    for password in (b.token()[:-4] + "AAAA", out.getvalue().strip()):
        assert firmware_refusal(b.host, b.port, "dev-bad", "x", password) == 0x86


def test_umqtt_simple_with_token(token_broker: TokenBroker, umqtt: Any) -> None:
    b = token_broker
    got = umqtt_echo(umqtt, b.host, b.port, "dev-u1", b.token())
    assert got == [(b"devices/dev-u1/cmd", b"on")]
    # 3.1.1 return code 4: bad user name or password
    assert umqtt_refusal(umqtt, b.host, b.port, "dev-u2", b.token()[:-4] + "AAAA") == 4


def test_minimqtt_with_token(token_broker: TokenBroker) -> None:
    b = token_broker
    got = minimqtt_echo(b.host, b.port, "dev-m1", b.token())
    assert got == [("devices/dev-m1/state", "ok")]
    minimqtt_refused(b.host, b.port, "dev-m2", "not.a.token")


def test_basic_example_with_token_file(
    token_broker: TokenBroker, basic_app: Any, tmp_path: Path
) -> None:
    b = token_broker
    (tmp_path / "token.jwt").write_text(b.token() + "\n")
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "client_id": "dev-b1",
                "host": b.host,
                "port": b.port,
                "token_file": "token.jwt",
                "publish_interval_ms": 200,
                "keepalive": 10,
            }
        )
    )
    watcher = MQTTClient(b.host, b.port, client_id="dev-b-watch", username="w", password=b.token())
    watcher.connect()
    assert basic_app_telemetry(basic_app, config, watcher) == [1, 2]
