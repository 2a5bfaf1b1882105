"""``edge-broker-pipeline`` refuses bad arguments and unusable files with exit 2 and a message
naming what is wrong, before any Spark work (no JVM needed for these)."""

from __future__ import annotations

from pathlib import Path

import nacl.signing
import pytest

from edge_broker.keys import write_verify_key
from edge_broker.pipeline.cli import main
from edge_broker.sync.bundle import create_bundle


def test_bad_conf(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert (
        main(
            [
                "--conf",
                "spark.sql.shuffle.partitions",
                "audit",
                str(tmp_path),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "write KEY=VALUE" in capsys.readouterr().err


def test_missing_key_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert (
        main(
            [
                "compile",
                "--input",
                str(tmp_path),
                "--key",
                str(tmp_path / "nokey"),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "nokey" in capsys.readouterr().err


def test_whatif_candidate_missing_or_forged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert (
        main(
            [
                "whatif",
                str(tmp_path),
                "--candidate",
                str(tmp_path / "none.cbor"),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    assert "none.cbor" in capsys.readouterr().err
    signer, other = nacl.signing.SigningKey(bytes(32)), nacl.signing.SigningKey(bytes([1] * 32))
    (tmp_path / "c.cbor").write_bytes(
        create_bundle(signer, version=1, gateway="gw", issued_at=1, policy={})
    )
    write_verify_key(str(tmp_path / "other.pub"), other.verify_key)
    assert (
        main(
            [
                "whatif",
                str(tmp_path),
                "--candidate",
                str(tmp_path / "c.cbor"),
                "--trust",
                str(tmp_path / "other.pub"),
                "-o",
                str(tmp_path / "o"),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert "c.cbor" in err and "key" in err
