"""Site ACL subjects by TLS certificate CN (AUTHZ.md §2 gate 5, seed 004 "cert_common_names"):
a test CA (the ``cryptography`` package) issues client certificates with different CNs; on a TLS
listener with ``require_client_cert`` the ACL tells them apart, and a subject combining a CN
with a username (cartesian product: AND across lists) needs both.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.authz.acl_paho import NOT_AUTHORIZED, AclClient, password_file, toml_with_acl
from tests.conftest import RunningBroker, start_broker

CLIENT_CNS = ("sensor-1", "sensor-2", "gateway-1")


@dataclass(frozen=True)
class Pki:
    ca: Path
    server: tuple[Path, Path]
    clients: dict[str, tuple[Path, Path]]

    def client(self, cn: str) -> tuple[Path, Path, Path]:
        cert, key = self.clients[cn]
        return self.ca, cert, key


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write(
    directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey
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


def _issue(
    cn: str,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
    *,
    server: bool = False,
    is_ca: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca_name if not is_ca else _name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [
                    x509.DNSName("localhost"),
                    x509.IPAddress(__import__("ipaddress").ip_address("127.0.0.1")),
                ]
            ),
            critical=False,
        )
    signer = key if is_ca else ca_key
    return builder.sign(signer, hashes.SHA256()), key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    d = tmp_path_factory.mktemp("pki")
    ca_cert, ca_key = _issue("acl-test-ca", None, _name("acl-test-ca"), is_ca=True)  # type: ignore[arg-type]
    ca_path, _ = _write(d, "ca", ca_cert, ca_key)
    server = _write(d, "server", *_issue("localhost", ca_key, ca_cert.subject, server=True))
    clients = {cn: _write(d, cn, *_issue(cn, ca_key, ca_cert.subject)) for cn in CLIENT_CNS}
    return Pki(ca_path, server, clients)


def _tls_listener(pki: Pki, methods: str) -> str:
    cert, key = pki.server
    return (
        f'[[listeners]]\nname = "tls"\ntransport = "tls"\nbind = "127.0.0.1"\nport = 0\n'
        f'tls_cert = "{cert}"\ntls_key = "{key}"\ntls_ca = "{pki.ca}"\nrequire_client_cert = true\n'
        f"auth_methods = {methods}\n"
    )


ACL = """
[acl]
enabled = true
default_permission = "deny"

[[acl.rules]]
id = "sensors-publish-telemetry"
messages = ["put"]
flows = ["ingress"]
permission = "allow"
key_exprs = ["telemetry/**"]

[[acl.rules]]
id = "gateway-commands"
messages = ["put"]
flows = ["ingress"]
permission = "allow"
key_exprs = ["cmd/**"]

[[acl.rules]]
id = "no-sensor-2"
messages = ["put"]
flows = ["ingress"]
permission = "deny"
key_exprs = ["telemetry/restricted/**"]

[[acl.subjects]]
id = "sensors"
cert_common_names = ["sensor-1", "sensor-2"]

[[acl.subjects]]
id = "sensor-2 only"
cert_common_names = ["sensor-2"]

[[acl.subjects]]
id = "gateway operator"
cert_common_names = ["gateway-1"]
usernames = ["operator"]

[[acl.policies]]
rules = ["sensors-publish-telemetry"]
subjects = ["sensors"]

[[acl.policies]]
rules = ["no-sensor-2"]
subjects = ["sensor-2 only"]

[[acl.policies]]
rules = ["gateway-commands"]
subjects = ["gateway operator"]
"""


@pytest.fixture(scope="module")
def tls_broker(pki: Pki, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    d = tmp_path_factory.mktemp("tls-broker")
    passwd = password_file(d / "passwd", {"operator": "op-secret"})
    # anonymous keeps the certificate CN (cert_cn) with no username; password adds the username
    text = toml_with_acl(
        ACL,
        _tls_listener(pki, '["password", "anonymous"]'),
        extra=f'[passwords]\nfile = "{passwd}"\n',
    )
    b = start_broker(d, text)
    yield b
    b.stop()


@pytest.mark.parametrize("cn", ["sensor-1", "sensor-2"])
def test_sensors_may_publish_telemetry(tls_broker: RunningBroker, pki: Pki, cn: str) -> None:
    with AclClient("127.0.0.1", tls_broker.port, tls=pki.client(cn)) as c:
        assert c.publish_code("telemetry/temp") != NOT_AUTHORIZED
        code, reason = c.publish("cmd/open")
        assert code == NOT_AUTHORIZED and "default_permission" in reason


def test_the_acl_tells_the_certificates_apart(tls_broker: RunningBroker, pki: Pki) -> None:
    with AclClient("127.0.0.1", tls_broker.port, tls=pki.client("sensor-1")) as one:
        assert one.publish_code("telemetry/restricted/x") != NOT_AUTHORIZED
    with AclClient("127.0.0.1", tls_broker.port, tls=pki.client("sensor-2")) as two:
        code, reason = two.publish("telemetry/restricted/x")
        assert code == NOT_AUTHORIZED and 'denied by acl rule "no-sensor-2"' in reason


def test_gateway_certificate_alone_gets_nothing(tls_broker: RunningBroker, pki: Pki) -> None:
    with AclClient("127.0.0.1", tls_broker.port, tls=pki.client("gateway-1")) as c:
        assert c.publish_code("cmd/open") == NOT_AUTHORIZED
        assert c.publish_code("telemetry/temp") == NOT_AUTHORIZED


def test_certificate_and_username_together(tls_broker: RunningBroker, pki: Pki) -> None:
    """cert CN AND username: the gateway's certificate with the operator's password."""
    with AclClient(
        "127.0.0.1",
        tls_broker.port,
        tls=pki.client("gateway-1"),
        username="operator",
        password="op-secret",
    ) as c:
        assert c.publish_code("cmd/open") != NOT_AUTHORIZED
    with AclClient(
        "127.0.0.1",
        tls_broker.port,
        tls=pki.client("sensor-1"),
        username="operator",
        password="op-secret",
    ) as c:
        assert c.publish_code("cmd/open") == NOT_AUTHORIZED
