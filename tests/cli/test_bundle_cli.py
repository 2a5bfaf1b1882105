"""`edge-broker bundle keygen | create | verify | show` as a user runs them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from edge_broker.keys import load_signing_key, load_verify_key
from tests.cli import field_cli


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return field_cli.cli("bundle", *args)


def create(
    key: str,
    policy: Path,
    out: Path | str,
    *,
    version: str = "1",
    gateway: str = "*",
    more: tuple[str, ...] = (),
) -> subprocess.CompletedProcess[str]:
    """``bundle create`` of ``policy`` signed with ``key`` into ``out``."""
    return cli(
        "create", "--key", key, "--version", version, "--gateway", gateway,
        "--policy", str(policy), "-o", str(out), *more,
    )  # fmt: skip


def test_keygen_create_verify_show(tmp_path: Path) -> None:
    key = str(tmp_path / "cloud.key")
    assert cli("keygen", key).returncode == 0
    assert load_signing_key(key).verify_key == load_verify_key(key + ".pub")
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[acl]\nenabled = false\n[permissions.sets.all]\nrules = [{ id = "r", topic = "a/#" }]\n'
    )
    out = str(tmp_path / "b.cbor")
    made = create(key, policy, out, version="2", gateway="gw-1", more=("--issued-at", "1700000000"))
    assert made.returncode == 0, made.stderr
    again = str(tmp_path / "b2.cbor")
    create(key, policy, again, version="2", gateway="gw-1", more=("--issued-at", "1700000000"))
    assert Path(out).read_bytes() == Path(again).read_bytes()

    ok = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-1", "--current-version", "1")
    assert ok.returncode == 0 and "OK: v2" in ok.stdout
    old = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-1", "--current-version", "2")
    assert old.returncode == 2 and "anti-rollback" in old.stderr
    foreign = cli("verify", out, "--trust", key + ".pub", "--gateway", "gw-9")
    assert foreign.returncode == 2 and "not 'gw-9'" in foreign.stderr

    shown = json.loads(cli("show", out, "--trust", key + ".pub").stdout)
    assert shown["verified"] is True and shown["version"] == 2
    assert shown["policy"]["permissions"]["sets"]["all"]["rules"][0]["topic"] == "a/#"


def test_clear_errors(tmp_path: Path) -> None:
    missing = create(str(tmp_path / "nope"), tmp_path / "p.json", tmp_path / "o")
    assert missing.returncode == 2 and "cannot read key file" in missing.stderr
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("hello")
    res = cli("verify", str(bad_key), "--trust", str(bad_key))
    assert res.returncode == 2 and "not an Ed25519 public key" in res.stderr


def test_create_and_verify_refuse_what_every_gateway_refuses(tmp_path: Path) -> None:
    """Issue 20: the policy is compiled as a gateway applying it would, before it is signed, and
    again by verify (a bundle signed by an older tool)."""
    from edge_broker.sync.bundle import create_bundle

    key = str(tmp_path / "cloud.key")
    assert cli("keygen", key).returncode == 0
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[permissions]\nunassigned = "x"\n[permissions.sets.s]\n'
        'rules = [{ id = "r", topic = "a/#/b" }]\n'
    )
    out = tmp_path / "b.cbor"
    made = create(key, policy, out)
    assert made.returncode == 2 and not out.exists()
    assert f"{policy}: permissions.unassigned: 'x' is not valid" in made.stderr
    assert "permissions.sets.s" in made.stderr and "a/#/b" in made.stderr  # both problems
    signed = create_bundle(
        load_signing_key(key),
        version=1,
        gateway="*",
        issued_at=1,
        policy={"permissions": {"unassigned": "x"}},
    )  # as an older tool signed it
    out.write_bytes(signed)
    bad = cli("verify", str(out), "--trust", key + ".pub")
    assert bad.returncode == 2 and "permissions.unassigned" in bad.stderr


def test_password_and_acl_files_are_embedded_as_content(tmp_path: Path) -> None:
    """Issue 20: never a path of the cloud machine; relative paths from the policy's folder."""
    from edge_broker.auth.password import load_password_file

    key = str(tmp_path / "cloud.key")
    assert cli("keygen", key).returncode == 0
    folder = tmp_path / "policy"
    folder.mkdir()
    added = field_cli.cli(
        "passwd", "add", str(folder / "passwd"), "dev", "--password-stdin", "--tenants", "t1",
        input="pw\n",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    (folder / "acl.json5").write_text(
        "// a Zenoh config\n{ access_control: { enabled: true, "
        'default_permission: "deny", rules: [], subjects: [], policies: [] } }\n'
    )
    policy = folder / "policy.toml"
    policy.write_text('[passwords]\nfile = "passwd"\n[acl]\nfile = "acl.json5"\n')
    out = tmp_path / "b.cbor"
    made = create(key, policy, out)
    assert made.returncode == 0, made.stderr
    shown = json.loads(cli("show", str(out), "--trust", key + ".pub").stdout)
    entry = load_password_file(folder / "passwd")["dev"]
    assert shown["policy"]["passwords"] == [
        {"username": "dev", "hash": entry.hash.decode(), "tenants": ["t1"], "roles": []}
    ]
    assert shown["policy"]["acl"] == {
        "enabled": True,
        "default_permission": "deny",
        "rules": [],
        "subjects": [],
        "policies": [],
    }
    assert str(tmp_path) not in json.dumps(shown["policy"])
    assert cli("verify", str(out), "--trust", key + ".pub").returncode == 0
