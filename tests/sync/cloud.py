"""A Debian Mosquitto as the "cloud broker" of sync tests, on a free loopback port, with
persistence so a subscriber's queued messages survive a restart (an uplink outage)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from paho.mqtt.enums import CallbackAPIVersion

from scripts import procs

MOSQUITTO = procs.MOSQUITTO


@dataclass(frozen=True)
class Pki:
    """A test CA with a server certificate for 127.0.0.1 and one client certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def create(cls, directory: Path) -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sync-test-ca")])

        def issue(
            cn: str, key: ec.EllipticCurvePrivateKey, *, ca: bool = False, server: bool = False
        ) -> x509.Certificate:
            now = datetime.datetime.now(datetime.UTC)
            builder = (
                x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                .issuer_name(ca_name)
                .public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            )
            if server:
                builder = builder.add_extension(
                    x509.SubjectAlternativeName(
                        [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                    ),
                    critical=False,
                )
            return builder.sign(ca_key, hashes.SHA256())

        def write(
            stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
        ) -> tuple[Path, Path]:
            cert_path, key_path = directory / f"{stem}.pem", directory / f"{stem}.key"
            cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
            key_path.write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM,
                    serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption(),
                )
            )
            return cert_path, key_path

        ca, _ = write("ca", issue("sync-test-ca", ca_key, ca=True), ca_key)
        server_key = ec.generate_private_key(ec.SECP256R1())
        server = write("server", issue("127.0.0.1", server_key, server=True), server_key)
        client_key = ec.generate_private_key(ec.SECP256R1())
        client = write("gateway", issue("gw-tls", client_key), client_key)
        return cls(ca, *server, *client)


class Mosquitto(procs.Mosquitto):
    """scripts/procs.py's Mosquitto with persistence, so a subscriber's queued messages survive
    a restart (an uplink outage), and optionally mutual TLS (the gateway shows a certificate of
    the same CA)."""

    def __init__(self, directory: Path, tls: Pki | None = None) -> None:
        extra = f"persistence true\npersistence_location {directory}/\n"
        if tls is not None:
            extra += (
                f"cafile {tls.ca}\ncertfile {tls.server_cert}\nkeyfile {tls.server_key}\n"
                "require_certificate true\n"
            )
        super().__init__(directory, extra=extra, verbose=False)


class CloudClient:
    """A paho client on the cloud broker that records what it receives (thread-safe)."""

    def __init__(
        self,
        port: int,
        client_id: str,
        subscriptions: list[str],
        clean: bool = True,
        tls: Pki | None = None,
    ) -> None:
        self.messages: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()
        self.subscriptions = subscriptions
        self.client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            protocol=mqtt.MQTTv311,
            clean_session=clean,
        )
        self.client.reconnect_delay_set(0.1, 0.3)
        self.client.on_connect = self._on_connect
        self.client.on_message = self._on_message
        if tls is not None:
            self.client.tls_set(str(tls.ca), str(tls.client_cert), str(tls.client_key))
        self.connected = threading.Event()
        self.client.connect("127.0.0.1", port, 30)
        self.client.loop_start()
        assert self.connected.wait(10), "cloud client did not connect"

    def _on_connect(
        self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any, properties: Any
    ) -> None:
        for topic in self.subscriptions:
            client.subscribe(topic, qos=1)
        self.connected.set()

    def _on_message(self, client: mqtt.Client, userdata: Any, message: Any) -> None:
        with self.lock:
            self.messages.append((message.topic, bytes(message.payload)))

    def publish(self, topic: str, payload: bytes, retain: bool = False) -> None:
        self.client.publish(topic, payload, qos=1, retain=retain).wait_for_publish(10)

    def received(self, topic: str) -> list[bytes]:
        with self.lock:
            return [payload for t, payload in self.messages if t == topic]

    def wait_json(self, topic: str, predicate: Any, timeout: float = 15.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for payload in reversed(self.received(topic)):
                data = json.loads(payload)
                if predicate(data):
                    return data  # type: ignore[no-any-return]
            time.sleep(0.05)
        raise AssertionError(f"nothing matching on {topic}: {self.received(topic)}")

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()
