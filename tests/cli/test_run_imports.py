"""A fresh broker imports only what its configuration uses (issue 32: fresh RSS). On the
embedded default (an anonymous listener and the admin console with a one-time login) a running
broker that has served an MQTT client imports neither PyNaCl, json5, cbor2 nor TinyDB (about
3 MB of resident memory together); configurations that use them still load them (claims,
passwords, persistence: their own tests), checked here for persistence and a password file.

The modules are read from the real ``python -m edge_broker run``: ``PYTHONPROFILEIMPORTTIME``
makes the interpreter write one line per import to stderr, which is the broker's log."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from edge_broker.mqtt.codec import PacketReader, encode
from edge_broker.mqtt.packets import Connack, Connect, Disconnect, Publish, Subscribe, Subscription
from tests.conftest import RunningBroker, start_broker

LAZY = ("nacl", "json5", "cbor2", "tinydb")
IMPORT_LINE = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)\s*$", re.M)


def imported(broker: RunningBroker) -> set[str]:
    """The top-level packages the broker process imported, from its import-time lines."""
    return {name.split(".")[0] for name in IMPORT_LINE.findall(broker.log())}


def serve_one_client(broker: RunningBroker) -> None:
    """An MQTT 3.1.1 client connects, subscribes, publishes to itself and leaves."""
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        reader = PacketReader(side="client", protocol_level=4)
        sock.sendall(encode(Connect(4, "imports", True, 60), 4))
        sock.sendall(encode(Subscribe(1, (Subscription("t/#", 1),)), 4))
        sock.sendall(encode(Publish("t/1", b"x", 1, packet_id=2), 4))
        got: list[object] = []
        while not any(isinstance(p, Publish) for p in got):
            data = sock.recv(65536)
            assert data, "the broker closed the connection"
            got.extend(reader.feed(data))
        assert isinstance(got[0], Connack) and got[0].reason_code == 0
        sock.sendall(encode(Disconnect(), 4))


@pytest.fixture
def import_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")


@pytest.mark.usefixtures("import_times")
def test_the_embedded_default_imports_no_crypto_json5_cbor_or_tinydb(tmp_path: Path) -> None:
    config = {
        "listeners": [{"name": "default", "port": 0}],
        "admin": {"enabled": True, "one_time_login": True, "port": 0},
    }
    broker = start_broker(tmp_path, config)
    try:
        serve_one_client(broker)
        modules = imported(broker)
        assert "edge_broker" in modules and "asyncio" in modules  # the lines are there
        assert not modules & set(LAZY), sorted(modules & set(LAZY))
    finally:
        broker.stop()


@pytest.mark.usefixtures("import_times")
def test_persistence_and_a_password_file_load_what_they_need(tmp_path: Path) -> None:
    from edge_broker.auth.password import PasswordEntry, hash_password, write_password_file

    users = tmp_path / "passwd"
    write_password_file(users, {"dev": PasswordEntry("dev", hash_password("secret"))})
    config = {
        "listeners": [{"name": "default", "port": 0, "auth_methods": ["password"]}],
        "passwords": {"file": str(users)},
        "persistence": {"enabled": True, "state_dir": str(tmp_path / "state")},
    }
    broker = start_broker(tmp_path, config)
    try:
        with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
            reader = PacketReader(side="client", protocol_level=4)
            sock.sendall(
                encode(Connect(4, "dev-1", True, 60, username="dev", password=b"secret"), 4)
            )
            packets: list[object] = []
            while not packets:
                data = sock.recv(65536)
                assert data, "the broker closed the connection"
                packets.extend(reader.feed(data))
            assert isinstance(packets[0], Connack) and packets[0].reason_code == 0
        modules = imported(broker)
        assert {"nacl", "cbor2"} <= modules  # argon2id checked the password; the store is open
    finally:
        broker.stop()
