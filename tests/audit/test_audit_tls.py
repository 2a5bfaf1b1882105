"""A TLS handshake the broker refuses (a client certificate from an unknown CA, none at all where
one is required) is a refused ``connect`` in the audit log, with the peer's address and the
reason, aggregated; clients with good certificates still connect over the same listener."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

from edge_broker.audit.log import read_records
from edge_broker.mqtt.codec import encode
from edge_broker.mqtt.packets import Connect
from tests.authz.acl_paho import AclClient
from tests.authz.test_acl_broker_tls import Pki, _issue, _name, _write
from tests.conftest import start_broker


def _try_tls(port: int, ca: Path, cert: tuple[Path, Path] | None) -> None:
    """Connect, send a CONNECT, read: the broker's alert or close ends it."""
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(str(cert[0]), str(cert[1]))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        try:
            with ctx.wrap_socket(raw) as tls:
                tls.sendall(encode(Connect(5, "rogue-dev"), 5))
                assert tls.recv(16) == b""  # no CONNACK: the server closed
        except (ssl.SSLError, ConnectionError):
            pass


def test_refused_tls_handshakes_are_audited(tmp_path: Path) -> None:
    ca_cert, ca_key = _issue("audit-ca", None, _name("audit-ca"), is_ca=True)  # type: ignore[arg-type]
    ca, _ = _write(tmp_path, "ca", ca_cert, ca_key)
    server = _write(tmp_path, "server", *_issue("localhost", ca_key, ca_cert.subject, server=True))
    good = _write(tmp_path, "good", *_issue("sensor-1", ca_key, ca_cert.subject))
    rogue_ca, rogue_key = _issue("rogue-ca", None, _name("rogue-ca"), is_ca=True)  # type: ignore[arg-type]
    rogue = _write(tmp_path, "rogue", *_issue("sensor-1", rogue_key, rogue_ca.subject))
    audit_dir = tmp_path / "audit"
    broker = start_broker(
        tmp_path / "b",
        '[[listeners]]\nname = "tls"\ntransport = "tls"\nbind = "127.0.0.1"\nport = 0\n'
        f'tls_cert = "{server[0]}"\ntls_key = "{server[1]}"\ntls_ca = "{ca}"\n'
        'require_client_cert = true\nauth_methods = ["certificate"]\n'
        f'[sys]\ninterval = 0\n[audit]\ndir = "{audit_dir}"\nstats_interval = 0\n',
    )
    port = broker.ports["tls"]
    for _ in range(5):
        _try_tls(port, ca, rogue)
    _try_tls(port, ca, None)
    client = AclClient(
        broker.host, port, tls=Pki(ca, server, {"sensor-1": good}).client("sensor-1")
    )
    client.close()
    assert broker.stop() == 0
    assert "Traceback" not in broker.log()
    records = [r for _, _, r in read_records(audit_dir)]
    refused = [r for r in records if r.get("action") == "connect" and r["outcome"] == "deny"]
    assert refused, records
    assert all(
        r["addr"] == "127.0.0.1" and r["reason"].startswith("TLS handshake failed") for r in refused
    )
    assert all(r["detail"] == "listener tls" for r in refused)
    assert sum(r.get("count", 1) for r in refused) == 6  # five rogue certificates, one without
    reasons = {r["reason"] for r in refused}
    assert len(reasons) == 2, reasons  # identical ones aggregated
    assert any("certificate" in reason.lower() for reason in reasons)
    events = [r for r in records if r.get("event") == "connect"]
    assert [r["client"] for r in events] == [client.client_id]
