"""Microcontroller clients with password authentication against the real broker (AUTHZ.md §1):
users made with `edge-broker passwd add`; umqtt.simple and Adafruit MiniMQTT (MQTT 3.1.1), the
firmware's MQTT 5 client, and the basic example. Wrong passwords are refused (0x86 / 3.1.1: 4).
Runs once the broker offers the ``password`` method.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from smokermqtt.client import MQTTClient
from smokermqtt.packets import MQTTError

from edge_broker.auth.chain import AUTHENTICATOR_FACTORIES
from edge_broker.auth.password import load_password_file, set_user, write_password_file

from .fw_support import running_broker

pytestmark = pytest.mark.skipif(
    "password" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the password authentication method yet",
)

BASIC = Path(__file__).resolve().parents[2] / "firmware_clients" / "micropython_basic"
USERS = {"dev-p1": "correct horse", "dev-p2": "battery staple", "dev-p3": "pässwörd ✓"}


@pytest.fixture(scope="module")
def password_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first user through the CLI (as an operator would), the others through the same
    library calls in-process (a CLI start costs a second)."""
    path = tmp_path_factory.mktemp("passwd") / "passwd"
    (first, password), *others = USERS.items()
    subprocess.run([sys.executable, "-m", "edge_broker", "passwd", "add", str(path), first,
                    "--password-stdin"], input=password + "\n", text=True, check=True,
                   capture_output=True, timeout=60)
    entries = load_password_file(path)
    for user, password in others:
        entries = set_user(entries, user, password)
    write_password_file(path, entries)
    return path


@pytest.fixture(scope="module")
def password_broker(password_file: Path) -> Iterator[Any]:
    """One password broker for the module: the tests use distinct client ids and topics."""
    with running_broker(password_file.parent, (
        '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
        'auth_methods = ["password"]\n\n'
        f'[passwords]\nfile = "{password_file}"\n')) as broker:
        yield broker


@pytest.fixture
def umqtt(umqtt_simple_path: Path) -> Any:
    if str(umqtt_simple_path) not in sys.path:
        sys.path.append(str(umqtt_simple_path))
    from umqtt import simple

    return simple


def test_firmware_client_mqtt5_with_password(password_broker: Any) -> None:
    b = password_broker
    got: list[tuple[str, bytes]] = []
    c = MQTTClient(b.host, b.port, client_id="dev-p1", username="dev-p1",
                   password=USERS["dev-p1"], callback=lambda t, p: got.append((t, p)))
    c.connect()
    assert c.subscribe("devices/dev-p1/#", qos=1) == 1
    assert c.publish("devices/dev-p1/telemetry", b"1", qos=1) == 0
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        c.wait_msg(200)
    assert got == [("devices/dev-p1/telemetry", b"1")]
    c.disconnect()
    # UTF-8 passwords travel as their bytes
    utf8 = MQTTClient(b.host, b.port, client_id="dev-p3", username="dev-p3",
                      password=USERS["dev-p3"])
    utf8.connect()
    utf8.disconnect()
    for user, password in (("dev-p1", "wrong"), ("nobody", "correct horse"), ("dev-p2", "")):
        bad = MQTTClient(b.host, b.port, client_id="dev-x", username=user, password=password)
        with pytest.raises(MQTTError) as info:
            bad.connect()
        assert info.value.reason == 0x86
        assert not bad.connected


def test_umqtt_simple_with_password(password_broker: Any, umqtt: Any) -> None:
    b = password_broker
    got: list[tuple[bytes, bytes]] = []
    c = umqtt.MQTTClient("dev-p2", b.host, b.port, user="dev-p2", password=USERS["dev-p2"],
                         keepalive=30)
    c.set_callback(lambda t, m: got.append((t, m)))
    assert c.connect() == 0
    c.subscribe(b"devices/dev-p2/cmd", qos=1)
    c.publish(b"devices/dev-p2/cmd", b"on", qos=1)
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        c.check_msg()
        time.sleep(0.02)
    assert got == [(b"devices/dev-p2/cmd", b"on")]
    c.disconnect()
    bad = umqtt.MQTTClient("dev-p2", b.host, b.port, user="dev-p2", password="wrong")
    with pytest.raises(umqtt.MQTTException) as info:
        bad.connect()
    assert info.value.args[0] == 4  # 3.1.1: bad user name or password


def test_minimqtt_with_password(password_broker: Any) -> None:
    import adafruit_minimqtt.adafruit_minimqtt as minimqtt

    b = password_broker
    got: list[tuple[str, str]] = []
    c = minimqtt.MQTT(broker=b.host, port=b.port, client_id="dev-p1", username="dev-p1",
                      password=USERS["dev-p1"], socket_pool=socket, is_ssl=False,
                      keep_alive=30, connect_retries=1)
    c.on_message = lambda client, topic, message: got.append((topic, message))
    c.connect()
    c.subscribe("devices/dev-p1/#", qos=1)
    c.publish("devices/dev-p1/state", "ok", qos=1)
    deadline = time.monotonic() + 5
    while not got and time.monotonic() < deadline:
        c.loop(timeout=1)
    assert got == [("devices/dev-p1/state", "ok")]
    c.disconnect()
    bad = minimqtt.MQTT(broker=b.host, port=b.port, client_id="dev-p1", username="dev-p1",
                        password="wrong", socket_pool=socket, is_ssl=False, connect_retries=1)
    with pytest.raises(minimqtt.MMQTTException):
        bad.connect()


def test_basic_example_with_password(password_broker: Any, umqtt: Any, tmp_path: Path) -> None:
    if str(BASIC) not in sys.path:
        sys.path.append(str(BASIC))
    import basic_app

    b = password_broker
    (tmp_path / "config.json").write_text(json.dumps({
        "client_id": "dev-p2", "host": b.host, "port": b.port, "username": "dev-p2",
        "password": USERS["dev-p2"], "publish_interval_ms": 200, "keepalive": 10}))
    seen: list[bytes] = []
    watcher = MQTTClient(b.host, b.port, client_id="dev-p1-watch", username="dev-p1",
                         password=USERS["dev-p1"], callback=lambda t, p: seen.append(p))
    watcher.connect()
    assert watcher.subscribe("devices/dev-p2/telemetry", qos=1) == 1
    basic_app.run(str(tmp_path / "config.json"), cycles=2)
    deadline = time.monotonic() + 5
    while len(seen) < 2 and time.monotonic() < deadline:
        watcher.wait_msg(200)
    watcher.disconnect()
    assert [json.loads(p)["seq"] for p in seen] == [1, 2]
