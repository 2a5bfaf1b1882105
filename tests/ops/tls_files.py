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
