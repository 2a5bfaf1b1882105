"""Microcontroller clients with token authentication against the real broker (AUTHZ.md §1).

The JWT from `edge-broker token create` travels as the CONNECT password: umqtt.simple (MQTT
3.1.1), Adafruit MiniMQTT (3.1.1), the firmware's own MQTT 5 client, and the basic example with
a token file. Grants allow devices/#; anything else is refused. Runs once the broker offers the
``token`` method.
"""

from __future__ import annotations

import io
import json
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import nacl.signing
import pytest
from smokermqtt.client import MQTTClient
from smokermqtt.packets import MQTTError

from edge_broker.auth.chain import AUTHENTICATOR_FACTORIES
from edge_broker.cli import main as edge_broker
from edge_broker.keys import write_signing_key, write_verify_key

from .fw_support import running_broker

pytestmark = pytest.mark.skipif(
    "token" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the token authentication method yet",
)

BASIC = Path(__file__).resolve().parents[2] / "firmware_clients" / "micropython_basic"
GRANT = {"tenant_ids": ["acme"], "allow_channels_pub": ["devices/#"],
         "allow_channels_sub": ["devices/#"]}


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
            assert edge_broker(["token", "create", "--key", str(self.private), "--grant",
                                json.dumps(grant), "--ttl", ttl]) == 0
        return out.getvalue().strip()


@pytest.fixture(scope="module")
def token_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenBroker]:
    """One token broker for the module: the tests use distinct client ids and topics."""
    workdir = tmp_path_factory.mktemp("fw-token")
    tb = TokenBroker(workdir)
    with running_broker(workdir, tb.config) as broker:
        tb.host, tb.port = broker.host, broker.port
        yield tb


@pytest.fixture
def umqtt(umqtt_simple_path: Path) -> Any:
    if str(umqtt_simple_path) not in sys.path:
        sys.path.append(str(umqtt_simple_path))
    from umqtt import simple

    return simple


def receive(client: MQTTClient, got: list[Any], n: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        client.wait_msg(200)


def test_firmware_client_mqtt5_with_token(token_broker: TokenBroker) -> None:
    b = token_broker
    got: list[tuple[str, bytes]] = []
    c = MQTTClient(b.host, b.port, client_id="dev-t1", username="dev-t1",
                   password=b.token(), callback=lambda t, p: got.append((t, p)))
    c.connect()
    assert c.subscribe("devices/dev-t1/#", qos=1) == 1
    assert c.publish("devices/dev-t1/telemetry", b"1", qos=1) == 0
    receive(c, got, 1)
    assert got == [("devices/dev-t1/telemetry", b"1")]
    assert c.publish("other/topic", b"x", qos=1) == 0x87  # outside the grants
    assert c.subscribe("other/#", qos=1) == 0x87
    c.disconnect()


def test_forged_and_foreign_tokens_are_refused(token_broker: TokenBroker,
                                               tmp_path: Path) -> None:
    b = token_broker
    foreign_key = tmp_path / "foreign.pem"
    write_signing_key(foreign_key, nacl.signing.SigningKey(b"\x43" * 32))
    out = io.StringIO()
    with redirect_stdout(out):
        assert edge_broker(["token", "create", "--key", str(foreign_key), "--grant",
                            json.dumps(GRANT)]) == 0
    for password in (b.token()[:-4] + "AAAA", out.getvalue().strip()):
        c = MQTTClient(b.host, b.port, client_id="dev-bad", username="x", password=password)
        with pytest.raises(MQTTError) as info:
            c.connect()
        assert info.value.reason == 0x86
        assert not c.connected


def test_umqtt_simple_with_token(token_broker: TokenBroker, umqtt: Any) -> None:
    b = token_broker
    got: list[tuple[bytes, bytes]] = []
    c = umqtt.MQTTClient("dev-u1", b.host, b.port, user="dev-u1", password=b.token(),
                         keepalive=30)
    c.set_callback(lambda t, m: got.append((t, m)))
    assert c.connect() == 0
    c.subscribe(b"devices/dev-u1/cmd", qos=1)
    c.publish(b"devices/dev-u1/cmd", b"on", qos=1)
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        c.check_msg()
        time.sleep(0.02)
    assert got == [(b"devices/dev-u1/cmd", b"on")]
    c.disconnect()
    bad = umqtt.MQTTClient("dev-u2", b.host, b.port, user="dev-u2",
                           password=b.token()[:-4] + "AAAA")
    with pytest.raises(umqtt.MQTTException) as info:
        bad.connect()
    assert info.value.args[0] == 4  # 3.1.1: bad user name or password


def test_minimqtt_with_token(token_broker: TokenBroker) -> None:
    import adafruit_minimqtt.adafruit_minimqtt as minimqtt

    b = token_broker
    got: list[tuple[str, str]] = []
    c = minimqtt.MQTT(broker=b.host, port=b.port, client_id="dev-m1", username="dev-m1",
                      password=b.token(), socket_pool=socket, is_ssl=False, keep_alive=30,
                      connect_retries=1)
    c.on_message = lambda client, topic, message: got.append((topic, message))
    c.connect()
    c.subscribe("devices/dev-m1/#", qos=1)
    c.publish("devices/dev-m1/state", "ok", qos=1)
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        c.loop(timeout=1)
    assert got == [("devices/dev-m1/state", "ok")]
    c.disconnect()
    bad = minimqtt.MQTT(broker=b.host, port=b.port, client_id="dev-m2", username="dev-m2",
                        password="not.a.token", socket_pool=socket, is_ssl=False,
                        connect_retries=1)
    with pytest.raises(minimqtt.MMQTTException):
        bad.connect()


def test_basic_example_with_token_file(token_broker: TokenBroker, umqtt: Any,
                                       tmp_path: Path) -> None:
    if str(BASIC) not in sys.path:
        sys.path.append(str(BASIC))
    import basic_app

    b = token_broker
    (tmp_path / "token.jwt").write_text(b.token() + "\n")
    (tmp_path / "config.json").write_text(json.dumps({
        "client_id": "dev-b1", "host": b.host, "port": b.port, "token_file": "token.jwt",
        "publish_interval_ms": 200, "keepalive": 10}))
    watcher_got: list[bytes] = []
    watcher = MQTTClient(b.host, b.port, client_id="dev-b-watch", username="w",
                         password=b.token(), callback=lambda t, p: watcher_got.append(p))
    watcher.connect()
    assert watcher.subscribe("devices/dev-b1/telemetry", qos=1) == 1
    basic_app.run(str(tmp_path / "config.json"), cycles=2)
    receive(watcher, watcher_got, 2)
    watcher.disconnect()
    assert [json.loads(p)["seq"] for p in watcher_got] == [1, 2]
