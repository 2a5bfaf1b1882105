"""``[sync] source = "directory"`` with the real broker: bundles dropped into a directory are
verified and applied (password hashes from a bundle replace the password file's users), refused
ones are reported in ``<state_dir>/status.json``, and the state directory keeps the applied
bundle."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import nacl.signing
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from edge_broker.auth.password import PasswordEntry, hash_password, write_password_file
from edge_broker.keys import write_verify_key
from edge_broker.sync.bundle import create_bundle
from tests.conftest import BrokerFactory, RunningBroker
from tests.waiting import wait_for_log

GW = "gw-dir"


def config(tmp_path: Path, pub: Path) -> str:
    return f"""
[[listeners]]
name = "tcp"
bind = "127.0.0.1"
port = 0
auth_methods = ["password"]

[passwords]
file = "{tmp_path / "passwd"}"

[sync]
source = "directory"
gateway_id = "{GW}"
trusted_keys = ["{pub}"]
directory = "{tmp_path / "inbox"}"
poll_interval = 0.1
state_dir = "{tmp_path / "state"}"
"""


def connects(b: RunningBroker, user: str, password: str) -> bool:
    client = mqtt.Client(
        CallbackAPIVersion.VERSION2, client_id=f"c-{time.monotonic_ns()}", protocol=mqtt.MQTTv5
    )
    client.username_pw_set(user, password)
    try:
        client.connect(b.host, b.port)
    except OSError:
        return False
    result: list[bool] = []

    def on_connect(c: Any, u: Any, flags: Any, rc: Any, p: Any) -> None:
        result.append(not rc.is_failure)

    client.on_connect = on_connect
    deadline = time.monotonic() + 5
    while not result and time.monotonic() < deadline:
        client.loop(0.05)
    client.disconnect()
    return bool(result and result[0])


def wait_status(state: Path, predicate: Any, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        try:
            last = json.loads((state / "status.json").read_text())
        except (OSError, ValueError):
            last = {}
        if last and predicate(last):
            return last
        time.sleep(0.05)
    raise AssertionError(f"status never matched: {last}")


def test_directory_bundles_replace_passwords(tmp_path: Path, broker_factory: BrokerFactory) -> None:
    key = nacl.signing.SigningKey.generate()
    pub = tmp_path / "cloud.pub"
    write_verify_key(pub, key.verify_key)
    write_password_file(tmp_path / "passwd", {"old": PasswordEntry("old", hash_password("old-pw"))})
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    b = broker_factory(config(tmp_path, pub))
    assert connects(b, "old", "old-pw")

    policy = {
        "passwords": [
            {
                "username": "new",
                "hash": hash_password("new-pw").decode(),
                "tenants": [],
                "roles": ["sensor"],
            }
        ]
    }
    (inbox / "v1.cbor").write_bytes(
        create_bundle(key, version=1, gateway="*", issued_at=1, policy=policy)
    )
    status = wait_status(tmp_path / "state", lambda s: s["version"] == 1)
    assert status["ok"] is True, status
    assert connects(b, "new", "new-pw")
    assert not connects(b, "old", "old-pw")  # the bundle's users replace the file's
    assert not connects(b, "new", "wrong")
    saved = tmp_path / "state" / "bundle.cbor"
    assert saved.read_bytes() == (inbox / "v1.cbor").read_bytes()
    assert (tmp_path / "state" / "passwd.v1").exists()

    b.process.send_signal(signal.SIGHUP)  # a reload keeps the bundle's sections over the file
    wait_for_log(b, "with policy bundle v1: policy applied")
    assert connects(b, "new", "new-pw") and not connects(b, "old", "old-pw")

    bad = {"passwords": [{"username": "x", "hash": "plaintext"}]}
    (inbox / "v2.cbor").write_bytes(
        create_bundle(key, version=2, gateway="*", issued_at=2, policy=bad)
    )
    status = wait_status(tmp_path / "state", lambda s: s["version"] == 2)
    assert (
        status["ok"] is False
        and "argon2id hash" in status["reason"]
        and status["applied_version"] == 1
    )
    assert connects(b, "new", "new-pw")
    assert saved.read_bytes() == (inbox / "v1.cbor").read_bytes()  # the good one stays persisted
    assert b.stop() == 0
