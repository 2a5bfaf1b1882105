"""A gateway that had a policy bundle never falls back to its base config silently (issue 15
item 10c).

The saved bundle is verified again on start. After the trusted key was rotated (only the new
key in ``[sync] trusted_keys``) it no longer verifies; the broker used to log one line and serve
the base config, which here allows ``admin/#``. Now it refuses to start, naming the file and
what to do; with old and new keys trusted it restores the bundle; deleting the file is the
deliberate way back to the base config. Real broker, real sockets.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import nacl.signing
import pytest

from edge_broker.keys import write_verify_key
from tests.conftest import ROOT, BrokerFactory, to_toml
from tests.sync.test_sync_directory import wait_status
from tests.sync.test_sync_mqtt import allowed, bundle

GW = "gw-7"  # the gateway id of test_sync_mqtt's bundles


def _config(tmp_path: Path, keys: list[Path]) -> str:
    return to_toml(
        {
            "listeners": [{"name": "tcp", "bind": "127.0.0.1", "port": 0}],
            "sync": {
                "source": "directory",
                "gateway_id": GW,
                "trusted_keys": [str(k) for k in keys],
                "directory": str(tmp_path / "inbox"),
                "poll_interval": 0.1,
                "state_dir": str(tmp_path / "state"),
            },
        }
    )


def _key(tmp_path: Path, name: str) -> tuple[nacl.signing.SigningKey, Path]:
    key = nacl.signing.SigningKey.generate()
    pub = tmp_path / f"{name}.pub"
    write_verify_key(pub, key.verify_key)
    return key, pub


def _run(config_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "rotated.toml"
    path.write_text(config_text)
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )


@pytest.mark.timeout(120)
def test_rotated_key_does_not_silently_serve_the_base_config(
    tmp_path: Path, broker_factory: BrokerFactory
) -> None:
    old, old_pub = _key(tmp_path, "old")
    new, new_pub = _key(tmp_path, "new")
    (tmp_path / "inbox").mkdir()
    b = broker_factory(_config(tmp_path, [old_pub]))
    assert allowed(b, "admin/x")  # the base config allows everything
    (tmp_path / "inbox" / "v1.cbor").write_bytes(bundle(old, 1, "admin"))
    assert wait_status(tmp_path / "state", lambda s: s["version"] == 1)["ok"] is True
    assert not allowed(b, "admin/x")
    assert b.stop() == 0
    (tmp_path / "inbox" / "v1.cbor").unlink()  # nothing to re-read: only the saved bundle

    # key rotated, the old key no longer trusted: refuse to start, loudly
    refused = _run(_config(tmp_path, [new_pub]), tmp_path)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    saved = tmp_path / "state" / "bundle.cbor"
    message = refused.stderr
    assert str(saved) in message and "does not start with the base config" in message
    assert "trusted_keys" in message and "delete" in message
    assert "listening on" not in refused.stdout + refused.stderr

    # old and new keys trusted while rotating: the bundle is restored before serving
    overlap = broker_factory(_config(tmp_path, [old_pub, new_pub]))
    assert not allowed(overlap, "admin/x") and allowed(overlap, "other/x")
    assert overlap.stop() == 0

    # deleting the saved bundle is the deliberate way back to the base config
    saved.unlink()
    base = broker_factory(_config(tmp_path, [new_pub]))
    assert allowed(base, "admin/x")
    (tmp_path / "inbox" / "v2.cbor").write_bytes(bundle(new, 2, "admin"))
    assert wait_status(tmp_path / "state", lambda s: s["version"] == 2)["ok"] is True
    assert not allowed(base, "admin/x")
