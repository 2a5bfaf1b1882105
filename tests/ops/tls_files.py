"""Self-signed server certificates made by the real ``openssl`` (with a chosen serial, so a
test can tell which one a listener serves)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def make_cert(directory: Path, stem: str, serial: int = 1) -> tuple[Path, Path]:
    """``directory/stem.crt`` and its unencrypted EC key ``directory/stem.key``."""
    cert, key = directory / f"{stem}.crt", directory / f"{stem}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
            "-set_serial",
            str(serial),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_pki(directory: Path, leaves: dict[str, str], ca_cn: str = "test-ca") -> Path:
    """A test CA (``ca.pem``/``ca.key``) and, per ``name → CN`` in ``leaves``, ``name.pem`` and
    ``name.key`` signed by it, each valid for localhost and 127.0.0.1 (EC P-256, two days)."""
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl(
        "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
        "-subj", f"/CN={ca_cn}", cwd=directory,
    )  # fmt: skip
    for name, cn in leaves.items():
        _openssl(
            "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={cn}",
            cwd=directory,
        )  # fmt: skip
        (directory / f"{name}.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        _openssl(
            "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext",
            cwd=directory,
        )  # fmt: skip
    return directory
