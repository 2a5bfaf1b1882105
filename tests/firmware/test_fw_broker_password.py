"""Microcontroller clients with password authentication against the real broker (AUTHZ.md §1):
users made with `edge-broker passwd add`; umqtt.simple and Adafruit MiniMQTT (MQTT 3.1.1), the
firmware's MQTT 5 client, and the basic example. Wrong passwords are refused (0x86 / 3.1.1: 4).
Runs once the broker offers the ``password`` method.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from smokermqtt.client import MQTTClient

from edge_broker.auth.methods import AUTHENTICATOR_FACTORIES
from edge_broker.auth.password import load_password_file, set_user, write_password_file

from . import fw_support as fw

pytestmark = pytest.mark.skipif(
    "password" not in AUTHENTICATOR_FACTORIES,
    reason="the broker does not offer the password authentication method yet",
)

USERS = {"dev-p1": "correct horse", "dev-p2": "battery staple", "dev-p3": "pässwörd ✓"}


@pytest.fixture(scope="module")
def password_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The first user through the CLI (as an operator would), the others through the same
    library calls in-process (a CLI start costs a second)."""
    path = tmp_path_factory.mktemp("passwd") / "passwd"
    (first, password), *others = USERS.items()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "edge_broker",
            "passwd",
            "add",
            str(path),
            first,
            "--password-stdin",
        ],
        input=password + "\n",
        text=True,
        check=True,
        capture_output=True,
        timeout=60,
    )
    entries = load_password_file(path)
    for user, password in others:
        entries = set_user(entries, user, password)
    write_password_file(path, entries)
    return path


@pytest.fixture(scope="module")
def password_broker(password_file: Path) -> Iterator[Any]:
    """One password broker for the module: the tests use distinct client ids and topics."""
    with fw.running_broker(
        password_file.parent,
        (
            '[[listeners]]\nname = "tcp"\nbind = "127.0.0.1"\nport = 0\n'
            'auth_methods = ["password"]\n\n'
            f'[passwords]\nfile = "{password_file}"\n'
        ),
    ) as broker:
        yield broker


def test_firmware_client_mqtt5_with_password(password_broker: Any) -> None:
    b = password_broker
    c, got = fw.firmware_echo(b.host, b.port, "dev-p1", USERS["dev-p1"])
    assert got == [("devices/dev-p1/telemetry", b"1")]
    c.disconnect()
    # UTF-8 passwords travel as their bytes
    utf8 = MQTTClient(
        b.host, b.port, client_id="dev-p3", username="dev-p3", password=USERS["dev-p3"]
    )
    utf8.connect()
    utf8.disconnect()
    for user, password in (("dev-p1", "wrong"), ("nobody", "correct horse"), ("dev-p2", "")):
        assert fw.firmware_refusal(b.host, b.port, "dev-x", user, password) == 0x86


def test_umqtt_simple_with_password(password_broker: Any, umqtt: Any) -> None:
    b = password_broker
    got = fw.umqtt_echo(umqtt, b.host, b.port, "dev-p2", USERS["dev-p2"])
    assert got == [(b"devices/dev-p2/cmd", b"on")]
    # 3.1.1 return code 4: bad user name or password
    assert fw.umqtt_refusal(umqtt, b.host, b.port, "dev-p2", "wrong") == 4


def test_minimqtt_with_password(password_broker: Any) -> None:
    b = password_broker
    got = fw.minimqtt_echo(b.host, b.port, "dev-p1", USERS["dev-p1"])
    assert got == [("devices/dev-p1/state", "ok")]
    fw.minimqtt_refused(b.host, b.port, "dev-p1", "wrong")


def test_basic_example_with_password(password_broker: Any, basic_app: Any, tmp_path: Path) -> None:
    b = password_broker
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "client_id": "dev-p2",
                "host": b.host,
                "port": b.port,
                "username": "dev-p2",
                "password": USERS["dev-p2"],
                "publish_interval_ms": 200,
                "keepalive": 10,
            }
        )
    )
    watcher = MQTTClient(
        b.host, b.port, client_id="dev-p1-watch", username="dev-p1", password=USERS["dev-p1"]
    )
    watcher.connect()
    assert fw.basic_app_telemetry(basic_app, config, watcher) == [1, 2]
