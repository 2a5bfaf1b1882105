"""Merging a bundle's policy sections over the base config file (sync/apply.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nacl.signing
import pytest

from edge_broker.config import load_config
from edge_broker.sync.apply import merged_config
from edge_broker.sync.bundle import BundleError, verify_bundle
from edge_broker.sync.bundle import create_bundle as _create
from edge_broker.sync.state import SyncStateDir

KEY = nacl.signing.SigningKey(b"\x07" * 32)

BASE = """
[[listeners]]
name = "t"
port = 0

[claims]
enabled = true
store_dir = "{store}"
max_claims_total = 500

[permissions]
unassigned = "deny"
"""


def bundle(policy: dict[str, Any], version: int = 1) -> Any:
    return verify_bundle(
        _create(KEY, version=version, gateway="*", issued_at=1, policy=policy), [KEY.verify_key]
    )


@pytest.fixture
def base(tmp_path: Path) -> Any:
    path = tmp_path / "gw.toml"
    path.write_text(BASE.format(store=tmp_path / "claims"))
    return load_config(path)


def test_sections_replace_or_update(base: Any, tmp_path: Path) -> None:
    state = SyncStateDir.open(tmp_path / "state")
    new = merged_config(
        base,
        bundle({"claims": {"max_claims_total": 9}, "permissions": {"unassigned": "allow"}}),
        state,
    )
    assert new.claims.max_claims_total == 9 and new.claims.store_dir == str(tmp_path / "claims")
    assert new.claims.enabled is True
    assert new.permissions is not None and new.permissions != base.permissions
    assert new.file == base.file and new.listeners == base.listeners
    untouched = merged_config(base, bundle({}), state)
    assert untouched == base


def test_claims_location_stays_the_gateways(base: Any, tmp_path: Path) -> None:
    with pytest.raises(BundleError, match="may set limits only; store_dir belong"):
        merged_config(
            base,
            bundle({"claims": {"store_dir": "/tmp/elsewhere"}}),
            SyncStateDir.open(tmp_path / "s"),
        )


def test_invalid_sections_name_the_key(base: Any, tmp_path: Path) -> None:
    with pytest.raises(
        BundleError,
        match=r"does not make a valid config: .*claims.max_claims_total: 0 is out of range",
    ):
        merged_config(
            base, bundle({"claims": {"max_claims_total": 0}}), SyncStateDir.open(tmp_path / "s")
        )
    with pytest.raises(BundleError, match=r"passwords\[0\] needs username and an argon2id hash"):
        merged_config(
            base, bundle({"passwords": [{"username": "u"}]}), SyncStateDir.open(tmp_path / "s")
        )
    with pytest.raises(BundleError, match="must be a list"):
        merged_config(base, bundle({"passwords": {"u": "h"}}), SyncStateDir.open(tmp_path / "s"))


def test_passwords_go_to_a_file_in_the_state_dir(base: Any, tmp_path: Path) -> None:
    state = SyncStateDir.open(tmp_path / "s")
    entry = {
        "username": "u",
        "hash": "$argon2id$v=19$m=65536,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaA",
        "tenants": ["t1"],
        "roles": ["r"],
    }
    new = merged_config(base, bundle({"passwords": [entry]}, version=4), state)
    assert new.passwords.file == str(tmp_path / "s" / "passwd.v4")
    assert (tmp_path / "s" / "passwd.v4").read_text().splitlines()[-1] == f"u:{entry['hash']}:t1:r"


def test_bundle_password_entries_carry_clientids(base: Any, tmp_path: Path) -> None:
    """issue 15 item 8: a bundle can bind client ids too; list items cannot break the file."""
    from edge_broker.auth.password import hash_password, load_password_file

    state = SyncStateDir.open(tmp_path / "state")
    entry = {
        "username": "s",
        "hash": hash_password("pw").decode(),
        "roles": ["sensor"],
        "clientids": ["sensor-*"],
    }
    new = merged_config(base, bundle({"passwords": [entry]}), state)
    assert new.passwords.file is not None
    loaded = load_password_file(new.passwords.file)["s"]
    assert loaded.clientids == ("sensor-*",) and loaded.roles == ("sensor",)
    for bad in (["a:b"], ["x,y"], [""], "sensor-*"):
        with pytest.raises(BundleError, match="clientids must be a list"):
            merged_config(
                base, bundle({"passwords": [{**entry, "clientids": bad}]}, version=2), state
            )
