"""User name and password, or a token file, on the remote broker (Mosquitto with a password
file): accepted, refused with a readable error, and a rotated token picked up at reconnect."""

from __future__ import annotations

import subprocess
from pathlib import Path

from bridge_support import METRICS, bridge_status, gateway_toml, wait_log


def password_file(path: Path, user: str, password: str) -> Path:
    subprocess.run(
        ["mosquitto_passwd", "-b", "-c", str(path), user, password], check=True, capture_output=True
    )
    path.chmod(0o600)
    return path


def cloud_config(path: Path) -> str:
    """Mosquitto with a password file (bridge_support then turns anonymous access off)."""
    return f"password_file {path}\n"


def test_username_password_and_refusal(broker_factory, mosquitto_factory, tmp_path):
    passwd = password_file(tmp_path / "passwd", "gw-0042", "s3cret")
    cloud = mosquitto_factory(cloud_config(passwd))
    good = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "username": "gw-0042",
                    "password": "s3cret",
                    "topics": [{"direction": "out", "local": "a/#"}],
                }
            ]
        )
    )
    wait_log(good, "bridge cloud connected")
    bad = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "username": "gw-0042",
                    "password": "wrong",
                    "topics": [{"direction": "out", "local": "a/#"}],
                }
            ],
            extra=METRICS,
        )
    )
    text = wait_log(bad, "bridge cloud cannot connect")
    assert "refused the connection (reason code 0x87: not authorized)" in text
    assert "bridge cloud connected" not in bad.log()
    assert "0x87" in bridge_status(bad)["last_error"]


def test_token_file_is_read_at_every_connect(broker_factory, mosquitto_factory, tmp_path):
    token = tmp_path / "cloud.jwt"
    token.write_text("old-token\n")
    passwd = password_file(tmp_path / "passwd", "gw-0042", "new-token")
    cloud = mosquitto_factory(cloud_config(passwd))
    gw = broker_factory(
        gateway_toml(
            [
                {
                    "name": "cloud",
                    "address": "127.0.0.1",
                    "port": cloud.port,
                    "username": "gw-0042",
                    "token_file": str(token),
                    "topics": [{"direction": "out", "local": "a/#"}],
                }
            ]
        )
    )
    wait_log(gw, "bridge cloud cannot connect")
    token.write_text("new-token\n")  # rotated: the next attempt uses it
    wait_log(gw, "bridge cloud connected")
