"""The argon2id password file and `edge-broker passwd`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from edge_broker.auth.password import (
    PasswordEntry,
    PasswordFileError,
    load_password_file,
    parse_password_file,
    remove_user,
    set_user,
    verify_password,
    write_password_file,
)


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "edge_broker", "passwd", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_set_verify_and_roundtrip(tmp_path: Path) -> None:
    entries = set_user({}, "alice", "s3cret", ("acme",), ("sensor",))
    path = tmp_path / "passwd"
    write_password_file(path, entries)
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    loaded = load_password_file(path)
    alice = loaded["alice"]
    assert alice.tenants == ("acme",) and alice.roles == ("sensor",)
    assert alice.hash.startswith(b"$argon2id$")
    assert verify_password(alice, b"s3cret")
    assert not verify_password(alice, b"S3cret")
    assert not verify_password(alice, b"")


def test_change_keeps_tenants_and_remove(tmp_path: Path) -> None:
    entries = set_user({}, "bob", "one", ("t1", "t2"))
    changed = set_user(entries, "bob", "two")
    assert changed["bob"].tenants == ("t1", "t2")
    assert verify_password(changed["bob"], b"two") and not verify_password(changed["bob"], b"one")
    assert remove_user(changed, "bob") == {}
    with pytest.raises(PasswordFileError, match="not in the password file"):
        remove_user({}, "bob")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("alice\n", "expected 'username:argon2id-hash"),
        ("alice:plaintext\n", "not an argon2id hash"),
        (":$argon2id$x\n", "empty username"),
        ("a:$argon2id$x\na:$argon2id$y\n", "appears twice"),
    ],
)
def test_bad_files_name_the_line(text: str, message: str) -> None:
    with pytest.raises(PasswordFileError, match=message) as info:
        parse_password_file(text, "pw.txt")
    assert "pw.txt:" in str(info.value)


def test_bad_usernames_refused() -> None:
    for name in ("", "a:b", "a\nb"):
        with pytest.raises(PasswordFileError):
            set_user({}, name, "pw")
    with pytest.raises(PasswordFileError, match="must not be empty"):
        set_user({}, "carol", "")


def test_corrupt_hash_does_not_verify() -> None:
    entry = PasswordEntry("eve", b"$argon2id$v=19$m=65536,t=2,p=1$garbage$garbage")
    assert not verify_password(entry, b"anything")


def test_cli_add_check_list_remove(tmp_path: Path) -> None:
    path = str(tmp_path / "pw")
    added = run_cli("add", path, "dev1", "--password-stdin", "--tenants", "acme", stdin="hunter2\n")
    assert added.returncode == 0, added.stderr
    assert run_cli("check", path, "dev1", "--password-stdin", stdin="hunter2\n").returncode == 0
    assert run_cli("check", path, "dev1", "--password-stdin", stdin="wrong\n").returncode == 1
    listing = run_cli("list", path)
    assert "dev1\ttenants=acme\troles=-" in listing.stdout
    assert run_cli("remove", path, "dev1").returncode == 0
    missing = run_cli("remove", path, "dev1")
    assert missing.returncode == 2 and "not in the password file" in missing.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_add_and_remove_keep_the_files_owner_group_and_mode(tmp_path: Path) -> None:
    """Issue 20: `passwd add|remove` run by root must not turn a root:edge-broker 0640 file
    into root:root 0600, which the service user can no longer read."""
    path = tmp_path / "passwd"
    assert run_cli("add", str(path), "alice", "--password-stdin", stdin="pw1\n").returncode == 0
    os.chown(path, 0, 4242)
    os.chmod(path, 0o640)
    for args, stdin in (
        (("add", str(path), "bob", "--password-stdin"), "pw2\n"),
        (("remove", str(path), "alice"), ""),
    ):
        result = run_cli(*args, stdin=stdin)
        assert result.returncode == 0, result.stderr
        st = os.stat(path)
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (0, 4242, 0o640), args
    assert list(load_password_file(path)) == ["bob"]
    # a new file in a folder of another group (/etc/edge-broker is root:edge-broker) is
    # group-readable
    folder = tmp_path / "etc"
    folder.mkdir()
    os.chown(folder, 0, 4243)
    assert (
        run_cli(
            "add", str(folder / "passwd"), "carol", "--password-stdin", stdin="pw3\n"
        ).returncode
        == 0
    )
    st = os.stat(folder / "passwd")
    assert (st.st_gid, st.st_mode & 0o777) == (4243, 0o640)
