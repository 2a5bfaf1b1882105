"""`edge-broker bundle keygen | create | verify | show` as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from edge_broker.keys import load_signing_key, load_verify_key


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edge_broker", "bundle", *args],
                          capture_output=True, text=True, timeout=60)


def test_keygen_create_verify_show(tmp_path: Path) -> None:
    key = str(tmp_path / "cloud.key")
    assert cli("keygen", key).returncode == 0
    assert load_signing_key(key).verify_key == load_verify_key(key + ".pub")
    policy = tmp_path / "policy.toml"
    policy.write_text('[acl]\nenabled = false\n[[permissions.default]]\ntopic = "a/#"\n')
    out = str(tmp_path / "b.cbor")
    made = cli("create", "--key", key, "--version", "2", "--gateway", "gw-1", "--policy", str(policy),
               "--issued-at", "1700000000", "-o", out)
    assert made.returncode == 0, made.stderr
    again = str(tmp_path / "b2.cbor")
    cli("create", "--key", key, "--version", "2", "--gateway", "gw-1", "--policy", str(policy),
        "--issued-at", "1700000000", "-o", again)
    assert Path(out).read_bytes() == Path(again).read_bytes()

    ok = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-1", "--current-version", "1")
    assert ok.returncode == 0 and "OK: v2" in ok.stdout
    old = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-1", "--current-version", "2")
    assert old.returncode == 2 and "anti-rollback" in old.stderr
    foreign = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-9")
    assert foreign.returncode == 2 and "not 'gw-9'" in foreign.stderr

    shown = json.loads(cli("show", out, "--trust", key + ".pub").stdout)
    assert shown["verified"] is True and shown["version"] == 2
    assert shown["policy"]["permissions"]["default"][0]["topic"] == "a/#"


def test_clear_errors(tmp_path: Path) -> None:
    missing = cli("create", "--key", str(tmp_path / "nope"), "--version", "1", "--gateway", "*",
                  "--policy", str(tmp_path / "p.json"), "-o", str(tmp_path / "o"))
    assert missing.returncode == 2 and "cannot read key file" in missing.stderr
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("hello")
    res = cli("verify", str(bad_key), "--trust", str(bad_key))
    assert res.returncode == 2 and "not an Ed25519 public key" in res.stderr
