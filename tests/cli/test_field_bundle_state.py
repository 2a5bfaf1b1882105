"""A saved policy bundle: damaged bytes (set aside under ``on_damage``) versus a sound bundle the
broker will not use (``blocked``: never set aside, the operator decides), as ``state check``,
``state set-aside`` and ``check`` judge them (issue 29 row 2)."""

from __future__ import annotations

import os
from pathlib import Path

import cbor2
import nacl.signing

from edge_broker.sync.bundle import create_bundle, key_id, stored_damage
from edge_broker.sync.state import inspect_bundle
from tests.cli.field_cli import cli

POLICY = {"permissions": {"unassigned": "allow"}}


def bundle(key: nacl.signing.SigningKey, gateway: str = "gw-1") -> bytes:
    return create_bundle(key, version=1, gateway=gateway, issued_at=1_700_000_000, policy=POLICY)


def test_damage_is_told_from_a_bundle_that_is_merely_not_trusted(tmp_path: Path) -> None:
    key, other = nacl.signing.SigningKey.generate(), nacl.signing.SigningKey.generate()
    trusted = {key_id(key.verify_key): key.verify_key}
    sound = bundle(key)
    assert stored_damage(sound, trusted) is None
    assert stored_damage(bundle(other), trusted) is None  # another key: not damage
    assert stored_damage(os.urandom(300), trusted) is not None  # not a bundle, whatever it is
    assert "not valid CBOR" in (stored_damage(sound[:100], trusted) or "")  # cut short
    altered = bytearray(sound)
    altered[sound.index(cbor2.loads(sound)["sig"]) + 5] ^= 0x01  # a bit of the signature
    assert "altered after it was saved" in (stored_damage(bytes(altered), trusted) or "")

    path = tmp_path / "bundle.cbor"
    assert inspect_bundle(path, trusted, "gw-1").state == "missing"
    path.write_bytes(sound)
    assert inspect_bundle(path, trusted, "gw-1").state == "ok"
    assert inspect_bundle(path, trusted, "gw-2").state == "blocked"
    path.write_bytes(bundle(other))
    blocked = inspect_bundle(path, trusted, "gw-1")
    assert blocked.state == "blocked" and "trusted_keys" in blocked.detail
    path.write_bytes(bytes(altered))
    assert inspect_bundle(path, trusted, "gw-1").state == "refused"


def test_a_blocked_bundle_fails_check_and_is_never_set_aside(tmp_path: Path) -> None:
    key, other = nacl.signing.SigningKey.generate(), nacl.signing.SigningKey.generate()
    public = tmp_path / "cloud.pub"
    public.write_bytes(key.verify_key.encode().hex().encode() + b"\n")
    state = tmp_path / "state"
    (state / "sync").mkdir(parents=True)
    saved = state / "sync/bundle.cbor"
    saved.write_bytes(bundle(other))  # signed by a key this gateway no longer trusts
    conf = tmp_path / "b.toml"
    conf.write_text(
        f'[[listeners]]\nname = "tcp"\nport = 0\n\n[persistence]\nstate_dir = "{state}"\n'
        'on_damage = "set-aside"\n\n'
        f'[sync]\nsource = "directory"\ndirectory = "{tmp_path}"\ngateway_id = "gw-1"\n'
        f'trusted_keys = ["{public}"]\n'
    )
    status = cli("state", "check", "--config", str(conf))
    assert status.returncode == 1
    assert f"{saved} (policy bundle): blocked: {saved}: bundle is signed by key" in status.stdout
    aside = cli("state", "set-aside", "--config", str(conf))
    assert aside.returncode == 0 and aside.stdout.rstrip().endswith("0 file(s) set aside")
    assert saved.read_bytes() == bundle(other)
    check = cli("check", "--config", str(conf))
    assert check.returncode == 1, check.stderr
    assert f"{conf}: sync: {saved}: bundle is signed by key" in check.stderr
