"""``[admin]``: defaults, the embedded default (console on loopback, one-time link, never a
password), and the errors ``check`` gives for an admin listener nobody could use safely."""

from __future__ import annotations

from pathlib import Path

import pytest

from edge_broker.admin.users import add_admin_user, load_admin_users
from edge_broker.auth.password import PasswordFileError, set_user, write_password_file
from edge_broker.config import ConfigError, load_config, loads_config


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        loads_config(text, "gw.toml")
    return [str(p) for p in info.value.problems]


def test_off_unless_asked_and_on_loopback_in_the_embedded_default() -> None:
    assert not loads_config("").admin.enabled
    embedded = load_config(None).admin
    assert embedded.enabled and embedded.one_time_login and embedded.users_file is None
    assert embedded.bind == "127.0.0.1" and embedded.port == 9884


def test_errors_name_the_key_and_what_to_do(tmp_path: Path) -> None:
    text = "\n".join(problems("[admin]\nenabled = true\n"))
    assert "admin.users_file" in text and "edge-broker admin add" in text
    text = "\n".join(problems('[admin]\nenabled = true\nusers_file = "a"\ntls_cert = "c.pem"\n'))
    assert "admin.tls_cert" in text and "both" in text
    mqtt = tmp_path / "passwords"
    write_password_file(mqtt, set_user({}, "dev", "pw"))
    text = "\n".join(
        problems(f'[passwords]\nfile = "{mqtt}"\n[admin]\nenabled = true\nusers_file = "{mqtt}"\n')
    )
    assert "admin.users_file" in text and "own file" in text
    text = "\n".join(
        problems(
            '[[listeners]]\nname = "a"\nport = 9884\n'
            "[admin]\nenabled = true\none_time_login = true\n"
        )
    )
    assert "admin.port" in text and "collides" in text


def test_users_file_holds_one_role_each(tmp_path: Path) -> None:
    path = tmp_path / "admin-users"
    add_admin_user(path, "alice", "pw1", "operator")
    add_admin_user(path, "vera", "pw2", "viewer")
    users = load_admin_users(path)
    assert {u.name: u.role for u in users.values()} == {"alice": "operator", "vera": "viewer"}
    with pytest.raises(PasswordFileError, match="not one of viewer, operator"):
        add_admin_user(path, "eve", "pw3", "root")
    # an MQTT password file (roles for permissions) is not an admin users file
    mqtt = tmp_path / "passwords"
    write_password_file(mqtt, set_user({}, "dev", "pw", roles=("sensor",)))
    with pytest.raises(PasswordFileError, match="exactly one of viewer, operator"):
        load_admin_users(mqtt)
