"""SIGHUP reloads TLS certificates and keys (issue 20): connections made afterwards get the new
certificate, existing ones stay connected with theirs; a bad new pair keeps the running one.
The serial is read by the real ``openssl s_client``."""

from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from tests.conftest import BrokerFactory
from tests.ops.tls_files import make_cert
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


def served_serial(port: int) -> str:
    """The serial of the certificate a new TLS connection is served, as openssl prints it."""
    hello = subprocess.run(
        ["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-servername", "localhost"],
        input="",
        capture_output=True,
        text=True,
        timeout=20,
    )
    out = subprocess.run(
        ["openssl", "x509", "-noout", "-serial"],
        input=hello.stdout,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert out.returncode == 0, hello.stdout + hello.stderr
    return out.stdout.strip()


def test_sighup_rotates_the_certificate_for_new_connections_only(
    broker_factory: BrokerFactory, tmp_path: Path
) -> None:
    live = tmp_path / "live"
    live.mkdir()
    cert, key = make_cert(live, "server", serial=0x1111)
    new_cert, new_key = make_cert(tmp_path, "next", serial=0x2222)
    _, foreign_key = make_cert(tmp_path, "foreign", serial=0x3333)
    broker = broker_factory(
        {
            "listeners": [
                {"name": "tls", "transport": "tls", "tls_cert": str(cert), "tls_key": str(key)}
            ]
        }
    )
    port = broker.ports["tls"]
    assert served_serial(port) == "serial=1111"

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    existing = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=5))
    existing.sendall(bytes([0x10, 14, 0, 4]) + b"MQTT" + bytes([4, 2, 0, 60, 0, 2]) + b"c1")
    assert existing.recv(4) == bytes([0x20, 2, 0, 0])
    old_der = existing.getpeercert(binary_form=True)

    shutil.copy(new_cert, cert)  # the rotation: new files at the same paths, then SIGHUP
    shutil.copy(new_key, key)
    broker.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "TLS certificate and key reloaded" in broker.log(), what=broker.log)
    assert served_serial(port) == "serial=2222"
    existing.sendall(bytes([0xC0, 0]))  # PINGREQ on the connection made before the rotation
    assert existing.recv(2) == bytes([0xD0, 0])
    assert existing.getpeercert(binary_form=True) == old_der
    existing.close()

    shutil.copy(foreign_key, key)  # a key of another certificate: refused, the running pair stays
    broker.process.send_signal(signal.SIGHUP)
    wait_for(lambda: "TLS files not reloaded" in broker.log(), what=broker.log)
    assert served_serial(port) == "serial=2222"
    assert broker.alive() and "Traceback" not in broker.log()
