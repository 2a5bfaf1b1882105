"""Password files made by the real Debian ``mosquitto_passwd`` (``$7$`` PBKDF2-SHA512 and
``$6$`` SHA-512 hashes) work as they are, so a migration does not re-key every device; ``passwd
import`` adds them to an edge-broker file (issue 20)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.auth.password import PasswordFileError, load_password_file, verify_password
from tests.conftest import BrokerFactory

pytestmark = pytest.mark.skipif(
    shutil.which("mosquitto_passwd") is None, reason="needs mosquitto_passwd"
)
ROOT = Path(__file__).resolve().parents[2]


def mosquitto_file(path: Path) -> Path:
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(path), "alice", "s3cret"], check=True)
    subprocess.run(["mosquitto_passwd", "-b", str(path), "bob", "p:w d é"], check=True)
    subprocess.run(
        ["mosquitto_passwd", "-H", "sha512", "-b", str(path), "carol", "old-style"], check=True
    )
    return path


def connect(port: int, user: str, password: str) -> int:
    """MQTT 3.1.1 CONNECT with a username and password; the CONNACK return code."""
    u, p = user.encode(), password.encode()
    body = (
        b"\x00\x04MQTT\x04\xc2\x00\x3c"
        + b"\x00\x02c1"
        + len(u).to_bytes(2, "big")
        + u
        + len(p).to_bytes(2, "big")
        + p
    )
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        return sock.recv(4)[3]


def test_hashes_of_the_real_mosquitto_passwd_verify(tmp_path: Path) -> None:
    entries = load_password_file(mosquitto_file(tmp_path / "mosquitto.passwd"))
    assert entries["alice"].hash.startswith(b"$7$101$") and entries["carol"].hash.startswith(b"$6$")
    assert verify_password(entries["alice"], b"s3cret")
    assert verify_password(entries["bob"], "p:w d é".encode())
    assert verify_password(entries["carol"], b"old-style")
    for user, wrong in (("alice", b"s3cret "), ("bob", b""), ("carol", b"old-styl")):
        assert not verify_password(entries[user], wrong)


def test_broken_mosquitto_hashes_say_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    for line, expected in (
        ("u:$7$x$YWJj$YWJj\n", "bad base64 or iteration count"),
        ("u:$7$0$YWJj$YWJj\n", "iteration count 0 is out of range"),
        ("u:$6$onlysalt\n", "not a Mosquitto hash"),
        ("u:$5$a$b\n", "nor a mosquitto_passwd one"),
    ):
        bad.write_text(line)
        with pytest.raises(PasswordFileError, match=expected.replace("$", r"\$")):
            load_password_file(bad)


def test_broker_accepts_a_mosquitto_file_and_an_imported_one(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    mosq = mosquitto_file(tmp_path / "mosquitto.passwd")
    ours = tmp_path / "passwd"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cli = [sys.executable, "-m", "edge_broker", "passwd"]
    subprocess.run(
        [*cli, "add", str(ours), "alice", "--password-stdin"],
        input="other\n",
        text=True,
        check=True,
        env=env,
    )
    clash = subprocess.run(
        [*cli, "import", str(mosq), str(ours)], capture_output=True, text=True, env=env
    )
    assert (
        clash.returncode == 2
        and "already has 'alice': nothing was imported; give --replace" in clash.stderr
    )
    result = subprocess.run(
        [*cli, "import", str(mosq), str(ours), "--replace", "--tenants", "site1"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert (
        "3 user(s) imported" in result.stdout
        and "1 of them have Mosquitto 1.6 '$6$' hashes" in result.stderr
    )
    imported = load_password_file(ours)
    assert imported["bob"].tenants == ("site1",) and imported["bob"].hash.startswith(b"$7$")
    check = subprocess.run(
        [*cli, "check", str(ours), "carol", "--password-stdin"],
        input="old-style\n",
        capture_output=True,
        text=True,
        env=env,
    )
    assert check.returncode == 0 and "password OK" in check.stdout

    for password_file in (mosq, ours):
        broker = broker_factory(
            {
                "listeners": [{"name": "tcp", "auth_methods": ["password"]}],
                "passwords": {"file": str(password_file)},
            }
        )
        assert connect(broker.port, "alice", "s3cret") == 0
        assert connect(broker.port, "carol", "old-style") == 0
        assert connect(broker.port, "bob", "p:w d é") == 0
        assert connect(broker.port, "alice", "wrong") == 4  # bad user name or password
        broker.stop()
